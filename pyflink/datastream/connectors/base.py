"""``pyflink.datastream.connectors.base``: ``Source`` is yarnflink's source interface (an object
whose ``to_spec()`` gives a source spec); ``Sink`` marks what ``sink_to`` takes."""

import enum

from yarnflink.api.connectors import FileSink as Sink
from yarnflink.api.connectors import Source


class DeliveryGuarantee(enum.Enum):
    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1
    NONE = 2


__all__ = ["DeliveryGuarantee", "Sink", "Source"]
