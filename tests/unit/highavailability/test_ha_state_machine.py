"""The pure leader election: every corner as events in, actions out (no threads, no ZooKeeper)."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap

import pytest

from yarnflink.highavailability.leaderelection import (
    Close,
    ConnectionState,
    ConnectionStateChanged,
    ContenderAdded,
    ContenderRemoved,
    DeleteLeaderInformation,
    GrantLeadership,
    LatchAcquired,
    LatchReleased,
    LeaderElection,
    LeaderFence,
    LeaderInformation,
    LeaderInformationChanged,
    LeadershipConfirmed,
    LeaseExpired,
    LeaseRenewed,
    PublishLeaderInformation,
    ResetLatch,
    RevokeLeadership,
)

CONNECTED = ConnectionStateChanged(ConnectionState.CONNECTED)
SUSPENDED = ConnectionStateChanged(ConnectionState.SUSPENDED)
LOST = ConnectionStateChanged(ConnectionState.LOST)


def election(tolerate: bool = False) -> LeaderElection:
    ids = (f"s{i}" for i in itertools.count(1))
    e = LeaderElection(tolerate_suspended=tolerate, new_session_id=lambda: next(ids))
    assert e.handle(ContenderAdded("rm"), ContenderAdded("dispatcher"), CONNECTED) == []
    return e


def leading(tolerate: bool = False) -> LeaderElection:
    e = election(tolerate)
    assert e.handle(LatchAcquired("/l/a-1")) == [GrantLeadership("rm", "s1"), GrantLeadership("dispatcher", "s1")]
    return e


def test_leadership_starts_with_the_latch_and_a_fresh_session_id_per_grant() -> None:
    e = leading()
    assert e.leader == LeaderFence("s1", "/l/a-1") and e.has_leadership("s1") and not e.has_leadership("s2")
    assert e.handle(LatchReleased("/l/a-1")) == [RevokeLeadership("rm", "s1"), RevokeLeadership("dispatcher", "s1")]
    assert e.handle(LatchAcquired("/l/a-2")) == [GrantLeadership("rm", "s2"), GrantLeadership("dispatcher", "s2")]


def test_a_contender_added_while_leading_is_granted_the_current_session_at_once() -> None:
    e = leading()
    assert e.handle(ContenderAdded("job1")) == [GrantLeadership("job1", "s1")]
    with pytest.raises(ValueError, match="already registered"):
        e.handle(ContenderAdded("job1"))


def test_no_leadership_without_a_connection_even_with_the_latch() -> None:
    e = LeaderElection(new_session_id=lambda: "s1")
    assert e.handle(ContenderAdded("rm"), LatchAcquired("/l/a-1")) == []  # still LOST (not connected)
    assert e.handle(CONNECTED) == [GrantLeadership("rm", "s1")]


def test_only_the_current_session_is_published_with_its_fence() -> None:
    e = leading()
    fence = LeaderFence("s1", "/l/a-1")
    assert e.handle(LeadershipConfirmed("rm", "s0", "old:1")) == []  # stale session: ignored
    assert e.handle(LeadershipConfirmed("nobody", "s1", "x:1")) == []  # not a contender
    assert e.handle(LeadershipConfirmed("rm", "s1", "rm:1")) == [
        PublishLeaderInformation("rm", LeaderInformation("s1", "rm:1"), fence)
    ]


def test_leader_information_changed_behind_the_leaders_back_is_published_again() -> None:
    e = leading()
    e.handle(LeadershipConfirmed("rm", "s1", "rm:1"))
    mine = LeaderInformation("s1", "rm:1")
    assert e.handle(LeaderInformationChanged("rm", mine)) == []
    assert e.handle(LeaderInformationChanged("rm", None)) == [
        PublishLeaderInformation("rm", mine, LeaderFence("s1", "/l/a-1"))
    ]
    assert e.handle(LeaderInformationChanged("rm", LeaderInformation("zz", "evil:1"))) == [
        PublishLeaderInformation("rm", mine, LeaderFence("s1", "/l/a-1"))
    ]
    assert e.handle(LeaderInformationChanged("dispatcher", None)) == []  # never confirmed


def test_suspension_revokes_at_once_and_the_latch_is_replaced_on_reconnection() -> None:
    e = leading()
    assert e.handle(SUSPENDED) == [RevokeLeadership("rm", "s1"), RevokeLeadership("dispatcher", "s1")]
    assert e.handle(LatchAcquired("/l/a-1")) == []  # a report about the spent latch: not led again
    assert e.handle(CONNECTED) == [ResetLatch("/l/a-1")]
    assert e.handle(LatchAcquired("/l/a-1")) == []
    assert e.handle(LatchAcquired("/l/a-7")) == [GrantLeadership("rm", "s2"), GrantLeadership("dispatcher", "s2")]
    assert e.leader == LeaderFence("s2", "/l/a-7")


def test_a_standby_has_nothing_to_reset_after_a_suspension() -> None:
    e = election()
    assert e.handle(SUSPENDED, CONNECTED) == []


def test_a_lost_session_revokes_and_forgets_the_latch() -> None:
    e = leading()
    assert e.handle(LOST) == [RevokeLeadership("rm", "s1"), RevokeLeadership("dispatcher", "s1")]
    assert e.latch is None
    assert e.handle(CONNECTED) == []  # the driver joins anew with a new node
    assert e.handle(LatchAcquired("/l/a-9"))[0] == GrantLeadership("rm", "s2")


def test_a_suspension_that_ends_in_a_lost_session_needs_no_reset() -> None:
    e = leading()
    e.handle(SUSPENDED)
    assert e.handle(LOST) == []
    assert e.handle(CONNECTED) == []


def test_tolerated_suspension_keeps_leadership_until_the_lease_expires() -> None:
    e = leading(tolerate=True)
    assert e.handle(SUSPENDED) == []
    assert e.handle(CONNECTED) == []  # back in time: same grant, no reset
    assert e.leader == LeaderFence("s1", "/l/a-1")
    assert e.handle(SUSPENDED) == []
    assert e.handle(LeaseExpired()) == [RevokeLeadership("rm", "s1"), RevokeLeadership("dispatcher", "s1")]
    assert e.handle(CONNECTED) == []  # reconnected, but no answer yet: the lease is still out
    assert e.handle(LeaseRenewed()) == [ResetLatch("/l/a-1")]
    assert e.handle(LatchAcquired("/l/a-2"))[0] == GrantLeadership("rm", "s2")


def test_an_expired_lease_revokes_even_while_the_client_believes_it_is_connected() -> None:
    """kazoo may keep reporting CONNECTED over a dead connection (its pings are postponed by
    requests); the lease decides."""
    e = leading()
    assert e.handle(LeaseExpired()) == [RevokeLeadership("rm", "s1"), RevokeLeadership("dispatcher", "s1")]
    assert e.handle(LatchAcquired("/l/a-1")) == []  # the spent latch is not led again
    assert e.handle(LatchAcquired("/l/a-2")) == []  # nor any latch while the lease is out
    assert e.handle(LeaseRenewed()) == [
        ResetLatch("/l/a-1"),
        GrantLeadership("rm", "s2"),
        GrantLeadership("dispatcher", "s2"),
    ]
    assert e.leader == LeaderFence("s2", "/l/a-2")


def test_a_reset_is_requested_once_per_spent_latch() -> None:
    e = leading()
    e.handle(SUSPENDED)
    assert e.handle(CONNECTED) == [ResetLatch("/l/a-1")]
    assert e.handle(LeaseExpired(), LeaseRenewed(), SUSPENDED, CONNECTED) == []


def test_tolerated_suspension_still_revokes_when_the_session_is_lost() -> None:
    e = leading(tolerate=True)
    e.handle(SUSPENDED)
    assert e.handle(LOST) == [RevokeLeadership("rm", "s1"), RevokeLeadership("dispatcher", "s1")]


def test_close_revokes_first_then_withdraws_published_addresses_and_never_grants_again() -> None:
    e = leading()
    e.handle(LeadershipConfirmed("rm", "s1", "rm:1"))
    fence = LeaderFence("s1", "/l/a-1")
    assert e.handle(Close()) == [
        RevokeLeadership("rm", "s1"),
        RevokeLeadership("dispatcher", "s1"),
        DeleteLeaderInformation("rm", fence),
    ]
    assert e.handle(LatchAcquired("/l/a-2"), CONNECTED) == []


def test_a_removed_contender_withdraws_its_address_and_is_not_granted_again() -> None:
    e = leading()
    e.handle(LeadershipConfirmed("rm", "s1", "rm:1"))
    assert e.handle(ContenderRemoved("rm")) == [DeleteLeaderInformation("rm", LeaderFence("s1", "/l/a-1"))]
    assert e.handle(LatchReleased("/l/a-1"), LatchAcquired("/l/a-2")) == [
        RevokeLeadership("dispatcher", "s1"),
        GrantLeadership("dispatcher", "s2"),
    ]


def test_a_release_of_another_latch_changes_nothing() -> None:
    e = leading()
    assert e.handle(LatchReleased("/l/other")) == []
    assert e.leader is not None


def test_the_pure_modules_import_no_io_library() -> None:
    code = textwrap.dedent("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split('.')[0] in ('kazoo', 'fsspec', 'grpc', 'skein', 'pyspark'):
                    raise ImportError('forbidden import: ' + name)
        sys.meta_path.insert(0, Block())
        import yarnflink.highavailability.leaderelection
        import yarnflink.highavailability.stores
        import yarnflink.highavailability  # the package's top level: services, embedded, standalone
        print('ok')
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
