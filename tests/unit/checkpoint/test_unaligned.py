"""Unaligned checkpoints: the barrier handler as events in / actions out, channel state
serialization, and restore assignment (pure, no servers)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from yarnflink.checkpoint.assignment import RestoreVertex, assign_state
from yarnflink.checkpoint.barriers import (
    AbortCheckpointOnBarrier,
    AlignedBarrierHandler,
    CancelCheckpointMarker,
    ChannelStateComplete,
    CheckpointBarrier,
    ProcessBuffer,
    TriggerCheckpointOnBarrier,
    UnalignedBarrierHandler,
    create_barrier_handler,
)
from yarnflink.checkpoint.channel_state import (
    deserialize_batches,
    read_channel_state,
    serialize_batches,
    write_channel_state,
)
from yarnflink.checkpoint.metadata import CheckpointMetadataError, CompletedCheckpoint, OperatorState
from yarnflink.state.handles import (
    ByteStreamStateHandle,
    InputChannelStateHandle,
    OperatorSubtaskState,
    TaskStateSnapshot,
)


def B(n: int) -> CheckpointBarrier:
    return CheckpointBarrier(n, 1000 + n)


def test_first_barrier_triggers_at_once_and_blocks_nothing() -> None:
    h = UnalignedBarrierHandler(3)
    assert h.on_barrier(1, B(1)) == [TriggerCheckpointOnBarrier(B(1))]
    # nothing is held back: every item is processed right away, on every channel
    assert h.on_buffer(1, "after-barrier") == [ProcessBuffer(1, "after-barrier")]
    assert h.on_buffer(0, "a") == [ProcessBuffer(0, "a")]
    assert h.on_buffer(2, "b") == [ProcessBuffer(2, "b")]
    assert h.blocked == frozenset()


def test_records_on_pending_channels_are_recorded_until_their_barrier() -> None:
    h = UnalignedBarrierHandler(3)
    h.on_barrier(0, B(1))
    h.on_buffer(0, "c0-after")  # channel 0 already delivered barrier 1: not in-flight data
    h.on_buffer(1, "c1-x")
    h.on_buffer(2, "c2-x")
    h.on_buffer(1, "wm", persist=False)  # processed, not recorded (watermark)
    assert h.on_barrier(1, B(1)) == []
    h.on_buffer(1, "c1-after")  # recording of channel 1 stopped
    h.on_buffer(2, "c2-y")
    assert h.on_barrier(2, B(1)) == [ChannelStateComplete(1, {1: ["c1-x"], 2: ["c2-x", "c2-y"]})]
    assert not h.is_recording
    h.on_buffer(2, "later")
    assert h.recorded == {}


def test_a_newer_barrier_aborts_and_discards_the_incomplete_recording() -> None:
    h = UnalignedBarrierHandler(2)
    h.on_barrier(0, B(1))
    h.on_buffer(1, "x")
    actions = h.on_barrier(0, B(2))  # channel 0 already at checkpoint 2, channel 1 never sent 1
    assert isinstance(actions[0], AbortCheckpointOnBarrier) and actions[0].checkpoint_id == 1
    assert actions[1] == TriggerCheckpointOnBarrier(B(2))
    assert h.current == 2 and h.recorded == {}
    h.on_buffer(1, "y")
    assert h.on_barrier(1, B(1)) == []  # the old barrier is ignored
    assert h.on_barrier(1, B(2)) == [ChannelStateComplete(2, {1: ["y"]})]


def test_abort_notification_and_cancel_marker_discard_the_recording() -> None:
    h = UnalignedBarrierHandler(2)
    h.on_barrier(0, B(3))
    h.on_buffer(1, "x")
    assert h.abort(3) is True and not h.is_recording and h.recorded == {}
    assert h.on_barrier(1, B(3)) == []  # late barrier of the aborted checkpoint
    h.on_barrier(1, B(4))
    h.on_buffer(0, "y")
    actions = h.on_cancel_marker(0, CancelCheckpointMarker(4))
    assert [type(a) for a in actions] == [AbortCheckpointOnBarrier] and actions[0].checkpoint_id == 4
    assert h.recorded == {} and h.on_barrier(0, B(4)) == []
    # a cancellation of a checkpoint never seen here is declined too
    assert [a.checkpoint_id for a in h.on_cancel_marker(0, CancelCheckpointMarker(5))] == [5]


def test_an_ended_channel_no_longer_holds_completion_back() -> None:
    h = UnalignedBarrierHandler(2)
    h.on_barrier(0, B(1))
    h.on_buffer(1, "last")
    assert h.on_end_of_partition(1) == [ChannelStateComplete(1, {1: ["last"]})]
    assert h.on_barrier(0, B(2)) == [TriggerCheckpointOnBarrier(B(2)), ChannelStateComplete(2, {})]


def test_single_input_behaves_as_aligned() -> None:
    u, a = UnalignedBarrierHandler(1), AlignedBarrierHandler(1)
    for h in (u, a):
        assert h.on_buffer(0, "x") == [ProcessBuffer(0, "x")]
    assert u.on_barrier(0, B(1)) == [TriggerCheckpointOnBarrier(B(1)), ChannelStateComplete(1, {})]
    assert a.on_barrier(0, B(1)) == [TriggerCheckpointOnBarrier(B(1))]


def test_factory_chooses_unaligned_only_for_exactly_once() -> None:
    assert isinstance(create_barrier_handler("EXACTLY_ONCE", 2, unaligned=True), UnalignedBarrierHandler)
    assert isinstance(create_barrier_handler("EXACTLY_ONCE", 2), AlignedBarrierHandler)
    assert not isinstance(create_barrier_handler("AT_LEAST_ONCE", 2, unaligned=True), UnalignedBarrierHandler)


class _Factory:
    def __init__(self) -> None:
        self.names: list[str] = []

    def write_state(self, data: bytes, name: str) -> ByteStreamStateHandle:
        self.names.append(name)
        return ByteStreamStateHandle(name, data)


def test_channel_state_round_trips_through_arrow_ipc_in_channel_order() -> None:
    b1 = pa.record_batch({"k": ["a", "b"], "v": [1, 2]})
    b2 = pa.record_batch({"x": [1.5]})  # another schema on the same channel
    b3 = pa.record_batch({"k": ["c"], "v": [3]})
    assert deserialize_batches(serialize_batches([b1, b2])) == [b1, b2]
    f = _Factory()
    handles = write_channel_state({2: [b3], 0: [b1, b2], 1: []}, 3, f, "t")
    assert [h.channel for h in handles] == [0, 2] and all(h.num_channels == 3 for h in handles)
    assert f.names == ["t-channel-0", "t-channel-2"]
    assert read_channel_state(reversed(handles), lambda d: d.data, 3) == [b1, b2, b3]
    with pytest.raises(ValueError, match="recorded with 3 input channels, but the task now has 4"):
        read_channel_state(handles, lambda d: d.data, 4)
    # JSON round trip of the subtask state keeps the channel state (and old JSON has none)
    st = OperatorSubtaskState(input_channel_state=handles)
    assert OperatorSubtaskState.from_json(st.to_json()) == st
    assert st.persisted_data == sum(h.state_size for h in handles) > 0
    assert "input_channels" not in OperatorSubtaskState().to_json()
    assert TaskStateSnapshot({"op": st}).persisted_data == st.persisted_data


def _checkpoint(parallelism: int) -> CompletedCheckpoint:
    h = InputChannelStateHandle(1, 2, ByteStreamStateHandle("c", b"\0" * 8))
    subs = {i: OperatorSubtaskState(input_channel_state=[h]) for i in range(parallelism)}
    return CompletedCheckpoint("job", 7, 0, {"op": OperatorState("op", parallelism, 128, subs)})


def test_assignment_keeps_channel_state_per_subtask_and_refuses_rescaling() -> None:
    out = assign_state(_checkpoint(2), [RestoreVertex("v", 2, 128, ("op",))])
    assert sorted(out) == [("v", 0), ("v", 1)]
    assert out[("v", 1)].get("op").input_channel_state[0].channel == 1
    with pytest.raises(CheckpointMetadataError, match="checkpoint 7.*in-flight data.*parallelism 2.*parallelism 3"):
        assign_state(_checkpoint(2), [RestoreVertex("v", 3, 128, ("op",))])


def test_relocating_a_checkpoint_keeps_its_channel_state() -> None:
    cp = _checkpoint(2).map_stream_handles(lambda h: ByteStreamStateHandle("moved", h.data))
    h = cp.operator_states["op"].subtask_states[0].input_channel_state[0]
    assert (h.channel, h.num_channels, h.delegate.name) == (1, 2, "moved")
    assert (
        CompletedCheckpoint.from_json(cp.to_json()).operator_states["op"].subtask_states[1]
        == cp.operator_states["op"].subtask_states[1]
    )


def test_rest_details_report_unaligned_and_persisted_data() -> None:
    from yarnflink.metrics.checkpoint_stats import checkpoint_details, subtask_record, task_checkpoint_details

    recs = {
        "0": subtask_record(0, {"state_size": 10, "persisted_data": 300, "unaligned": 1}, 1_100),
        "1": subtask_record(1, {"state_size": 10, "persisted_data": 0, "unaligned": 1}, 1_200),
    }
    stats = {
        "history": [{"id": 3, "status": "COMPLETED", "trigger_timestamp": 1_000}],
        "subtask_details": {"3": {"agg": recs, "src": {"0": subtask_record(0, {}, 1_050)}}},
        "parallelism": {"agg": 2, "src": 1},
    }
    d = checkpoint_details(stats, 3)
    assert d is not None and d["unaligned_checkpoint"] is True and d["persisted_data"] == 300
    assert d["tasks"]["agg"]["persisted_data"] == 300 and d["tasks"]["src"]["unaligned_checkpoint"] is False
    t = task_checkpoint_details(stats, 3, "agg")
    assert t is not None
    assert [s["alignment"]["persisted"] for s in t["subtasks"]] == [300, 0]
    assert all(s["unaligned_checkpoint"] for s in t["subtasks"])
    assert t["summary"]["alignment"]["persisted"]["max"] == 300


def SP(n: int) -> CheckpointBarrier:
    return CheckpointBarrier(n, 1000 + n, is_savepoint=True)


def test_a_savepoint_barrier_is_aligned_records_nothing_and_the_next_checkpoint_is_unaligned() -> None:
    h = UnalignedBarrierHandler(3)
    assert h.on_barrier(0, SP(1)) == []  # no trigger on the first savepoint barrier
    assert h.is_aligning and h.blocked == {0} and not h.is_recording
    assert h.on_buffer(0, "c0-after") == []  # held back (channel 0 is blocked)
    assert h.on_buffer(1, "c1-x") == [ProcessBuffer(1, "c1-x")]  # not blocked, not recorded
    assert h.on_barrier(1, SP(1)) == []
    assert h.on_buffer(1, "c1-after") == [] and h.held_items == 2
    assert h.on_buffer(2, "c2-x") == [ProcessBuffer(2, "c2-x")]
    # the last channel's barrier: trigger, then the held items in arrival order; no channel state
    assert h.on_barrier(2, SP(1)) == [
        TriggerCheckpointOnBarrier(SP(1)),
        ProcessBuffer(0, "c0-after"),
        ProcessBuffer(1, "c1-after"),
    ]
    assert not h.is_aligning and h.blocked == set() and h.held_items == 0 and h.recorded == {}
    assert h.on_barrier(0, SP(1)) == []  # a late duplicate is ignored
    # the next normal checkpoint is unaligned again: first barrier triggers, nothing blocked
    assert h.on_barrier(1, B(2)) == [TriggerCheckpointOnBarrier(B(2))]
    assert h.on_buffer(0, "c0-y") == [ProcessBuffer(0, "c0-y")] and h.blocked == set()
    h.on_barrier(0, B(2))
    assert h.on_barrier(2, B(2)) == [ChannelStateComplete(2, {0: ["c0-y"]})]


def test_a_savepoint_barrier_aborts_an_unaligned_checkpoint_in_progress_and_ends_with_channels() -> None:
    h = UnalignedBarrierHandler(2)
    h.on_barrier(0, B(1))
    h.on_buffer(1, "x")
    actions = h.on_barrier(0, SP(2))  # newer: checkpoint 1 is declined, its recording discarded
    assert len(actions) == 1 and isinstance(actions[0], AbortCheckpointOnBarrier) and actions[0].checkpoint_id == 1
    assert h.recorded == {} and not h.is_recording and h.blocked == {0}
    assert h.on_barrier(1, B(1)) == []  # the old barrier is ignored
    assert h.on_buffer(0, "held") == []
    # channel 1 ends instead of delivering the savepoint barrier: the alignment completes
    assert h.on_end_of_partition(1) == [TriggerCheckpointOnBarrier(SP(2)), ProcessBuffer(0, "held")]


def test_a_newer_barrier_or_a_cancel_marker_aborts_a_savepoint_alignment_and_releases_held_items() -> None:
    h = UnalignedBarrierHandler(2)
    h.on_barrier(0, SP(1))
    h.on_buffer(0, "held")
    actions = h.on_barrier(1, B(2))  # channel 1 skipped savepoint 1 (declined upstream): newer wins
    assert isinstance(actions[0], AbortCheckpointOnBarrier) and actions[0].checkpoint_id == 1
    assert actions[1:] == [ProcessBuffer(0, "held"), TriggerCheckpointOnBarrier(B(2))]
    assert h.is_recording and h.blocked == set()
    h2 = UnalignedBarrierHandler(2)
    h2.on_barrier(0, SP(3))
    h2.on_buffer(0, "held")
    actions = h2.on_cancel_marker(1, CancelCheckpointMarker(3))
    assert isinstance(actions[0], AbortCheckpointOnBarrier) and actions[0].checkpoint_id == 3
    assert actions[1:] == [ProcessBuffer(0, "held")] and not h2.is_aligning
    assert create_barrier_handler("EXACTLY_ONCE", 2, unaligned=True).on_barrier(0, SP(1)) == []
