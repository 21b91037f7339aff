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
