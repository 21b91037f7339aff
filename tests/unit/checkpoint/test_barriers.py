"""Barrier alignment (EXACTLY_ONCE) and barrier tracking (AT_LEAST_ONCE) at a task's input."""

from __future__ import annotations

import pytest

from yarnflink.checkpoint.barriers import (
    AbortCheckpointOnBarrier,
    AlignedBarrierHandler,
    BarrierTracker,
    CancelCheckpointMarker,
    CheckpointBarrier,
    ProcessBuffer,
    TriggerCheckpointOnBarrier,
    create_barrier_handler,
)


def B(n: int) -> CheckpointBarrier:  # noqa: N802
    return CheckpointBarrier(n, n * 1000)


def processed(actions: list) -> list:
    return [a.item for a in actions if isinstance(a, ProcessBuffer)]


def test_aligned_blocks_channels_that_delivered_the_barrier_until_all_have() -> None:
    h = AlignedBarrierHandler(3)
    assert h.on_buffer(0, "a1") == [ProcessBuffer(0, "a1")]
    assert h.on_barrier(0, B(1)) == []
    assert h.blocked == {0} and h.is_aligning
    assert h.on_buffer(0, "a2") == []  # after the barrier: held back
    assert h.on_buffer(1, "b1") == [ProcessBuffer(1, "b1")]  # before its barrier: processed
    assert h.on_barrier(2, B(1)) == []
    assert h.on_buffer(2, "c2") == []
    assert h.on_buffer(0, "a3") == []
    actions = h.on_barrier(1, B(1))
    assert actions[0] == TriggerCheckpointOnBarrier(B(1))
    assert processed(actions[1:]) == ["a2", "c2", "a3"]  # released in arrival order, after the snapshot
    assert h.blocked == set() and not h.is_aligning and h.held_items == 0
    assert h.on_buffer(0, "a4") == [ProcessBuffer(0, "a4")]


def test_aligned_single_channel_triggers_at_once() -> None:
    h = create_barrier_handler("EXACTLY_ONCE", 1)
    assert h.on_barrier(0, B(5)) == [TriggerCheckpointOnBarrier(B(5))]
    assert h.on_barrier(0, B(4)) == []  # older than the last triggered one


def test_aligned_newer_barrier_aborts_the_alignment_in_progress() -> None:
    h = AlignedBarrierHandler(2)
    h.on_barrier(0, B(1))
    h.on_buffer(0, "x")
    h.on_barrier(0, B(2))  # held: channel 0 is blocked
    actions = h.on_barrier(1, B(2))  # channel 1 never sent barrier 1 (cancelled upstream, say)
    assert isinstance(actions[0], AbortCheckpointOnBarrier) and actions[0].checkpoint_id == 1
    assert "CHECKPOINT_DECLINED_SUBSUMED" in actions[0].reason
    assert actions[1] == ProcessBuffer(0, "x")
    assert actions[2] == TriggerCheckpointOnBarrier(B(2))  # the held barrier 2 of channel 0 + this one
    assert h.on_barrier(1, B(1)) == []  # a late barrier of the aborted checkpoint is ignored


def test_aligned_cancel_marker_aborts_and_releases() -> None:
    h = AlignedBarrierHandler(2)
    h.on_barrier(0, B(3))
    h.on_buffer(0, "held")
    actions = h.on_cancel_marker(1, CancelCheckpointMarker(3))
    assert actions == [AbortCheckpointOnBarrier(3, actions[0].reason), ProcessBuffer(0, "held")]
    assert "CANCELLATION_BARRIER" in actions[0].reason
    assert h.on_barrier(1, B(3)) == []
    # a marker for a checkpoint not seen yet aborts it here too (and later barriers are ignored)
    assert h.on_cancel_marker(0, CancelCheckpointMarker(4))[0].checkpoint_id == 4
    assert h.on_barrier(0, B(4)) == [] and h.on_barrier(1, B(4)) == []


def test_aligned_ended_channel_no_longer_takes_part() -> None:
    h = AlignedBarrierHandler(2)
    h.on_barrier(0, B(1))
    assert h.on_end_of_partition(1) == [TriggerCheckpointOnBarrier(B(1))]
    assert h.on_barrier(0, B(2)) == [TriggerCheckpointOnBarrier(B(2))]


def test_tracker_never_blocks_and_triggers_when_all_channels_delivered() -> None:
    h = create_barrier_handler("AT_LEAST_ONCE", 2)
    assert isinstance(h, BarrierTracker)
    assert h.on_barrier(0, B(1)) == []
    assert h.on_buffer(0, "after barrier") == [ProcessBuffer(0, "after barrier")]
    assert h.on_barrier(0, B(2)) == []  # overlapping checkpoints are tracked separately
    assert h.on_barrier(1, B(1)) == [TriggerCheckpointOnBarrier(B(1))]
    assert h.on_barrier(1, B(2)) == [TriggerCheckpointOnBarrier(B(2))]


def test_tracker_completing_a_newer_checkpoint_aborts_older_incomplete_ones() -> None:
    h = BarrierTracker(2)
    h.on_barrier(0, B(1))
    h.on_barrier(0, B(2))
    actions = h.on_barrier(1, B(2))
    assert actions[0] == AbortCheckpointOnBarrier(1, actions[0].reason)
    assert actions[1] == TriggerCheckpointOnBarrier(B(2))
    assert h.on_barrier(1, B(1)) == []
    assert h.on_cancel_marker(0, CancelCheckpointMarker(3))[-1].checkpoint_id == 3
    assert h.on_barrier(0, B(3)) == []


def test_bad_channel_and_mode() -> None:
    with pytest.raises(ValueError, match="out of range"):
        AlignedBarrierHandler(2).on_buffer(2, "x")
    with pytest.raises(ValueError, match="unknown checkpointing mode"):
        create_barrier_handler("MAYBE", 1)
