"""``pyflink.datastream.connectors.number_seq``."""

from yarnflink.api.connectors import NumberSequenceSource

__all__ = ["NumberSequenceSource"]
