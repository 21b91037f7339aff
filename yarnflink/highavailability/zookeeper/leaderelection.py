"""ZooKeeperLeaderElectionDriver: one process's latch in ZooKeeper, and its published addresses.

The latch is the ephemeral-sequential recipe (kazoo's ``Lock``, Curator's ``LeaderLatch``): each
process creates ``leader/latch/<guid>-latch-<seq>``; the lowest leads; every other watches the node
just below its own, so a departure wakes one process only. The driver reports facts as events to
the ``LeaderElectionService`` and never decides leadership itself.

Threads: kazoo calls the connection listener on its connection thread and watches on its callback
thread; both only hand work over. Connection states go straight to the service (a revocation must
not wait behind a ZooKeeper call); everything that talks to ZooKeeper runs on the driver's own
single worker thread, in order. A session LOST starts a new *epoch*: latch events computed in an
older epoch are dropped, so the service never hears of a latch that died with its session.

The lease (see ``leaderelection.py``): a thread probes ZooKeeper every third of the session timeout
T; the lease lasts 2T/3 (of the negotiated T) from the sending of the last answered probe (or latch
read); the thread checks it every T/24, and ``LeaseExpired`` / ``LeaseRenewed`` tell the service
when it flips. Probes are asynchronous, so a dead connection cannot hold the monitor up. They are
no more frequent than kazoo's own pings (sent a third of T after the last request, minus jitter) on
purpose: kazoo notices a silent connection only through an unanswered ping, and requests sent more
often would postpone its pings for ever.
"""

from __future__ import annotations

import concurrent.futures
import logging
import posixpath
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.protocol.states import WatchedEvent

from yarnflink.highavailability.errors import LeadershipLostError
from yarnflink.highavailability.leaderelection import (
    ConnectionState,
    ConnectionStateChanged,
    Event,
    LatchAcquired,
    LatchReleased,
    LeaderFence,
    LeaderInformation,
    LeaderInformationChanged,
    LeaseExpired,
    LeaseRenewed,
)
from yarnflink.highavailability.zookeeper.client import ZooKeeperPaths, session_timeout_of
from yarnflink.highavailability.zookeeper.fencing import TransactionConflict, fenced_commit
from yarnflink.highavailability.zookeeper.worker import SerialWorker

log = logging.getLogger(__name__)

__all__ = ["ZooKeeperLeaderElectionDriver"]

_STATES = {
    KazooState.CONNECTED: ConnectionState.CONNECTED,
    KazooState.SUSPENDED: ConnectionState.SUSPENDED,
    KazooState.LOST: ConnectionState.LOST,
}


