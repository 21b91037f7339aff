"""A real source ``Task`` and a real consumer ``Task`` (threads, a real ``ShuffleEnvironment`` on
loopback) through a stop-with-savepoint, with the JobMaster's part played by the test: it
triggers the synchronous savepoint at the source and sends the completion or abort notification.

* completed: no record is processed after the snapshot, and both tasks FINISH without ending
  their operators' input and without MAX_WATERMARK;
* aborted: both tasks go on and the bounded input runs to its normal end;
* ``drain``: MAX_WATERMARK reaches the consumer before its snapshot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import cloudpickle
import pytest

from yarnflink.common.records import Batch
from yarnflink.jobmaster.gateway import CheckpointMetrics
from yarnflink.network import ShuffleEnvironment
from yarnflink.operators import factory
from yarnflink.operators.base import StreamOperator
from yarnflink.operators.specs import SequenceSourceSpec
from yarnflink.operators.watermarks import MAX_TIMESTAMP, Watermark
from yarnflink.taskexecutor.gateway import (
    ChainedOperator,
    InputChannelDescriptor,
    InputGateDescriptor,
    ResultPartitionDescriptor,
    TaskDeploymentDescriptor,
)
from yarnflink.taskexecutor.task import Task

CONFIG = {"execution.checkpointing.interval": "1 h"}  # checkpointing on; the test triggers itself
_COUNTERS: dict[str, Counter] = {}


@dataclass
class CounterSpec:
    name: str


class Counter(StreamOperator):
    """Counts the records reaching it; remembers MAX_WATERMARK and the end of its input."""

    def __init__(self, spec: CounterSpec) -> None:
        self.rows = 0
        self.max_watermark = False
        self.ended = False
        _COUNTERS[spec.name] = self

    def process_batch(self, batch: Batch) -> None:
        self.rows += len(batch)

    def process_watermark(self, watermark: Any) -> None:
        if isinstance(watermark, Watermark) and watermark.timestamp == MAX_TIMESTAMP:
            self.max_watermark = True

    def end_input(self) -> None:
        self.ended = True


class Acks:
    """What a task sends the coordinator, with the consumer's counter as it was at that moment."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: list[tuple[str, int, dict[str, Any]]] = []

    def responder(self, task: str) -> Responder:
        return Responder(self, task)

    def record(self, task: str, checkpoint_id: int, kind: str) -> None:
        counter = _COUNTERS.get(task)
        seen = {"rows": counter.rows, "max_watermark": counter.max_watermark} if counter else {}
        with self.lock:
            self.sent.append((task, checkpoint_id, dict(seen, kind=kind)))

    def of(self, task: str, checkpoint_id: int) -> dict[str, Any] | None:
        with self.lock:
            return next((s for t, c, s in self.sent if t == task and c == checkpoint_id), None)


class Responder:
    """A task's CheckpointResponder: records each answer, with its kind, in ``Acks``."""

    def __init__(self, acks: Acks, task: str) -> None:
        self.acks, self.task = acks, task

    def acknowledge_checkpoint(
        self, checkpoint_id: int, attempt_number: int, subtask_state: Any, metrics: CheckpointMetrics
    ) -> None:
        self.acks.record(self.task, checkpoint_id, "checkpoint-ack")

    def decline_checkpoint(self, checkpoint_id: int, attempt_number: int, reason: str) -> None:
        self.acks.record(self.task, checkpoint_id, "checkpoint-decline")


