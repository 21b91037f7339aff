"""Leader election and retrieval against a real ZooKeeper: each ZooKeeperHaServices is one master
process (its own kazoo client and session). The Timeline orders every grant and revocation of a
test, so "A stopped leading before B started" is checked, not assumed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from kazoo.client import KazooState

from tests.zk import ZkProxy, wait_for
from yarnflink.highavailability import RESOURCE_MANAGER, LeaderInformation, LeadershipLostError
from yarnflink.highavailability.zookeeper.services import ZooKeeperHaServices

from .helpers import RecordingContender, Timeline, join

WAIT = 30.0


def contend(ha: ZooKeeperHaServices, name: str, timeline: Timeline) -> RecordingContender:
    c = RecordingContender(name, timeline, address=f"{name}:6123")
    join(ha.leader_election_service(), RESOURCE_MANAGER, c)
    return c


def published(ha: ZooKeeperHaServices) -> LeaderInformation | None:
    try:
        data, _ = ha.client.get(ha.paths.connection_info(RESOURCE_MANAGER))
    except Exception:
        return None
    return LeaderInformation.from_bytes(data)


def latch_nodes(ha: ZooKeeperHaServices) -> list[str]:
    return sorted(ha.client.get_children(ha.paths.latch))


class Retrieved:
    """A retrieval listener that records every notification."""

    def __init__(self) -> None:
        self.seen: list[LeaderInformation | None] = []
        self._cond = threading.Condition()

    def __call__(self, info: LeaderInformation | None) -> None:
        with self._cond:
            self.seen.append(info)
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[LeaderInformation | None], bool], timeout: float = WAIT) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self.seen) and predicate(self.seen[-1]), timeout):
                raise AssertionError(f"retrieval never saw the expected leader; saw {self.seen}")


def test_of_two_contenders_exactly_one_leads_and_its_address_is_retrieved(make_ha: Any, timeline: Timeline) -> None:
    a, b = make_ha(), make_ha()
    ca, cb = contend(a, "A", timeline), contend(b, "B", timeline)
    first = wait_for(lambda: [e for e in timeline.entries if e.what == "grant"], WAIT, "a grant")[0]  # type: ignore[index]
    leader_ha, leader, other = (a, ca, cb) if first.who == "A" else (b, cb, ca)
    info = LeaderInformation(first.session_id or "", leader.address)
    wait_for(lambda: published(leader_ha) == info, WAIT, "the leader's address in ZooKeeper")

    listener = Retrieved()
    retriever = make_ha().resource_manager_leader_retriever().start(listener)
    listener.wait_for(lambda i: i == info)
    assert retriever.wait_for_leader(1) == info
    # the standby is in the election (its latch node waits) but was never granted
    assert len(latch_nodes(a)) == 2
    a.leader_election_service().drain()
    b.leader_election_service().drain()
    assert timeline.of(other.name) == []
    assert leader_ha.leader_election_service().verify_leadership(first.session_id or "")
    retriever.stop()


def test_closing_the_leader_revokes_it_before_the_standby_leads_with_a_new_session(
    make_ha: Any, timeline: Timeline
) -> None:
    a = make_ha()
    ca = contend(a, "A", timeline)
    granted_a = timeline.wait("A", "grant", WAIT)
    wait_for(lambda: published(a) is not None, WAIT, "A's address")
    b = make_ha()
    cb = contend(b, "B", timeline)
    listener = Retrieved()
    retriever = make_ha().resource_manager_leader_retriever().start(listener)
    listener.wait_for(lambda i: i is not None and i.address == ca.address)

    a.close()

    revoked_a = timeline.wait("A", "revoke", WAIT)
    granted_b = timeline.wait("B", "grant", WAIT)
    assert revoked_a.seq < granted_b.seq
    assert granted_b.session_id != granted_a.session_id
    listener.wait_for(lambda i: i == LeaderInformation(granted_b.session_id or "", cb.address))
    retriever.stop()


@pytest.mark.parametrize(
    "tolerate,chatty",
    [(False, False), (False, True), (True, True)],
    ids=["default", "default-busy-client", "tolerate-suspended-busy-client"],
)
def test_a_partitioned_leader_steps_down_before_its_session_expires_and_then_cannot_write(
    proxy: ZkProxy, make_ha: Any, timeline: Timeline, tolerate: bool, chatty: bool
) -> None:
    """The leader's process lives but its network to ZooKeeper is cut: it must give up leadership
    on its own before ZooKeeper expires its session and lets the standby lead; its late writes
    fail. A busy client (requests all the time) is the hard case: kazoo then notices the dead
    connection only about a session timeout late, and only the lease revokes in time."""
    a = make_ha(
        {
            "high-availability.zookeeper.quorum": proxy.address,
            "high-availability.zookeeper.client.session-timeout": "3 s",
            "high-availability.zookeeper.client.tolerate-suspended-connections": str(tolerate).lower(),
        }
    )
    contend(a, "A", timeline)
    granted_a = timeline.wait("A", "grant", WAIT)
    fence_a = a.leader_election_service().fence(granted_a.session_id or "")
    wait_for(lambda: published(a) is not None, WAIT, "A's address")
    b = make_ha()
    cb = contend(b, "B", timeline)
    wait_for(lambda: len(latch_nodes(b)) == 2, WAIT, "B in the election")
    states: list[str] = []
    a.client.add_listener(states.append)
    stop_chatter = threading.Event()

    def chatter() -> None:
        while not stop_chatter.wait(0.1):
            try:
                a.client.exists_async("/")
            except Exception:
                pass

    if chatty:
        threading.Thread(target=chatter, daemon=True).start()

    proxy.blackhole()

    revoked_a = timeline.wait("A", "revoke", WAIT)
    assert KazooState.LOST not in states, "A was revoked only when it learned its session had expired"
    granted_b = timeline.wait("B", "grant", WAIT)
    assert revoked_a.seq < granted_b.seq
    assert granted_b.session_id != granted_a.session_id
    wait_for(lambda: published(b) == LeaderInformation(granted_b.session_id or "", cb.address), WAIT, "B's address")

    stop_chatter.set()
    proxy.heal()  # A reconnects, learns its session is gone, and joins again as a standby
    wait_for(
        lambda: KazooState.LOST in states and a.client.state == KazooState.CONNECTED,
        WAIT,
        "A reconnected with a new session",
    )
    wait_for(lambda: len(latch_nodes(b)) == 2, WAIT, "A back in the election")
    with pytest.raises(LeadershipLostError):
        a.checkpoint_id_counter("0" * 32, fence_a).start()
    a.leader_election_service().driver.publish(RESOURCE_MANAGER, LeaderInformation("stale", "A:6123"), fence_a)
    a.leader_election_service().drain()
    b.leader_election_service().drain()
    assert published(b) == LeaderInformation(granted_b.session_id or "", cb.address)
    assert [e.what for e in timeline.of("A")] == ["grant", "revoke"]
    assert [e.what for e in timeline.of("B")] == ["grant"]


@pytest.mark.parametrize("cut", ["reset", "partition"])
def test_a_suspended_leader_that_reconnects_leads_again_only_under_a_new_session_and_latch(
    proxy: ZkProxy, make_ha: Any, timeline: Timeline, cut: str
) -> None:
    """Without tolerance a suspension ends leadership even if the session survives: the grant's
    latch node is replaced, so writes fenced by the old grant fail."""
    a = make_ha(
        {
            "high-availability.zookeeper.quorum": proxy.address,
            "high-availability.zookeeper.client.session-timeout": "6 s",
        }
    )
    contend(a, "A", timeline)
    first = timeline.wait("A", "grant", WAIT)
    old_fence = a.leader_election_service().fence(first.session_id or "")
    session = a.client.client_id

    if cut == "reset":
        proxy.drop_connections()  # the client sees the connection close at once and reconnects
    else:
        proxy.blackhole()  # silence: the lease (or kazoo's ping) notices
        timeline.wait("A", "revoke", WAIT)
        proxy.heal()

    assert timeline.wait("A", "revoke", WAIT).seq == first.seq + 1
    second = timeline.wait("A", "grant", WAIT, after=first.seq)
    assert a.client.client_id == session, "the session survived: this is a suspension, not an expiry"
    assert second.session_id != first.session_id
    new_fence = a.leader_election_service().fence(second.session_id or "")
    assert new_fence.latch_path != old_fence.latch_path
    assert latch_nodes(a) == [new_fence.latch_path.rsplit("/", 1)[1]]
    with pytest.raises(LeadershipLostError):
        a.checkpoint_id_counter("0" * 32, old_fence).start()
    a.checkpoint_id_counter("0" * 32, new_fence).start()
    wait_for(
        lambda: published(a) == LeaderInformation(second.session_id or "", "A:6123"), WAIT, "the new session's address"
    )


def test_a_tolerated_suspension_keeps_the_leader_and_its_session(
    proxy: ZkProxy, make_ha: Any, timeline: Timeline
) -> None:
    """With tolerate-suspended-connections a dropped connection that is re-established before the
    lease runs out (a ZooKeeper server restarted, a connection reset) costs no leadership."""
    a = make_ha(
        {
            "high-availability.zookeeper.quorum": proxy.address,
            "high-availability.zookeeper.client.session-timeout": "6 s",
            "high-availability.zookeeper.client.tolerate-suspended-connections": "true",
        }
    )
    contend(a, "A", timeline)
    granted = timeline.wait("A", "grant", WAIT)
    states: list[str] = []
    a.client.add_listener(states.append)

    proxy.drop_connections()

    wait_for(lambda: states[-2:] == [KazooState.SUSPENDED, KazooState.CONNECTED], WAIT, "A reconnected")
    a.leader_election_service().drain()
    assert timeline.of("A") == [granted]
    assert a.leader_election_service().verify_leadership(granted.session_id or "")


def test_retrieval_sees_every_change_of_leader_and_address(make_ha: Any, timeline: Timeline) -> None:
    listener = Retrieved()
    retriever = make_ha().resource_manager_leader_retriever().start(listener)
    listener.wait_for(lambda i: i is None)
    a = make_ha()
    ca = contend(a, "A", timeline)
    ga = timeline.wait("A", "grant", WAIT)
    listener.wait_for(lambda i: i == LeaderInformation(ga.session_id or "", "A:6123"))
    ca.handle.confirm_leadership(ga.session_id or "", "A:7000")  # type: ignore[union-attr]
    listener.wait_for(lambda i: i == LeaderInformation(ga.session_id or "", "A:7000"))
    b = make_ha()
    contend(b, "B", timeline)
    a.close()
    gb = timeline.wait("B", "grant", WAIT)
    listener.wait_for(lambda i: i == LeaderInformation(gb.session_id or "", "B:6123"))
    seen = [i for i in listener.seen if i is not None]
    assert seen == [
        LeaderInformation(ga.session_id or "", "A:6123"),
        LeaderInformation(ga.session_id or "", "A:7000"),
        LeaderInformation(gb.session_id or "", "B:6123"),
    ]
    retriever.stop()


def test_an_overwritten_address_is_restored_by_the_leader(make_ha: Any, timeline: Timeline) -> None:
    a = make_ha()
    contend(a, "A", timeline)
    g = timeline.wait("A", "grant", WAIT)
    mine = LeaderInformation(g.session_id or "", "A:6123")
    wait_for(lambda: published(a) == mine, WAIT, "A's address")
    a.client.set(a.paths.connection_info(RESOURCE_MANAGER), LeaderInformation("evil", "x:1").to_bytes())
    wait_for(lambda: published(a) == mine, WAIT, "A's address restored")
