"""The results of ``execute_and_collect()`` as the client reads them while the job runs.

The collect sink's subtasks send batches (Arrow IPC payloads) to the JobMaster; the log keeps them
in arrival order with the execution attempt that sent them. A client reads ``since(offset)`` again
and again (``GET /jobs/:jobid/collect?offset=n``), getting the payloads after what it has read.
A payload of an attempt that a restart replaced is not served; if the client already read one,
``stale`` tells it that what it read may be repeated (Flink's collect without checkpointing
gives up the same way). Pure: the JobMaster says which attempts are current.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CollectedSince:
    payloads: list[bytes]
    #: the offset to read from next time
    offset: int
    #: an attempt whose results were already read was replaced by a restart
    stale: bool


@dataclass
class CollectLog:
    entries: list[tuple[str, bytes]] = field(default_factory=list)

    def add(self, attempt_id: str, payload: bytes) -> None:
        self.entries.append((attempt_id, payload))

    def since(self, offset: int, is_current: Callable[[str], bool]) -> CollectedSince:
        if offset < 0 or offset > len(self.entries):
            raise ValueError(f"collect offset {offset} is outside 0..{len(self.entries)}")
        stale = any(not is_current(a) for a, _ in self.entries[:offset])
        payloads = [p for a, p in self.entries[offset:] if is_current(a)]
        return CollectedSince(payloads, len(self.entries), stale)

    def frozen(self, is_current: Callable[[str], bool]) -> FrozenCollectLog:
        """What stays when the job ended (its JobMaster is gone)."""
        return FrozenCollectLog([p if is_current(a) else None for a, p in self.entries])


@dataclass(frozen=True)
class FrozenCollectLog:
    #: a payload per entry, None for one of a replaced attempt
    payloads: list[bytes | None]

    def since(self, offset: int) -> CollectedSince:
        if offset < 0 or offset > len(self.payloads):
            raise ValueError(f"collect offset {offset} is outside 0..{len(self.payloads)}")
        stale = any(p is None for p in self.payloads[:offset])
        return CollectedSince([p for p in self.payloads[offset:] if p is not None], len(self.payloads), stale)
