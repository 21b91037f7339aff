"""Watermarks crossing tasks: a real ``Task`` thread reading a local and a remote input channel
(real ``ShuffleEnvironment``s on loopback) combines its channels' watermarks and statuses with
the ``StatusWatermarkValve`` and hands the result to its chain, in order with the records."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import cloudpickle
import numpy as np
import pytest

from yarnflink.common.records import Batch
from yarnflink.network import ShuffleEnvironment
from yarnflink.operators import factory
from yarnflink.operators.base import StreamOperator
from yarnflink.operators.chain import OperatorChain
from yarnflink.operators.partitioners import NetworkOutput
from yarnflink.operators.watermarks import (
    MAX_TIMESTAMP,
    MIN_TIMESTAMP,
    Duration,
    TimestampsAndWatermarksSpec,
    Watermark,
    WatermarkStatus,
    WatermarkStrategy,
)
from yarnflink.taskexecutor.gateway import (
    ChainedOperator,
    InputChannelDescriptor,
    InputGateDescriptor,
    ResultPartitionDescriptor,
    TaskDeploymentDescriptor,
)
from yarnflink.taskexecutor.task import Task

from .helpers import Recorder, ctx

ACTIVE, IDLE = WatermarkStatus.ACTIVE, WatermarkStatus.IDLE  # type: ignore[attr-defined]
_LOGS: dict[str, list] = {}


@dataclass
class RecorderSpec:
    """A test operator that logs what reaches it (records with timestamps, watermarks, statuses)."""

    log: str


class RecorderOperator(StreamOperator):
    def __init__(self, spec: RecorderSpec) -> None:
        self.log = _LOGS.setdefault(spec.log, [])

    def process_batch(self, batch: Batch) -> None:
        self.log.append(("rows", batch.rows(), [int(t) for t in batch.timestamps]))

    def process_watermark(self, watermark: Any) -> None:
        self.log.append(("wm", watermark))

    def end_input(self) -> None:
        self.log.append(("end",))


@pytest.fixture
def envs() -> Iterator[Callable[[], ShuffleEnvironment]]:
    made: list[ShuffleEnvironment] = []

    def make() -> ShuffleEnvironment:
        env = ShuffleEnvironment("127.0.0.1", 0)
        env.start()
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


def _wait(predicate: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _consumer(
    env: ShuffleEnvironment, channels: list[tuple[str, str]], log: str, mode: str = "STREAMING", **config: str
) -> Task:
    tdd = TaskDeploymentDescriptor(
        job_id="job",
        task_name="consumer",
        execution_id=f"exec-{log}",
        subtask_index=0,
        parallelism=1,
        max_parallelism=128,
        runtime_mode=mode,
        job_config=config,
        operators=(
            ChainedOperator(node_id=1, name="recorder", kind="recorder", spec=cloudpickle.dumps(RecorderSpec(log))),
        ),
        input_gates=(
            InputGateDescriptor(
                dataset_id="ds",
                partitioning="forward",
                channels=tuple(InputChannelDescriptor(pid, 0, address) for pid, address in channels),
            ),
        ),
    )
    return Task(tdd, env, lambda task, state, error: None, lambda kind, payload: None)


def _elements(log: str) -> list:
    return [e[1] for e in _LOGS.get(log, []) if e[0] == "wm"]


def test_a_task_takes_the_minimum_over_its_local_and_remote_channels_and_skips_idle_ones(
    envs: Callable[[], ShuffleEnvironment], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(factory.OPERATORS, RecorderSpec, RecorderOperator)
    local, remote = envs(), envs()
    p_local = local.create_result_partition("p-local", 1)
    p_remote = remote.create_result_partition("p-remote", 1)
    outs = [
        NetworkOutput(p, "forward", 1, None, 128, 0, buffer_timeout_s=-1, end_watermark=True)
        for p in (p_local, p_remote)
    ]
    task = _consumer(local, [("p-local", local.address), ("p-remote", remote.address)], "minimum")
    task.start()
    try:
        outs[0].emit(Batch([("a", 1)], None, np.array([1000], dtype=np.int64)))
        outs[0].emit_watermark(Watermark(1000))
        outs[1].emit_watermark(Watermark(3000))
        _wait(lambda: _elements("minimum") == [Watermark(1000)], "the minimum of both channels")
        log = _LOGS["minimum"]
        assert log[0] == ("rows", [("a", 1)], [1000])  # the record came before its watermark
        assert task.io_metrics.current_input_watermark == 1000

        outs[0].emit_watermark(IDLE)  # the local channel goes idle: the remote one alone counts
        _wait(lambda: _elements("minimum")[-1:] == [Watermark(3000)], "the idle channel not holding back")
        outs[1].emit_watermark(Watermark(5000))
        _wait(lambda: _elements("minimum")[-1:] == [Watermark(5000)], "progress with one idle channel")
        outs[1].emit_watermark(IDLE)  # every channel idle: the task's input is idle
        _wait(lambda: _elements("minimum")[-1:] == [IDLE], "the task going idle")
        outs[0].emit_watermark(ACTIVE)
        outs[0].emit_watermark(Watermark(4000))  # behind the output: not aligned, no regression
        outs[0].emit_watermark(Watermark(6000))
        _wait(lambda: _elements("minimum")[-2:] == [ACTIVE, Watermark(6000)], "active again")
        # the remote channel is active again (ahead of the output: aligned), then the local one
        # ends: it counts as MAX_WATERMARK and the remote one alone decides
        outs[1].emit_watermark(ACTIVE)
        outs[1].emit_watermark(Watermark(9000))
        valve = task._valve
        assert valve is not None
        _wait(lambda: valve.channels[1].active and valve.channels[1].watermark == 9000, "the remote channel active")
        outs[0].end_input()
        _wait(lambda: _elements("minimum")[-1:] == [Watermark(9000)], "the ended channel not holding back")
        outs[1].end_input()
        task.join(30)
        assert not task.is_alive and task.state.value == "FINISHED"
        wms = [e.timestamp for e in _elements("minimum") if isinstance(e, Watermark)]
        assert wms == sorted(wms) and wms[-1] == MAX_TIMESTAMP
        assert _LOGS["minimum"][-1] == ("end",)
    finally:
        task.cancel()
        task.join(10)


def test_an_idle_input_partition_is_detected_by_the_task_timer(
    envs: Callable[[], ShuffleEnvironment], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The downstream assigner of a channel that never gets a record marks itself idle on the
    Task's processing-time timer (no input at all), so its consumers stop waiting for it."""
    monkeypatch.setitem(factory.OPERATORS, RecorderSpec, RecorderOperator)
    env = envs()
    upstream = env.create_result_partition("p-up", 1)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_idleness(Duration.of_millis(300))
    tdd = TaskDeploymentDescriptor(
        job_id="job",
        task_name="assigner",
        execution_id="exec-assigner",
        subtask_index=0,
        parallelism=1,
        max_parallelism=128,
        runtime_mode="STREAMING",
        job_config={"pipeline.auto-watermark-interval": "50 ms"},
        operators=(
            ChainedOperator(
                node_id=1,
                name="assigner",
                kind="timestamps_watermarks",
                spec=cloudpickle.dumps(TimestampsAndWatermarksSpec(strategy)),
                output_datasets=("out",),
            ),
        ),
        input_gates=(
            InputGateDescriptor(
                dataset_id="in", partitioning="forward", channels=(InputChannelDescriptor("p-up", 0, env.address),)
            ),
        ),
        produced_partitions=(
            ResultPartitionDescriptor(
                dataset_id="out", partition_id="p-down", num_subpartitions=1, partitioning="forward"
            ),
        ),
    )
    task = Task(tdd, env, lambda t, s, e: None, lambda k, p: None)
    consumer = _consumer(env, [("p-down", env.address)], "idle")
    task.start()
    consumer.start()
    try:
        _wait(lambda: IDLE in _elements("idle"), "the idle status crossing the exchange", timeout=30)
        assert all(not isinstance(e, Watermark) for e in _elements("idle"))
        up = NetworkOutput(upstream, "forward", 1, None, 128, 0, buffer_timeout_s=0, end_watermark=True)
        up.emit(Batch([("a", 1)], None, np.array([7000], dtype=np.int64)))  # activity again
        _wait(lambda: ACTIVE in _elements("idle"), "the stream active again")
        up.end_input()
        task.join(30)
        consumer.join(30)
        assert not consumer.is_alive
        assert _elements("idle")[-1] == Watermark(MAX_TIMESTAMP)
    finally:
        task.cancel()
        consumer.cancel()
        task.join(10)
        consumer.join(10)


