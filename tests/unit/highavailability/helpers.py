"""Test doubles of the HA tests: contenders that record what they are told, on one timeline."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from yarnflink.highavailability.election_service import LeaderElectionHandle
from yarnflink.jobgraph.jobgraph import IntermediateDataSet, JobEdge, JobGraph, JobVertex, OperatorDescriptor


@dataclass(frozen=True)
class Entry:
    seq: int
    who: str
    what: str  # "grant" | "revoke"
    session_id: str | None
    at: float


class Timeline:
    """Every contender callback of a test, in the order they ran (all contenders of a test share
    it, so 'A was revoked before B was granted' is a comparison of positions)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.entries: list[Entry] = []

    def add(self, who: str, what: str, session_id: str | None) -> None:
        with self._cond:
            self.entries.append(Entry(len(self.entries), who, what, session_id, time.monotonic()))
            self._cond.notify_all()

    def wait(self, who: str, what: str, timeout: float, after: int = -1) -> Entry:
        """The first entry of ``who`` doing ``what`` with seq > ``after``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for e in self.entries:
                    if e.seq > after and e.who == who and e.what == what:
                        return e
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"timed out after {timeout}s waiting for {who} {what}; timeline: {self.entries}"
                    )
                self._cond.wait(left)

    def of(self, who: str) -> list[Entry]:
        with self._cond:
            return [e for e in self.entries if e.who == who]


class RecordingContender:
    """Records grants and revocations; on a grant it confirms with ``address`` (as a component
    does once it is ready), unless ``confirm`` is False."""

    def __init__(self, name: str, timeline: Timeline, address: str = "", confirm: bool = True) -> None:
        self.name = name
        self.timeline = timeline
        self.address = address or f"{name}:1234"
        self.confirm = confirm
        self.handle: LeaderElectionHandle | None = None
        self.session_id: str | None = None
        self.on_grant: Callable[[str], None] = lambda sid: None

    def grant_leadership(self, session_id: str) -> None:
        self.session_id = session_id
        self.timeline.add(self.name, "grant", session_id)
        self.on_grant(session_id)
        if self.confirm and self.handle is not None:
            self.handle.confirm_leadership(session_id, self.address)

    def revoke_leadership(self) -> None:
        self.timeline.add(self.name, "revoke", self.session_id)
        self.session_id = None

    @property
    def leading(self) -> bool:
        entries = self.timeline.of(self.name)
        return bool(entries) and entries[-1].what == "grant"


def join(service, component_id: str, contender: RecordingContender) -> LeaderElectionHandle:  # type: ignore[no-untyped-def]
    """Registers ``contender`` under ``component_id`` (it gets its handle before any grant)."""
    contender.handle = service.create_leader_election(component_id)
    contender.handle.start(contender)
    return contender.handle


def graph(job_id: str, name: str = "wordcount") -> JobGraph:
    """A two-vertex JobGraph (source -> keyed sum) with id ``job_id``."""
    src, dst, ds = "1" * 32, "2" * 32, "3" * 32
    return JobGraph(
        job_id,
        name,
        [
            JobVertex(src, "src", 2, 128, [OperatorDescriptor(0, "src", "source", b"spec", output_datasets=[ds])]),
            JobVertex(dst, "sum", 2, 128, [OperatorDescriptor(1, "sum", "reduce", b"spec")]),
        ],
        [IntermediateDataSet(ds, src)],
        [JobEdge(ds, dst, "hash", b"key")],
    )
