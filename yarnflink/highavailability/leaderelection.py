"""Leader election as a pure state machine: events in, actions out (no I/O, no threads).

One ``LeaderElection`` per master process decides, from what its driver reports (the process's
latch in ZooKeeper, the state of its ZooKeeper connection) and from what its components ask
(register, confirm), when the process leads. Each time it starts leading it draws a fresh leader
session id (the fencing token of every component of this grant) and grants it to every registered
component; when it stops leading it revokes all of them at once. A component that is ready confirms
the session id with its address, and only then is its address published for retrieval.

Rules, as Flink's ``DefaultLeaderElectionService`` with Curator's ``LeaderLatch``:

* Leadership starts only while the connection is CONNECTED and the driver reports the latch
  acquired (this process's latch node is the lowest).
* It ends when the latch is released, the session is LOST, the service is closed, the connection
  is SUSPENDED (a suspended client cannot know whether its session still lives; with
  ``tolerate_suspended``, i.e. ``high-availability.zookeeper.client.tolerate-suspended-connections``,
  a suspension alone does not end it), or the driver's *lease* expires.
* The lease is what makes "the old leader stops before a new one starts" hold. ZooKeeper expires a
  session a session timeout T after it last heard from the client, and only then can another
  process lead. kazoo may notice a dead connection only about T after the last answer (its pings
  are postponed by every request it sends), too late. So the driver keeps its own lease: it probes
  ZooKeeper often, and the lease lasts 2T/3 from the *sending* of the last answered probe. The
  server heard from the session after that sending, so when the lease expires at least T/3 remains
  before the session can expire: the leader revokes itself in that margin (``LeaseExpired``).
* A latch whose leadership ended without the session ending (suspension, lease) is never led again:
  once reconnected (and the lease renewed) the driver
  replaces it by a new latch node (``ResetLatch``), so every grant has its own latch node. The
  fence of a grant (``LeaderFence``) names that node; ZooKeeper refuses any write that checks a
  fence whose node is gone, which is how a deposed leader is kept from overwriting anything.
* Addresses are published only for the current session id, and re-published if someone changes
  them behind the leader's back.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Union

from yarnflink.highavailability.epoch import session_id_for_latch

__all__ = [
    "Action",
    "Close",
    "ConnectionState",
    "ConnectionStateChanged",
    "ContenderAdded",
    "ContenderRemoved",
    "DeleteLeaderInformation",
    "Event",
    "GrantLeadership",
    "LatchAcquired",
    "LatchReleased",
    "LeaderElection",
    "LeaderFence",
    "LeaderInformation",
    "LeaderInformationChanged",
    "LeadershipConfirmed",
    "LeaseExpired",
    "LeaseRenewed",
    "PublishLeaderInformation",
    "ResetLatch",
    "RevokeLeadership",
]


@dataclass(frozen=True, slots=True)
class LeaderInformation:
    """What a leading component publishes: its leader session id (fencing token) and address."""

    session_id: str
    address: str

    def to_bytes(self) -> bytes:
        return json.dumps({"sessionId": self.session_id, "address": self.address}).encode()

    @staticmethod
    def from_bytes(data: bytes) -> LeaderInformation:
        """Parses ``to_bytes``' form; ValueError if it is not."""
        try:
            d = json.loads(data.decode())
            session_id, address = d["sessionId"], d["address"]
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError):
            raise ValueError(f"not leader information: {data[:100]!r}") from None
        if not isinstance(session_id, str) or not isinstance(address, str):
            raise ValueError(f"not leader information: {data[:100]!r}")
        return LeaderInformation(session_id, address)


@dataclass(frozen=True, slots=True)
class LeaderFence:
    """One leadership grant: its session id and the latch node that was the lowest when it was
    granted. Fenced writes check that node first, in the same ZooKeeper transaction."""

    session_id: str
    latch_path: str


class ConnectionState(enum.Enum):
    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"


# ----------------------------------------------------------------------------- events
@dataclass(frozen=True, slots=True)
class ConnectionStateChanged:
    state: ConnectionState


@dataclass(frozen=True, slots=True)
class LatchAcquired:
    """The driver's latch node ``latch_path`` is the lowest: this process may lead."""

    latch_path: str


