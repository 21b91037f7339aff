"""No polling: a real ``Task`` blocked on an input that sends nothing takes up a checkpoint trigger
and a completion notification as soon as they arrive (through its mailbox), not at the next tick
of a poll. Triggers and notifications come at spread-out moments; with a poll every 50 ms most of
them would wait 10 ms or more."""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import cloudpickle
import pyarrow as pa
import pytest

from yarnflink.checkpoint.barriers import CheckpointBarrier
from yarnflink.common.records import Batch
from yarnflink.network import InputChannelSpec, InputGate, ShuffleEnvironment
from yarnflink.operators import factory
from yarnflink.operators.base import StreamOperator
from yarnflink.taskexecutor.gateway import (
    ChainedOperator,
    InputChannelDescriptor,
    InputGateDescriptor,
    ResultPartitionDescriptor,
    TaskDeploymentDescriptor,
)
from yarnflink.taskexecutor.task import Task

pytestmark = pytest.mark.timeout(120)

SAMPLES = 9
#: far below a 50 ms poll (whose median wait would be ~25 ms), far above a wake-up on a busy machine
MEDIAN_LIMIT_S = 0.005


@dataclass
class NotifiedSpec:
    name: str


class Notified(StreamOperator):
    """Signals every checkpoint completion that reaches it; holds the task thread in
    ``process_batch`` until ``release`` is set."""

    events: dict[int, threading.Event] = {}
    busy = threading.Event()
    release = threading.Event()

    def __init__(self, spec: NotifiedSpec) -> None:
        pass

    def process_batch(self, batch: Batch) -> None:
        Notified.busy.set()
        assert Notified.release.wait(30)
        self.output.emit(batch)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        Notified.events.setdefault(checkpoint_id, threading.Event()).set()


def _idle_tdd(env: ShuffleEnvironment) -> TaskDeploymentDescriptor:
    """A checkpointing task reading the partition ``p-silent`` and producing ``p-out``."""
    return TaskDeploymentDescriptor(
        job_id="job",
        task_name="idle",
        execution_id="exec-idle",
        subtask_index=0,
        parallelism=1,
        max_parallelism=128,
        runtime_mode="STREAMING",
        job_config={"execution.checkpointing.interval": "1 h"},  # on; the test triggers itself
        operators=(
            ChainedOperator(
                node_id=1,
                name="notified",
                kind="notified",
                spec=cloudpickle.dumps(NotifiedSpec("idle")),
                output_datasets=("o",),
            ),
        ),
        input_gates=(
            InputGateDescriptor("in", "forward", channels=(InputChannelDescriptor("p-silent", 0, env.address),)),
        ),
        produced_partitions=(ResultPartitionDescriptor("o", "p-out", 1, "forward"),),
    )


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[ShuffleEnvironment]:
    monkeypatch.setitem(factory.OPERATORS, NotifiedSpec, Notified)
    env = ShuffleEnvironment("127.0.0.1", 0)
    env.start()
    try:
        yield env
    finally:
        env.close()
        Notified.events.clear()
        Notified.busy.clear()
        Notified.release.clear()


@pytest.fixture
def idle_task(env: ShuffleEnvironment) -> Iterator[tuple[Task, InputGate]]:
    """A running task blocked on its silent input, and a gate reading its output."""
    env.create_result_partition("p-silent", 1)  # an upstream that never sends
    task = Task(_idle_tdd(env), env, lambda t, s, e: None, lambda kind, payload: None)
    task.start()
    deadline = time.monotonic() + 30
    while task.state.value != "RUNNING" or task.gate is None:
        assert time.monotonic() < deadline, "the task did not start"
        time.sleep(0.005)
    downstream = env.create_input_gate([InputChannelSpec("p-out", 0, env.address)])
    try:
        yield task, downstream
    finally:
        task.cancel()
        task.join(10)


def test_a_trigger_reaches_a_task_blocked_on_empty_input_at_once(idle_task: tuple[Task, InputGate]) -> None:
    task, downstream = idle_task
    rng = random.Random(16)
    latencies = []
    for checkpoint_id in range(1, SAMPLES + 1):
        time.sleep(rng.uniform(0.005, 0.05))  # the task has been blocked on its input meanwhile
        triggered = time.monotonic()
        task.trigger_checkpoint(checkpoint_id, int(time.time() * 1000))
        item = downstream.next(timeout=5)  # the deadline of this wait: the barrier is forwarded
        latencies.append(time.monotonic() - triggered)
        assert item is not None and isinstance(item.event, CheckpointBarrier)
        assert item.event.checkpoint_id == checkpoint_id
    assert statistics.median(latencies) < MEDIAN_LIMIT_S, [round(x * 1000, 2) for x in latencies]


def test_a_completion_reaches_a_task_blocked_on_empty_input_at_once(idle_task: tuple[Task, InputGate]) -> None:
    task, _ = idle_task
    rng = random.Random(4)
    latencies = []
    for checkpoint_id in range(1, SAMPLES + 1):
        time.sleep(rng.uniform(0.005, 0.05))
        done = Notified.events.setdefault(checkpoint_id, threading.Event())
        notified = time.monotonic()
        task.notify_checkpoint(checkpoint_id, True)
        assert done.wait(5), f"checkpoint {checkpoint_id}'s completion never reached the operator"
        latencies.append(time.monotonic() - notified)
    assert statistics.median(latencies) < MEDIAN_LIMIT_S, [round(x * 1000, 2) for x in latencies]


def test_a_cancelled_task_delivers_the_completions_it_had_not_run(env: ShuffleEnvironment) -> None:
    """Cancel-with-savepoint: a completion still queued when the task is cancelled commits. The
    task thread is held in its operator while the notifications and the cancellation arrive, so
    the cancellation (urgent) runs first and only the cancelled task's clean-up delivers them."""
    upstream = env.create_result_partition("p-silent", 1)
    task = Task(_idle_tdd(env), env, lambda t, s, e: None, lambda kind, payload: None)
    task.start()
    upstream.emit(0, pa.record_batch({"x": pa.array([1], pa.int64())}))
    assert Notified.busy.wait(30), "the batch never reached the operator"
    task.notify_checkpoint(7, True)
    task.notify_checkpoint(8, False)  # an abort is not delivered after the end
    task.cancel()
    Notified.release.set()
    task.join(10)
    assert task.state.value == "CANCELED"
    assert 7 in Notified.events and 8 not in Notified.events
    task.notify_checkpoint(9, True)  # after the end: dropped, no error
    assert 9 not in Notified.events


def test_a_task_waiting_for_a_partition_that_never_appears_fails_at_its_request_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing ever arrives in the mailbox: the request deadline of the input channel is a timer."""
    monkeypatch.setitem(factory.OPERATORS, NotifiedSpec, Notified)
    env = ShuffleEnvironment("127.0.0.1", 0, partition_request_timeout=0.3)
    env.start()
    try:
        task = Task(_idle_tdd(env), env, lambda t, s, e: None, lambda kind, payload: None)
        started = time.monotonic()
        task.start()
        task.join(30)
        assert not task.is_alive and task.state.value == "FAILED"
        assert task.failed_partition_id == "p-silent"
        assert time.monotonic() - started >= 0.3
    finally:
        env.close()