def test_network_output_broadcasts_watermarks_after_flushing_and_max_at_the_end() -> None:
    class Writer:
        def __init__(self) -> None:
            self.log: list = []

        def emit(self, channel: int, rb: Any) -> None:
            self.log.append(("data", channel, rb.num_rows))

        def broadcast(self, rb: Any) -> None:
            self.log.append(("data", -1, rb.num_rows))

        def emit_event(self, event: Any) -> None:
            self.log.append(("event", event))

        def finish(self) -> None:
            self.log.append(("finish",))

    from yarnflink.operators.specs import KeySelectorSpec

    w = Writer()
    out = NetworkOutput(w, "hash", 4, KeySelectorSpec(field=0), 128, 0, buffer_timeout_s=60, end_watermark=True)
    out.emit(Batch([(f"k{i}", i) for i in range(20)], None, np.arange(20, dtype=np.int64)))
    assert w.log == []  # buffered (a minute's timeout)
    assert out.current_watermark == MIN_TIMESTAMP
    out.emit_watermark(Watermark(19))
    assert w.log[-1] == ("event", Watermark(19)) and sum(e[2] for e in w.log[:-1]) == 20
    assert out.current_watermark == 19
    out.emit_watermark(IDLE)
    assert out.current_watermark == 19
    out.end_input()
    assert w.log[-2:] == [("event", Watermark(MAX_TIMESTAMP)), ("finish",)]