def _sequence(name: str) -> int:
    try:
        return int(name.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return -1  # a foreign node sorts first: it is somebody's, so we wait for it


class ZooKeeperLeaderElectionDriver:
    def __init__(
        self, client: KazooClient, paths: ZooKeeperPaths, *, owns_client: bool = False, close_timeout_s: float = 10.0
    ) -> None:
        self.client = client
        self.paths = paths
        self.owns_client = owns_client
        self.close_timeout_s = close_timeout_s
        self._guid = uuid.uuid4().hex
        self._emit: Callable[[Event], None] = lambda e: None
        self._lock = threading.Lock()  # orders epoch changes against emitted latch events
        self._epoch = 0
        self._closed = False
        self._io = SerialWorker("ZooKeeperLeaderElection")
        # owned by the worker thread:
        self._latch: str | None = None
        self._latch_epoch = -1
        self._watched_info: set[str] = set()
        # the lease (guarded by _lock)
        self._last_answered = self._last_probe = time.monotonic()
        self._lease_valid = True
        self._stop_lease = threading.Event()
        self._lease_thread = threading.Thread(target=self._lease_loop, name="ZooKeeperLeaderLease", daemon=True)

    @property
    def lease_s(self) -> float:
        return session_timeout_of(self.client) * 2.0 / 3.0

    # ------------------------------------------------------------------ LeaderElectionDriver
    def start(self, emit: Callable[[Event], None]) -> None:
        self._emit = emit
        self.client.add_listener(self._on_state)
        if self.client.state == KazooState.CONNECTED:
            self._on_state(KazooState.CONNECTED)
        self._lease_thread.start()

    def publish(self, component_id: str, info: LeaderInformation, fence: LeaderFence) -> None:
        self._submit(self._publish, component_id, info, fence)

    def delete(self, component_id: str, fence: LeaderFence) -> None:
        self._submit(self._delete, component_id, fence)

    def reset_latch(self, latch_path: str) -> None:
        self._submit(self._reset, latch_path)

    def verify(self, fence: LeaderFence) -> concurrent.futures.Future[bool]:
        def check() -> bool:
            self.client.sync(self.paths.latch)
            return self.client.exists(fence.latch_path) is not None

        return self._io.submit(check)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._epoch += 1
        self._stop_lease.set()
        self.client.remove_listener(self._on_state)
        # Deleting the latch node hands leadership over at once; without a connection it cannot
        # be deleted, and it goes with the session instead, so do not wait for it then.
        connected = self.client.state == KazooState.CONNECTED
        try:
            self._io.submit(self._release).result(self.close_timeout_s if connected else 0.5)
        except Exception as e:
            log.warning("could not delete the leader latch node (%r); it goes with the session", e)
        self._io.shutdown()
        if self.owns_client:
            self.client.stop()
            self.client.close()

    # ------------------------------------------------------------------ kazoo threads
    def _on_state(self, state: str) -> None:
        """kazoo's connection thread: must not block."""
        with self._lock:
            if self._closed:
                return
            if state == KazooState.LOST:
                self._epoch += 1
            self._emit(ConnectionStateChanged(_STATES[state]))
        if state == KazooState.CONNECTED:
            self._probe()
            self._submit(self._on_connected)

    # ------------------------------------------------------------------ the lease
    def _lease_loop(self) -> None:
        while not self._stop_lease.wait(max(0.02, self.lease_s / 16)):
            if self.client.state == KazooState.CONNECTED and time.monotonic() - self._last_probe >= self.lease_s / 2:
                self._probe()
            self._check_lease()

    def _probe(self) -> None:
        sent = self._last_probe = time.monotonic()
        try:
            self.client.exists_async(self.paths.root).rawlink(lambda r: self._probe_done(r, sent))
        except Exception:  # closed, or not connected: the lease runs out
            pass

    def _probe_done(self, result: Any, sent: float) -> None:
        if result.successful():
            self._answered(sent)

    def _answered(self, sent: float) -> None:
        with self._lock:
            self._last_answered = max(self._last_answered, sent)
        self._check_lease()

    def _check_lease(self) -> None:
        with self._lock:
            valid = time.monotonic() < self._last_answered + self.lease_s
            if valid != self._lease_valid and not self._closed:
                self._lease_valid = valid
                if not valid:
                    log.warning("ZooKeeper leader lease expired: no answer for %.1fs", self.lease_s)
                self._emit(LeaseRenewed() if valid else LeaseExpired())

    def _on_watch(self, event: WatchedEvent) -> None:
        """kazoo's callback thread (also called with a NONE event when the connection drops)."""
        self._submit(self._evaluate)

    def _on_info_watch(self, event: WatchedEvent) -> None:
        path = event.path or ""
        for component_id in list(self._watched_info):
            if self.paths.connection_info(component_id) == path:
                self._submit(self._check_info, component_id)

    def _submit(self, fn: Callable[..., None], *args: Any) -> None:
        if self._closed:
            return
        try:
            self._io.submit(self._guarded, fn, *args)
        except RuntimeError:  # shut down
            pass

    @staticmethod
    def _guarded(fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except KazooException as e:
            # connection trouble: the CONNECTED listener runs everything again
            log.info("ZooKeeper leader election: %s failed: %r", getattr(fn, "__name__", fn), e)
        except Exception:
            log.exception("ZooKeeper leader election: %s failed", getattr(fn, "__name__", fn))

    def _emit_in(self, epoch: int, event: Event) -> None:
        with self._lock:
            if epoch == self._epoch and not self._closed:
                self._emit(event)

    # ------------------------------------------------------------------ worker thread
    def _connected(self) -> bool:
        return not self._closed and self.client.state == KazooState.CONNECTED

    def _on_connected(self) -> None:
        self._evaluate()
        for component_id in list(self._watched_info):
            self._check_info(component_id)

    def _evaluate(self) -> None:
        """Joins the election if this process has no latch node, and reports whether its node is
        the lowest; watches the node just below (or its own node, when leading)."""
        if not self._connected():
            return
        epoch = self._epoch
        if self._latch is not None and self._latch_epoch != epoch:
            self._latch = None  # died with its session
        if self._latch is None:
            self.client.ensure_path(self.paths.latch)
            self._latch = self._create_latch()
            self._latch_epoch = epoch
            log.info("joined the leader election as %s", self._latch)
        sent = time.monotonic()
        children = self.client.get_children(self.paths.latch)
        self._answered(sent)  # the lease covers the latch about to be reported
        mine = posixpath.basename(self._latch)
        if mine not in children:
            gone, self._latch = self._latch, None
            self._emit_in(epoch, LatchReleased(gone))
            self._submit(self._evaluate)
            return
        ordered = sorted(children, key=lambda n: (_sequence(n), n))
        i = ordered.index(mine)
        watched = self._latch if i == 0 else posixpath.join(self.paths.latch, ordered[i - 1])
        if self.client.exists(watched, watch=self._on_watch) is None:
            self._submit(self._evaluate)  # it went meanwhile: look again
            return
        if i == 0:
            self._emit_in(epoch, LatchAcquired(self._latch))

    def _create_latch(self) -> str:
        """Creates this process's latch node; after a connection loss during the create, finds
        the node if it was made (its name carries this driver's guid, as kazoo's Lock does)."""
        prefix = f"{self._guid}-latch-"
        for name in self.client.get_children(self.paths.latch):
            if name.startswith(prefix):
                stale = posixpath.join(self.paths.latch, name)
                owner = self.client.exists(stale)
                if owner is not None and owner.ephemeralOwner == self.client.client_id[0]:
                    return stale
        return str(self.client.create(posixpath.join(self.paths.latch, prefix), ephemeral=True, sequence=True))

    def _reset(self, latch_path: str) -> None:
        if self._latch == latch_path:
            self._latch = None
        try:
            self.client.delete(latch_path)
        except NoNodeError:
            pass
        log.info("left the leader election as %s to join anew", latch_path)
        self._evaluate()

    def _release(self) -> None:
        latch, self._latch = self._latch, None
        if latch is not None and self.client.state == KazooState.CONNECTED:
            try:
                self.client.delete(latch)
            except NoNodeError:
                pass

    def _publish(self, component_id: str, info: LeaderInformation, fence: LeaderFence) -> None:
        """Writes ``info`` as an ephemeral node of this session (delete + create: a node left by an
        earlier leader's session must not vanish with that session), checking ``fence``."""
        path = self.paths.connection_info(component_id)
        self.client.ensure_path(posixpath.dirname(path))
        for _ in range(10):
            stat = self.client.exists(path)

            def ops(tx: Any, stat: Any = stat) -> None:
                if stat is not None:
                    tx.delete(path, stat.version)
                tx.create(path, info.to_bytes(), ephemeral=True)

            try:
                self.client.retry(fenced_commit, self.client, fence, ops)
            except LeadershipLostError as e:
                log.warning("not publishing %s for %s: %s", info, component_id, e)
                self._evaluate()
                return
            except TransactionConflict:
                continue
            log.info("published leader of %s: %s", component_id, info)
            self._watched_info.add(component_id)
            self._check_info(component_id)
            return
        log.warning("gave up publishing %s for %s after repeated conflicts", info, component_id)

    def _delete(self, component_id: str, fence: LeaderFence) -> None:
        self._watched_info.discard(component_id)
        path = self.paths.connection_info(component_id)
        stat = self.client.exists(path)
        if stat is None:
            return
        try:
            fenced_commit(self.client, fence, lambda tx: tx.delete(path, stat.version))
        except (LeadershipLostError, TransactionConflict) as e:
            log.info("leader information of %s not deleted: %s", component_id, e)

    def _check_info(self, component_id: str) -> None:
        """Reads a published node (and watches it): the service re-publishes if it changed."""
        if component_id not in self._watched_info or not self._connected():
            return
        epoch = self._epoch
        path = self.paths.connection_info(component_id)
        try:
            data, _ = self.client.get(path, watch=self._on_info_watch)
            info: LeaderInformation | None = LeaderInformation.from_bytes(data)
        except NoNodeError:
            self.client.exists(path, watch=self._on_info_watch)
            info = None
        except ValueError:
            info = None
        self._emit_in(epoch, LeaderInformationChanged(component_id, info))