@dataclass(frozen=True, slots=True)
class LatchReleased:
    """The latch node ``latch_path`` is gone (deleted, or its session ended)."""

    latch_path: str


@dataclass(frozen=True, slots=True)
class LeaseExpired:
    """No probe was answered for 2/3 of the session timeout: the session may be about to expire."""


@dataclass(frozen=True, slots=True)
class LeaseRenewed:
    """A probe was answered again after ``LeaseExpired``."""


@dataclass(frozen=True, slots=True)
class ContenderAdded:
    component_id: str


@dataclass(frozen=True, slots=True)
class ContenderRemoved:
    component_id: str


@dataclass(frozen=True, slots=True)
class LeadershipConfirmed:
    component_id: str
    session_id: str
    address: str


@dataclass(frozen=True, slots=True)
class LeaderInformationChanged:
    """What ZooKeeper holds for ``component_id`` now (None: nothing)."""

    component_id: str
    info: LeaderInformation | None


@dataclass(frozen=True, slots=True)
class Close:
    pass


Event = Union[
    ConnectionStateChanged,
    LatchAcquired,
    LatchReleased,
    LeaseExpired,
    LeaseRenewed,
    ContenderAdded,
    ContenderRemoved,
    LeadershipConfirmed,
    LeaderInformationChanged,
    Close,
]


# ----------------------------------------------------------------------------- actions
@dataclass(frozen=True, slots=True)
class GrantLeadership:
    component_id: str
    session_id: str


@dataclass(frozen=True, slots=True)
class RevokeLeadership:
    component_id: str
    session_id: str


@dataclass(frozen=True, slots=True)
class PublishLeaderInformation:
    component_id: str
    info: LeaderInformation
    fence: LeaderFence


@dataclass(frozen=True, slots=True)
class DeleteLeaderInformation:
    component_id: str
    fence: LeaderFence


@dataclass(frozen=True, slots=True)
class ResetLatch:
    """Delete latch node ``latch_path`` and join the election with a new node."""

    latch_path: str


Action = Union[GrantLeadership, RevokeLeadership, PublishLeaderInformation, DeleteLeaderInformation, ResetLatch]