def test_the_chain_runs_processing_time_only_when_an_operator_asks_for_it() -> None:
    from tests.unit.windows.helpers import Clock
    from yarnflink.operators.watermarks import TimestampsAndWatermarksOperator

    class D:
        def __init__(self, node_id: int, spec: Any, outputs: list[str]) -> None:
            self.node_id, self.name, self.kind, self.spec = node_id, f"op{node_id}", "x", spec
            self.chained_outputs: list[int] = []
            self.output_datasets = outputs

    rec = Recorder()
    plain = WatermarkStrategy.for_monotonous_timestamps()
    chain = OperatorChain(
        [D(1, TimestampsAndWatermarksSpec(plain), ["o"])],
        {"o": rec},
        lambda name: ctx(name, **{"pipeline.auto-watermark-interval": "100 ms"}),
    )
    chain.open()
    assert chain.next_processing_time() is None  # no idleness: nothing to do without input
    idle = plain.with_idleness(Duration.of_millis(250))
    chain = OperatorChain(
        [D(1, TimestampsAndWatermarksSpec(idle), ["o"])],
        {"o": rec},
        lambda name: ctx(name, **{"pipeline.auto-watermark-interval": "100 ms"}),
    )
    chain.open()
    op = chain.head
    assert isinstance(op, TimestampsAndWatermarksOperator)
    clock = op.clock = Clock(1000)
    op.idleness.clock = clock  # type: ignore[union-attr]
    op.idleness.last_activity = 1000  # type: ignore[union-attr]
    assert chain.next_processing_time() == 1000
    chain.on_processing_time(1000)
    assert chain.next_processing_time() == 1100 and rec.watermarks == []
    clock.t = 1300
    chain.on_processing_time(1300)
    assert rec.watermarks == [IDLE] and chain.next_processing_time() is None


def test_a_batch_task_ignores_watermarks_from_its_input(
    envs: Callable[[], ShuffleEnvironment], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Flink's BATCH mode has no late data: event time ends with the input."""
    monkeypatch.setitem(factory.OPERATORS, RecorderSpec, RecorderOperator)
    env = envs()
    p = env.create_result_partition("p-batch", 1)
    out = NetworkOutput(p, "forward", 1, None, 128, 0, buffer_timeout_s=0)
    task = _consumer(env, [("p-batch", env.address)], "batch", mode="BATCH")
    task.start()
    try:
        out.emit(Batch([1], None, np.array([5], dtype=np.int64)))
        out.emit_watermark(Watermark(100))
        out.emit(Batch([2], None, np.array([6], dtype=np.int64)))
        out.end_input()
        task.join(30)
        assert not task.is_alive
        assert _LOGS["batch"] == [("rows", [1], [5]), ("rows", [2], [6]), ("end",)]
        assert task.io_metrics.current_input_watermark == MIN_TIMESTAMP
    finally:
        task.cancel()
        task.join(10)
