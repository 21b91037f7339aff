"""The HA side of a job's checkpoints as the JobMaster's checkpoint driver uses it
(``JobCheckpointRecovery``): ids from the shared counter, pointers fenced by the leadership."""

from __future__ import annotations

import pytest

from yarnflink.highavailability import EmbeddedHaServices, LeadershipLostError
from yarnflink.highavailability.checkpoints import JobCheckpointRecovery

JOB = "d" * 32


def _recovery(ha: EmbeddedHaServices, fence: object = None) -> JobCheckpointRecovery:
    return JobCheckpointRecovery(
        ha.checkpoint_id_counter(JOB, fence),  # type: ignore[arg-type]
        ha.completed_checkpoint_pointer_store(JOB, 2, fence),
    )  # type: ignore[arg-type]


def test_ids_come_from_the_shared_counter_and_a_new_leader_continues_them() -> None:
    ha = EmbeddedHaServices()
    first = _recovery(ha, ha.grant_leadership())
    assert [first.reserve_checkpoint_id(), first.reserve_checkpoint_id()] == [1, 2]
    ha.revoke_leadership()
    second = _recovery(ha, ha.grant_leadership())
    assert second.reserve_checkpoint_id() == 3  # an id the old leader may have started is never reused
    assert second.reserve_checkpoint_id(at_least=10) == 10  # a counter behind the driver is moved past
    assert second.reserve_checkpoint_id() == 11
    ha.close()


def test_the_latest_pointer_is_what_a_new_leader_resumes_from() -> None:
    ha = EmbeddedHaServices()
    r = _recovery(ha, ha.grant_leadership())
    assert r.latest() is None
    r.add_pointer(1, "file:///c/chk-1/_metadata")
    r.add_pointer(2, "file:///c/chk-2/_metadata")
    assert r.add_pointer(3, "file:///c/chk-3/_metadata") == [(1, "file:///c/chk-1/_metadata")]
    ha.revoke_leadership()
    ha.grant_leadership()
    assert _recovery(ha).latest() == (3, "file:///c/chk-3/_metadata")
    # every retained pointer, oldest first: the new leader's coordinator takes them over
    assert _recovery(ha).retained() == [(2, "file:///c/chk-2/_metadata"), (3, "file:///c/chk-3/_metadata")]
    ha.close()


def test_a_deposed_leader_can_neither_complete_a_checkpoint_nor_draw_an_id() -> None:
    ha = EmbeddedHaServices()
    old = _recovery(ha, ha.grant_leadership())
    old.reserve_checkpoint_id()
    ha.revoke_leadership()
    ha.grant_leadership()
    with pytest.raises(LeadershipLostError):
        old.add_pointer(5, "file:///c/chk-5/_metadata")
    with pytest.raises(LeadershipLostError):
        old.reserve_checkpoint_id()
    assert _recovery(ha).latest() is None
    ha.close()
