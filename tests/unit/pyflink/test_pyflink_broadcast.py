"""Broadcast state: ``ds.connect(rules.broadcast(descriptor)).process(fn)`` with a
(Keyed)BroadcastProcessFunction, one operator with a hash (or forward) input and a broadcast input;
the broadcast states checkpointed per subtask and restored from one copy at any parallelism
(broadcast_state_rules in the compatibility suite)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pyflink.common import Types
from pyflink.datastream import OutputTag, StreamExecutionEnvironment
from pyflink.datastream.functions import BroadcastProcessFunction, KeyedBroadcastProcessFunction
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor
from tests.unit.operators.helpers import ListOutput, run_operator
from yarnflink.checkpoint.assignment import RestoreVertex, assign_state
from yarnflink.checkpoint.metadata import CompletedCheckpoint, OperatorState
from yarnflink.checkpoint.storage import FsCheckpointStorage, make_reader
from yarnflink.common.keygroups import key_group_of, key_group_range
from yarnflink.common.records import Batch
from yarnflink.operators.base import OperatorContext
from yarnflink.operators.factory import create_operator
from yarnflink.state.handles import TaskStateSnapshot
from yarnflink.state.task_state import TaskStateManager, snapshot_operators

RULES = MapStateDescriptor("rules", Types.STRING(), Types.INT())
LOW = OutputTag("low", Types.INT())


class Threshold(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.INT()))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        limit = ctx.get_broadcast_state(RULES).get("limit")
        if limit is None:
            return
        if value[1] >= limit:
            yield ctx.get_current_key(), value[1], n
        else:
            yield LOW, value[1]

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value[0], value[1])
        yield "rule", value[0], value[1]


class Tag(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield ctx.get_broadcast_state(RULES).get("prefix") or "?", value

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES)["prefix"] = value


def keyed_job(env: Any) -> Any:
    events = env.from_collection([("a", 5)]).key_by(lambda v: v[0])
    rules = env.from_collection([("limit", 3)])
    return events.connect(rules.broadcast(RULES)).process(Threshold())


def test_one_operator_with_a_hash_and_a_broadcast_input():
    env = StreamExecutionEnvironment()
    out = keyed_job(env)
    out.print()
    graph = env.get_stream_graph()
    op_id = next(i for i, n in graph.nodes.items() if n.name == "Keyed Broadcast Process")
    into = sorted(e.partitioning for e in graph.edges if e.target_id == op_id)
    assert into == ["broadcast", "hash"]


def test_keyed_broadcast_process_reads_rules_keyed_state_and_side_outputs():
    env = StreamExecutionEnvironment()
    out = keyed_job(env)
    out.get_side_output(LOW).print()
    tagged = [(0, ("a", 5)), (1, ("limit", 3)), (0, ("a", 5)), (0, ("b", 1)), (0, ("a", 2))]
    _, got = run_operator(out._t.spec, [tagged])
    main = [r for r in got.rows if not hasattr(r, "tag_id")]
    low = [r.value for r in got.rows if hasattr(r, "tag_id")]
    # the first ("a", 5) came before the rule: no output, but counted in keyed state
    assert main == [("rule", "limit", 3), ("a", 5, 2)]
    assert low == [1, 2]


def test_non_keyed_broadcast_process_and_read_only_state():
    env = StreamExecutionEnvironment()
    words = env.from_collection(["x", "y"])
    prefixes = env.from_collection([">"])
    out = words.connect(prefixes.broadcast(RULES)).process(Tag(), Types.TUPLE([Types.STRING(), Types.STRING()]))
    _, got = run_operator(out._t.spec, [[(0, "x"), (1, ">"), (0, "y")]])
    assert got.rows == [("?", "x"), (">", "y")]

    class Writes(BroadcastProcessFunction):
        def process_element(self, value, ctx):
            ctx.get_broadcast_state(RULES).put("k", value)

        def process_broadcast_element(self, value, ctx):
            pass

    bad = words.connect(prefixes.broadcast(RULES)).process(Writes())
    with pytest.raises(TypeError, match="read-only in process_element"):
        run_operator(bad._t.spec, [[(0, "x")]])


def test_a_non_keyed_broadcast_function_has_no_keyed_state():
    class Keyed(BroadcastProcessFunction):
        def open(self, runtime_context):
            runtime_context.get_state(ValueStateDescriptor("v", Types.INT()))

        def process_element(self, value, ctx):
            pass

        def process_broadcast_element(self, value, ctx):
            pass

    env = StreamExecutionEnvironment()
    out = env.from_collection([1]).connect(env.from_collection([2]).broadcast(RULES)).process(Keyed())
    with pytest.raises(RuntimeError, match=r"keyed state is only available .* after key_by"):
        run_operator(out._t.spec, [[(0, 1)]])


def test_wrong_uses_are_clear_errors():
    env = StreamExecutionEnvironment()
    ds = env.from_collection([1])
    rules = env.from_collection([("k", 1)])
    with pytest.raises(TypeError, match="MapStateDescriptors"):
        ds.broadcast(ValueStateDescriptor("v", Types.INT()))
    with pytest.raises(TypeError, match="should be applied to keyed DataStream"):
        ds.connect(rules.broadcast(RULES)).process(Threshold())
    with pytest.raises(TypeError, match="should be applied to non-keyed DataStream"):
        ds.key_by(lambda v: v).connect(rules.broadcast(RULES)).process(Tag())
    with pytest.raises(TypeError, match="needs a BroadcastStream"):
        ds.connect(rules).process(Tag())
    other = MapStateDescriptor("other", Types.STRING(), Types.INT())

    class Unknown(BroadcastProcessFunction):
        def process_element(self, value, ctx):
            ctx.get_broadcast_state(other)

        def process_broadcast_element(self, value, ctx):
            pass

    out = ds.connect(rules.broadcast(RULES)).process(Unknown())
    with pytest.raises(ValueError, match=r"'other' is not a broadcast state of this stream.*\['rules'\]"):
        run_operator(out._t.spec, [[(0, 1)]])


def _ctx(restored: Any, subtask: int, parallelism: int) -> OperatorContext:
    c = OperatorContext(
        task_name="t",
        operator_name="op",
        subtask_index=subtask,
        parallelism=parallelism,
        max_parallelism=128,
        operator_id="op-1",
    )
    c.state = TaskStateManager(restored=restored, reader=make_reader())
    return c


def _snapshot(ops: list, storage: FsCheckpointStorage, cid: int) -> list[TaskStateSnapshot]:
    out = []
    for op in ops:
        snap = snapshot_operators([("op-1", op)], cid, 0, storage.stream_factory(cid)).result()
        out.append(TaskStateSnapshot.from_json(json.loads(json.dumps(snap.to_json()))))
    return out


def test_each_subtask_checkpoints_its_copy_and_a_rescaled_one_restores_one_copy(tmp_path: Path):
    env = StreamExecutionEnvironment()
    spec = keyed_job(env)._t.spec
    storage = FsCheckpointStorage(f"file://{tmp_path}", "job")
    ops = []
    for sub in range(2):
        op = create_operator(spec)
        op.output = ListOutput()
        op.open(_ctx(None, sub, 2))
        # (copies that differ only to see which one a subtask restores; users keep them equal)
        op.process_batch(Batch.from_rows([(1, ("limit", 3 + sub)), (1, ("max", 9))]))
        ops.append(op)
    snaps = _snapshot(ops, storage, 1)
    copies = [s.subtask_states["op-1"].managed_operator_state for s in snaps]
    assert all(len(c) == 1 for c in copies)  # one handle (one copy) per subtask
    checkpoint = CompletedCheckpoint(
        "job", 1, 0, {"op-1": OperatorState("op-1", 2, 128, {i: s.subtask_states["op-1"] for i, s in enumerate(snaps)})}
    )
    assigned = assign_state(checkpoint, [RestoreVertex("v", 3, 128, ("op-1",))])  # scaled up to 3
    for sub in range(3):
        again = create_operator(spec)
        again.output = out = ListOutput()
        again.open(_ctx(assigned[("v", sub)], sub, 3))
        # subtask i takes old subtask i % 2's copy, as Flink's broadcast state
        assert again.states.entries == {"rules": {"limit": 3 + sub % 2, "max": 9}}
        if key_group_of("a", 128) in key_group_range(128, 3, sub):  # the subtask of key "a"
            again.process_batch(Batch.from_rows([(0, ("a", 4))]))
            assert out.rows == [("a", 4, 1)]  # 4 >= the limit of either copy
