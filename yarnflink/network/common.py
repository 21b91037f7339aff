"""Plain data types shared by producer and consumer side.

Queue items are ``(kind, payload)`` tuples rather than objects: they are created for every
batch, so they must be as cheap as possible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

#: Queue item kinds (first element of every queued tuple).
KIND_DATA = 0
KIND_EVENT = 1
KIND_END = 2

Item = tuple  # (kind, payload): (KIND_DATA, RecordBatch) | (KIND_EVENT, object) | (KIND_END, None)


@dataclass(frozen=True)
class InputChannelSpec:
    """Where one input channel of a gate reads from."""

    partition_id: str  # id of the producer's ResultPartition
    subpartition: int  # which subpartition of it this consumer reads
    address: str  # "host:port" of the producer's ShuffleEnvironment data server


@dataclass
class BufferOrEvent:
    """One element returned by ``InputGate.next()``: exactly one of ``batch``/``event`` is set."""

    channel: int  # index of the channel in the gate (order of the specs)
    batch: pa.RecordBatch | None = None
    event: Any | None = None

    @property
    def is_event(self) -> bool:
        return self.batch is None


def parse_address(address: str) -> tuple[str, int]:
    """Split ``"host:port"`` (or ``"[v6]:port"``); raises ValueError on anything else."""
    host, sep, port_s = address.rpartition(":")
    if not sep or not host or not port_s.isdigit():
        raise ValueError(f"invalid address {address!r}, expected host:port")
    port = int(port_s)
    if not 0 < port < 65536:
        raise ValueError(f"invalid port in address {address!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port
