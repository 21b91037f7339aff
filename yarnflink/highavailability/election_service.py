"""LeaderElectionService: runs one process's ``LeaderElection`` on its own asyncio loop (Flink's
``DefaultLeaderElectionService``) between a driver and the process's components.

Drivers report from their own threads (kazoo calls back on its threads): ``emit(event)`` only hands
the event to the service's loop, where the state machine decides and the service carries out its
actions. Contender callbacks run on that loop too and must not block: a component hands the call
to its own loop (``RpcEndpoint.call_soon``). Driver methods must not block either; a driver queues
its ZooKeeper I/O on its own thread, so a hanging ZooKeeper call never delays a revocation.

A component's life with leadership::

    handle = service.create_leader_election("resource_manager")
    handle.start(contender)
    # later, on the service's loop:   contender.grant_leadership(session_id)
    #   the component starts acting with fencing token session_id, then
    handle.confirm_leadership(session_id, address)       # publishes the address
    fence = handle.fence(session_id)                     # for fenced HA store writes
    handle.verify_leadership(session_id)                 # a ZooKeeper round trip, before acting
    # on the service's loop:          contender.revoke_leadership()  -> stop acting at once
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from typing import Protocol

from yarnflink.highavailability.errors import LeadershipLostError
from yarnflink.highavailability.leaderelection import (
    Action,
    Close,
    ContenderAdded,
    ContenderRemoved,
    DeleteLeaderInformation,
    Event,
    GrantLeadership,
    LeaderElection,
    LeaderFence,
    LeaderInformation,
    LeadershipConfirmed,
    PublishLeaderInformation,
    ResetLatch,
    RevokeLeadership,
)

log = logging.getLogger(__name__)

__all__ = ["LeaderContender", "LeaderElectionDriver", "LeaderElectionHandle", "LeaderElectionService"]


class LeaderContender(Protocol):
    """A component that can lead (Flink's ``LeaderContender``). Called on the service's loop."""

    def grant_leadership(self, session_id: str) -> None: ...

    def revoke_leadership(self) -> None: ...


class LeaderElectionDriver(Protocol):
    """The I/O side of one process's election. No method blocks."""

    def start(self, emit: Callable[[Event], None]) -> None: ...

    def publish(self, component_id: str, info: LeaderInformation, fence: LeaderFence) -> None: ...

    def delete(self, component_id: str, fence: LeaderFence) -> None: ...

    def reset_latch(self, latch_path: str) -> None: ...

    def verify(self, fence: LeaderFence) -> concurrent.futures.Future[bool]: ...

    def close(self) -> None: ...


class LeaderElectionService:
    def __init__(
        self,
        driver: LeaderElectionDriver,
        *,
        tolerate_suspended: bool = False,
        new_session_id: Callable[[], str] | None = None,
        name: str = "LeaderElectionService",
    ) -> None:
        self.driver = driver
        self.name = name
        kwargs = {"new_session_id": new_session_id} if new_session_id is not None else {}
        self._election = LeaderElection(tolerate_suspended=tolerate_suspended, **kwargs)  # type: ignore[arg-type]
        self._contenders: dict[str, LeaderContender] = {}
        #: The current grant, readable from any thread (replaced, never mutated).
        self._leader: LeaderFence | None = None
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._started = False
        self._closed = False

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> LeaderElectionService:
        if not self._started:
            self._started = True
            self._thread.start()
            self.driver.start(self._post)
        return self

    def close(self, timeout: float = 10.0) -> None:
        """Revokes every component (on the loop, before anything else happens), withdraws the
        published addresses, closes the driver (which gives up the latch) and stops the loop."""
        if self._closed:
            return
        self._closed = True
        if self._started:
            try:
                self._run_on_loop(lambda: self._handle(Close()), timeout)
            except Exception:
                log.exception("%s: closing the election failed", self.name)
        try:
            self.driver.close()
        finally:
            if self._started:
                self.loop.call_soon_threadsafe(self.loop.stop)
                self._thread.join(timeout)
            if not self._thread.is_alive():
                self.loop.close()

    # ------------------------------------------------------------------ components
    def create_leader_election(self, component_id: str) -> LeaderElectionHandle:
        """A component's handle, not yet in the election: keep it, then ``handle.start(contender)``
        (the contender may be granted before ``start`` returns and may need the handle then)."""
        if "/" in component_id or not component_id:
            raise ValueError(f"invalid component id {component_id!r}")
        return LeaderElectionHandle(self, component_id)

    def register(self, component_id: str, contender: LeaderContender) -> LeaderElectionHandle:
        """``create_leader_election`` and ``start`` in one."""
        handle = self.create_leader_election(component_id)
        handle.start(contender)
        return handle

    def _register(self, component_id: str, contender: LeaderContender) -> None:
        """Adds a contender; it is granted leadership at once if this process leads."""

        def add() -> None:
            if component_id in self._contenders:
                raise ValueError(f"a contender for {component_id!r} is already registered")
            self._contenders[component_id] = contender
            try:
                self._handle(ContenderAdded(component_id))
            except ValueError:
                del self._contenders[component_id]
                raise

        self._run_on_loop(add)

    def _unregister(self, component_id: str) -> None:
        def remove() -> None:
            if self._contenders.pop(component_id, None) is not None:
                self._handle(ContenderRemoved(component_id))

        if not self._closed:
            self._run_on_loop(remove)

    # ------------------------------------------------------------------ queries (any thread)
    @property
    def leader(self) -> LeaderFence | None:
        return self._leader

    def has_leadership(self, session_id: str) -> bool:
        fence = self._leader
        return fence is not None and fence.session_id == session_id

    def fence(self, session_id: str) -> LeaderFence:
        fence = self._leader
        if fence is None or fence.session_id != session_id:
            raise LeadershipLostError(f"leader session {session_id} is not the current one")
        return fence

    def verify_leadership(self, session_id: str, timeout: float = 10.0) -> bool:
        """True if ``session_id`` is the current grant here and its latch node still exists in
        ZooKeeper after a sync (a round trip; call it off the loops that must stay responsive)."""
        fence = self._leader
        if fence is None or fence.session_id != session_id:
            return False
        try:
            return bool(self.driver.verify(fence).result(timeout)) and self.has_leadership(session_id)
        except Exception:
            log.warning("%s: could not verify leadership of %s", self.name, session_id, exc_info=True)
            return False

    def drain(self, timeout: float = 10.0) -> None:
        """Waits until every event handed to the loop so far has been handled (for tests)."""
        self._run_on_loop(lambda: None, timeout)

    # ------------------------------------------------------------------ the loop
    def _post(self, event: Event) -> None:
        """From any thread: hand ``event`` to the loop."""
        try:
            self.loop.call_soon_threadsafe(self._handle, event)
        except RuntimeError:  # loop closed: the service is gone
            pass

    def _run_on_loop(self, fn: Callable[[], None], timeout: float = 10.0) -> None:
        if threading.current_thread() is self._thread:
            fn()  # e.g. a contender's callback registering another component
            return
        if not self._started:
            raise RuntimeError(f"{self.name} is not started")

        async def run() -> None:
            fn()

        asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def _handle(self, event: Event) -> None:
        actions = self._election.handle(event)
        self._leader = self._election.leader
        if actions:
            log.debug("%s: %s -> %s", self.name, event, actions)
        for action in actions:
            self._execute(action)

    def _execute(self, a: Action) -> None:
        if isinstance(a, GrantLeadership):
            c = self._contenders.get(a.component_id)
            log.info("%s: granting leadership of %s (session %s)", self.name, a.component_id, a.session_id)
            if c is not None:
                _guarded(c.grant_leadership, a.session_id)
        elif isinstance(a, RevokeLeadership):
            c = self._contenders.get(a.component_id)
            log.info("%s: revoking leadership of %s (session %s)", self.name, a.component_id, a.session_id)
            if c is not None:
                _guarded(c.revoke_leadership)
        elif isinstance(a, PublishLeaderInformation):
            self.driver.publish(a.component_id, a.info, a.fence)
        elif isinstance(a, DeleteLeaderInformation):
            self.driver.delete(a.component_id, a.fence)
        elif isinstance(a, ResetLatch):
            self.driver.reset_latch(a.latch_path)


def _guarded(fn: Callable[..., None], *args: object) -> None:
    try:
        fn(*args)
    except Exception:
        log.exception("leader contender callback %s failed", getattr(fn, "__qualname__", fn))


class LeaderElectionHandle:
    """One component's part in the election (Flink's ``LeaderElection``)."""

    def __init__(self, service: LeaderElectionService, component_id: str) -> None:
        self.service = service
        self.component_id = component_id

    def start(self, contender: LeaderContender) -> None:
        """Joins the election; ``contender`` is granted at once if the process leads."""
        self.service._register(self.component_id, contender)

    def confirm_leadership(self, session_id: str, address: str) -> None:
        """The component leads under ``session_id`` and serves at ``address``: publish it (only
        if ``session_id`` is still the current grant when the loop gets to it)."""
        self.service._post(LeadershipConfirmed(self.component_id, session_id, address))

    def has_leadership(self, session_id: str) -> bool:
        return self.service.has_leadership(session_id)

    def fence(self, session_id: str) -> LeaderFence:
        return self.service.fence(session_id)

    def verify_leadership(self, session_id: str, timeout: float = 10.0) -> bool:
        return self.service.verify_leadership(session_id, timeout)

    def close(self) -> None:
        """Leaves the election; a leading component's published address is withdrawn."""
        self.service._unregister(self.component_id)