def _wait(predicate: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], tuple[Task, Task, Acks]]]:
    """``make(n)``: a started source task (0 .. n-1) feeding a started consumer task (a Counter)."""
    monkeypatch.setitem(factory.OPERATORS, CounterSpec, Counter)
    env = ShuffleEnvironment("127.0.0.1", 0)
    env.start()
    tasks: list[Task] = []

    def make(n: int) -> tuple[Task, Task, Acks]:
        acks = Acks()
        src = TaskDeploymentDescriptor(
            job_id="job",
            task_name="source",
            execution_id="exec-source",
            subtask_index=0,
            parallelism=1,
            max_parallelism=128,
            runtime_mode="STREAMING",
            job_config=CONFIG,
            operators=(
                ChainedOperator(
                    node_id=1,
                    name="source",
                    kind="source",
                    spec=cloudpickle.dumps(SequenceSourceSpec(0, n - 1)),
                    output_datasets=("ds",),
                ),
            ),
            produced_partitions=(
                ResultPartitionDescriptor(
                    dataset_id="ds", partition_id="p-source", num_subpartitions=1, partitioning="forward"
                ),
            ),
        )
        sink = TaskDeploymentDescriptor(
            job_id="job",
            task_name="consumer",
            execution_id="exec-consumer",
            subtask_index=0,
            parallelism=1,
            max_parallelism=128,
            runtime_mode="STREAMING",
            job_config=CONFIG,
            operators=(
                ChainedOperator(
                    node_id=2, name="counter", kind="counter", spec=cloudpickle.dumps(CounterSpec("consumer"))
                ),
            ),
            input_gates=(
                InputGateDescriptor(
                    dataset_id="ds",
                    partitioning="forward",
                    channels=(InputChannelDescriptor("p-source", 0, env.address),),
                ),
            ),
        )
        noop = lambda kind, payload: None  # noqa: E731 - execute_and_collect() is not used here
        source = Task(src, env, lambda t, s, e: None, noop, checkpoint_responder=acks.responder("source"))
        consumer = Task(sink, env, lambda t, s, e: None, noop, checkpoint_responder=acks.responder("consumer"))
        tasks.extend([source, consumer])
        source.start()
        _wait(lambda: source.state.value == "RUNNING", "the source running")
        consumer.start()
        _wait(lambda: "consumer" in _COUNTERS and _COUNTERS["consumer"].rows > 0, "records at the consumer")
        return source, consumer, acks

    yield make
    for t in tasks:
        t.cancel()
        t.join(10)
    env.close()
    _COUNTERS.clear()


def _stop(source: Task, consumer: Task, acks: Acks, drain: bool = False, checkpoint_id: int = 1) -> dict[str, Any]:
    """Trigger a synchronous savepoint at the source; both tasks acknowledge it."""
    source.trigger_checkpoint(checkpoint_id, int(time.time() * 1000), True, synchronous=True, drain=drain)
    _wait(lambda: acks.of("source", checkpoint_id) and acks.of("consumer", checkpoint_id), "both acknowledgements")
    ack = acks.of("consumer", checkpoint_id)
    assert ack is not None and ack["kind"] == "checkpoint-ack"
    return ack


def _notify(tasks: tuple[Task, ...], completed: bool, checkpoint_id: int = 1) -> None:
    for t in tasks:
        t.notify_checkpoint(checkpoint_id, completed)


def test_a_completed_stop_finishes_both_tasks_with_nothing_after_the_savepoint(pipeline: Any) -> None:
    source, consumer, acks = pipeline(10**9)  # never ends by itself
    at_snapshot = _stop(source, consumer, acks)
    counter = _COUNTERS["consumer"]
    assert not at_snapshot["max_watermark"]
    _notify((source, consumer), completed=True)
    source.join(60)
    consumer.join(60)
    assert (source.state.value, consumer.state.value) == ("FINISHED", "FINISHED")
    assert counter.rows == at_snapshot["rows"]  # nothing was processed after the snapshot
    assert not counter.ended and not counter.max_watermark  # no end of input, no MAX_WATERMARK (SUSPEND)


def test_an_aborted_stop_resumes_both_tasks_and_a_later_stop_works(pipeline: Any) -> None:
    source, consumer, acks = pipeline(10**9)
    at_snapshot = _stop(source, consumer, acks)
    counter = _COUNTERS["consumer"]
    _notify((source, consumer), completed=False)
    _wait(lambda: counter.rows > at_snapshot["rows"], "records again after the abort")
    assert (source.state.value, consumer.state.value) == ("RUNNING", "RUNNING")
    again = _stop(source, consumer, acks, checkpoint_id=2)
    _notify((source, consumer), completed=True, checkpoint_id=2)
    source.join(60)
    consumer.join(60)
    assert (source.state.value, consumer.state.value) == ("FINISHED", "FINISHED")
    assert counter.rows == again["rows"] and not counter.ended and not counter.max_watermark


def test_drain_sends_max_watermark_before_the_savepoint(pipeline: Any) -> None:
    source, consumer, acks = pipeline(10**9)
    at_snapshot = _stop(source, consumer, acks, drain=True)
    assert at_snapshot["max_watermark"]  # event time ended before the consumer's snapshot
    _notify((source, consumer), completed=True)
    source.join(60)
    consumer.join(60)
    assert (source.state.value, consumer.state.value) == ("FINISHED", "FINISHED")
    assert _COUNTERS["consumer"].rows == at_snapshot["rows"] and not _COUNTERS["consumer"].ended