# ----------------------------------------------------------------------------- the state machine
@dataclass
class LeaderElection:
    tolerate_suspended: bool = False
    #: None: ``<latch sequence>-<hex>``, ordered by the latch's sequence (``yarnflink.highavailability.epoch``)
    new_session_id: Callable[[], str] | None = None

    connection: ConnectionState = field(default=ConnectionState.LOST, init=False)
    #: The latch node the driver reports as the lowest (None: not acquired).
    latch: str | None = field(default=None, init=False)
    #: A latch whose leadership ended while its session lived; it is replaced before leading again.
    spent_latch: str | None = field(default=None, init=False)
    reset_requested: bool = field(default=False, init=False)
    lease_expired: bool = field(default=False, init=False)
    #: The current grant (None: not leading).
    leader: LeaderFence | None = field(default=None, init=False)
    contenders: list[str] = field(default_factory=list, init=False)
    confirmed: dict[str, LeaderInformation] = field(default_factory=dict, init=False)
    closed: bool = field(default=False, init=False)
    _withdrawn: list[str] = field(default_factory=list, init=False, repr=False)

    def has_leadership(self, session_id: str) -> bool:
        return self.leader is not None and self.leader.session_id == session_id

    def handle(self, *events: Event) -> list[Action]:
        actions: list[Action] = []
        for event in events:
            self._on(event, actions)
            self._reconcile(actions)
        return actions

    # ------------------------------------------------------------------ events
    def _on(self, e: Event, out: list[Action]) -> None:
        if isinstance(e, ConnectionStateChanged):
            self._on_connection(e, out)
        elif isinstance(e, LatchAcquired):
            if e.latch_path != self.spent_latch and not self.closed:
                self.latch = e.latch_path
        elif isinstance(e, LatchReleased):
            if self.latch == e.latch_path:
                self.latch = None
            if self.spent_latch == e.latch_path:
                self.spent_latch = None
        elif isinstance(e, LeaseExpired):
            self.lease_expired = True
            self._spend()
        elif isinstance(e, LeaseRenewed):
            self.lease_expired = False
            if self.connection is ConnectionState.CONNECTED:
                self._request_reset(out)
        elif isinstance(e, ContenderAdded):
            if e.component_id in self.contenders:
                raise ValueError(f"a contender for {e.component_id!r} is already registered")
            if self.closed:
                raise ValueError("the leader election is closed")
            self.contenders.append(e.component_id)
            if self.leader is not None:
                out.append(GrantLeadership(e.component_id, self.leader.session_id))
        elif isinstance(e, ContenderRemoved):
            if e.component_id in self.contenders:
                self.contenders.remove(e.component_id)
                if self.confirmed.pop(e.component_id, None) is not None and self.leader is not None:
                    out.append(DeleteLeaderInformation(e.component_id, self.leader))
        elif isinstance(e, LeadershipConfirmed):
            if self.leader is not None and self.leader.session_id == e.session_id and e.component_id in self.contenders:
                info = LeaderInformation(e.session_id, e.address)
                self.confirmed[e.component_id] = info
                out.append(PublishLeaderInformation(e.component_id, info, self.leader))
        elif isinstance(e, LeaderInformationChanged):
            mine = self.confirmed.get(e.component_id)
            if self.leader is not None and mine is not None and e.info != mine:
                out.append(PublishLeaderInformation(e.component_id, mine, self.leader))
        elif isinstance(e, Close):
            self.closed = True
            old = self._revoke(out)  # components stop before their addresses are withdrawn
            if old is not None:
                out.extend(DeleteLeaderInformation(c, old) for c in self._withdrawn)
        else:  # pragma: no cover - the Event union is closed
            raise TypeError(f"unknown event {e!r}")

    def _on_connection(self, e: ConnectionStateChanged, out: list[Action]) -> None:
        self.connection = e.state
        if e.state is ConnectionState.SUSPENDED:
            if not self.tolerate_suspended:
                self._spend()
        elif e.state is ConnectionState.CONNECTED:
            if not self.lease_expired:
                self._request_reset(out)
        elif e.state is ConnectionState.LOST:
            # the session and with it every ephemeral node of this process is gone
            self.latch = None
            self.spent_latch = None
            self.reset_requested = False

    def _spend(self) -> None:
        """The current grant ends while its session may live on: its latch is not led again."""
        if self.leader is not None:
            self.spent_latch = self.leader.latch_path
            self.reset_requested = False

    def _request_reset(self, out: list[Action]) -> None:
        if self.spent_latch is not None and not self.reset_requested and not self.closed:
            self.reset_requested = True
            if self.latch == self.spent_latch:
                self.latch = None
            out.append(ResetLatch(self.spent_latch))

    # ------------------------------------------------------------------ grant / revoke
    def _may_keep(self) -> bool:
        if self.closed or self.leader is None or self.latch != self.leader.latch_path:
            return False
        if self.leader.latch_path == self.spent_latch or self.lease_expired:
            return False
        if self.connection is ConnectionState.CONNECTED:
            return True
        return self.connection is ConnectionState.SUSPENDED and self.tolerate_suspended

    def _may_start(self) -> bool:
        return (
            not self.closed
            and self.latch is not None
            and self.latch != self.spent_latch
            and self.connection is ConnectionState.CONNECTED
            and not self.lease_expired
        )

    def _revoke(self, out: list[Action]) -> LeaderFence | None:
        old, self.leader = self.leader, None
        self._withdrawn = list(self.confirmed)
        self.confirmed.clear()
        if old is not None:
            out.extend(RevokeLeadership(c, old.session_id) for c in self.contenders)
        return old

    def _reconcile(self, out: list[Action]) -> None:
        if self.leader is not None and not self._may_keep():
            self._revoke(out)
        if self.leader is None and self._may_start():
            assert self.latch is not None
            session_id = self.new_session_id() if self.new_session_id is not None else session_id_for_latch(self.latch)
            self.leader = LeaderFence(session_id, self.latch)
            out.extend(GrantLeadership(c, self.leader.session_id) for c in self.contenders)
