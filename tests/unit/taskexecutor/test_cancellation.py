"""Cancelling a task that does not end by itself (issue 22, failure 4): the operators stop between
two records, a thread stuck in one call is interrupted at ``task.cancellation.interval``, and past
``task.cancellation.timeout`` the TaskExecutor gets a fatal error. The schedule is pure (a clock
passed in); the rest runs real threads and a real ``Task``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import cloudpickle
import pytest

from tests.fakes.conditions import wait_until
from yarnflink.common.config import ConfigError, Configuration
from yarnflink.common.records import Batch
from yarnflink.executiongraph.executiongraph import ExecutionState
from yarnflink.network import ShuffleEnvironment
from yarnflink.operators.base import Cancellation, OperatorContext, TaskCancelled
from yarnflink.operators.specs import DiscardingSinkSpec, FilterSpec, FlatMapSpec, MapSpec, SequenceSourceSpec
from yarnflink.operators.transforms import FilterOperator, FlatMapOperator, MapOperator
from yarnflink.taskexecutor.cancellation import (
    CancellationSettings,
    CancellationWatch,
    FailFatally,
    Interrupt,
    TaskCanceler,
    TaskInterrupted,
    raise_async_exception,
)
from yarnflink.taskexecutor.gateway import ChainedOperator, TaskDeploymentDescriptor
from yarnflink.taskexecutor.task import Task

pytestmark = pytest.mark.timeout(60)


# ----------------------------------------------------------------------------- the schedule
def test_interrupts_start_within_a_second_and_repeat_at_the_interval_until_the_timeout() -> None:
    watch = CancellationWatch("t", cancelled_at=100.0, interval_s=30.0, timeout_s=180.0)
    assert watch.next_due() == 101.0
    assert watch.on_tick(100.5) == []
    assert watch.on_tick(101.0) == [Interrupt()]
    assert watch.next_due() == 131.0
    assert watch.on_tick(120.0) == []
    assert watch.on_tick(135.0) == [Interrupt()]  # late: the next one an interval after this one
    assert watch.next_due() == 165.0
    assert watch.on_tick(165.0) == [Interrupt()]
    for due in (195.0, 225.0, 255.0):
        assert watch.next_due() == due and watch.on_tick(due) == [Interrupt()]
    assert watch.next_due() == 280.0  # the deadline comes before the next interrupt (285)
    (fail,) = watch.on_tick(280.0)
    assert isinstance(fail, FailFatally) and "180 s" in fail.reason and "6 times" in fail.reason
    assert watch.next_due() is None and watch.on_tick(300.0) == []


def test_a_short_interval_brings_the_first_interrupt_forward_and_zero_timeout_never_fails() -> None:
    watch = CancellationWatch("t", cancelled_at=0.0, interval_s=0.2, timeout_s=0.0)
    assert watch.next_due() == 0.2
    for _ in range(49):
        due = watch.next_due()
        assert due is not None and watch.on_tick(due) == [Interrupt()]
    assert watch.interrupts == 49 and not watch.failed


@pytest.mark.parametrize(
    "job, expected",
    [
        ({}, CancellationSettings(30.0, 180.0)),
        ({"task.cancellation.interval": "500 ms"}, CancellationSettings(0.5, 180.0)),
        ({"task.cancellation.timeout": "0", "other": "x"}, CancellationSettings(30.0, 0.0)),
        ({"task.cancellation.interval": "2000", "task.cancellation.timeout": "5 s"}, CancellationSettings(2.0, 5.0)),
    ],
)
def test_a_jobs_settings_override_the_taskexecutors(job: dict[str, str], expected: CancellationSettings) -> None:
    assert CancellationSettings.from_config(Configuration()).overridden_by(job) == expected


@pytest.mark.parametrize(
    "job, fragment",
    [
        ({"task.cancellation.interval": "0 ms"}, "must be positive"),
        ({"task.cancellation.timeout": "soon"}, "'task.cancellation.timeout'"),
    ],
)
def test_bad_settings_are_named(job: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        CancellationSettings().overridden_by(job)


# ----------------------------------------------------------------------------- the interrupt
def test_an_async_exception_interrupts_a_pure_python_loop_but_waits_for_a_c_call() -> None:
    got: list[str] = []
    started = threading.Event()

    def spin() -> None:
        try:
            started.set()
            while True:
                pass
        except TaskInterrupted:
            got.append("spin")

    t = threading.Thread(target=spin, daemon=True)
    t.start()
    started.wait(5)
    assert t.ident is not None and raise_async_exception(t.ident, TaskInterrupted)
    t.join(5)
    assert got == ["spin"]

    caught_at: list[float] = []

    def sleep() -> None:
        started.set()
        try:
            time.sleep(0.5)  # one C call: the exception comes once it returns
            while True:
                pass
        except TaskInterrupted:
            caught_at.append(time.monotonic())

    started.clear()
    t = threading.Thread(target=sleep, daemon=True)
    t.start()
    started.wait(5)
    begin = time.monotonic()
    assert t.ident is not None and raise_async_exception(t.ident, TaskInterrupted)
    t.join(5)
    assert len(caught_at) == 1 and caught_at[0] - begin >= 0.4  # not before the sleep ended


class _Stubborn:
    """A thread that swallows interrupts (``swallow``) or ends on the first."""

    def __init__(self, swallow: bool) -> None:
        self.interrupts = 0
        self.swallow = swallow
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            try:
                while not self.stop:
                    time.sleep(0.001)
            except TaskInterrupted:
                self.interrupts += 1
                if not self.swallow:
                    return

    def interrupt(self) -> None:
        assert self.thread.ident is not None
        raise_async_exception(self.thread.ident, TaskInterrupted)


def test_the_canceler_interrupts_until_the_thread_ends_and_reports_nothing() -> None:
    stuck = _Stubborn(swallow=False)
    stuck.thread.start()
    fatal: list[str] = []
    watch = CancellationWatch("t", time.monotonic(), interval_s=0.05, timeout_s=10.0)
    canceler = TaskCanceler(watch, stuck.thread, stuck.interrupt, fatal.append)
    canceler.start()
    canceler.join(5)
    assert not stuck.thread.is_alive() and stuck.interrupts == 1 and fatal == []


def test_the_canceler_reports_a_fatal_error_for_a_thread_that_swallows_interrupts() -> None:
    stuck = _Stubborn(swallow=True)
    stuck.thread.start()
    fatal: list[str] = []
    watch = CancellationWatch("stubborn", time.monotonic(), interval_s=0.05, timeout_s=0.5)
    canceler = TaskCanceler(watch, stuck.thread, stuck.interrupt, fatal.append)
    canceler.start()
    canceler.join(5)
    try:
        assert len(fatal) == 1 and "task stubborn" in fatal[0] and "task.cancellation.timeout" in fatal[0]
        assert stuck.interrupts >= 5 and stuck.thread.is_alive()
    finally:
        stuck.stop = True
        stuck.thread.join(5)


# ----------------------------------------------------------------------------- the operators
def _ctx(cancellation: Cancellation) -> OperatorContext:
    return OperatorContext("t", "op", 0, 1, 128, cancellation=cancellation)


class _Collect:
    def __init__(self) -> None:
        self.batches: list[Batch] = []

    def emit(self, batch: Batch) -> None:
        self.batches.append(batch)

    def end_input(self) -> None:
        pass


@pytest.mark.parametrize(
    "make",
    [
        lambda fn: MapOperator(MapSpec(fn)),
        lambda fn: FlatMapOperator(FlatMapSpec(lambda x: [fn(x)])),
        lambda fn: FilterOperator(FilterSpec(lambda x: fn(x) is not None)),
    ],
    ids=["map", "flat_map", "filter"],
)
def test_a_per_record_operator_stops_between_two_records_once_cancelled(make: Any) -> None:
    cancellation = Cancellation("t")
    seen: list[int] = []

    def fn(x: int) -> int:
        seen.append(x)
        if x == 3:
            cancellation.cancelled = True  # as Task.cancel does from another thread
        return x

    op = make(fn)
    op.open(_ctx(cancellation))
    op.output = _Collect()
    with pytest.raises(TaskCancelled):
        op.process_batch(Batch.from_rows(list(range(1, 65537))))
    assert seen == [1, 2, 3] and op.output.batches == []


# ----------------------------------------------------------------------------- a real task
def _tdd(fn: Any, job_config: dict[str, str]) -> TaskDeploymentDescriptor:
    """sequence -> map(fn) -> discard, chained in one task."""
    return TaskDeploymentDescriptor(
        job_id="job",
        task_name="slow",
        execution_id="exec-slow",
        subtask_index=0,
        parallelism=1,
        max_parallelism=128,
        runtime_mode="STREAMING",
        job_config=job_config,
        operators=(
            ChainedOperator(
                1, "source", "source", cloudpickle.dumps(SequenceSourceSpec(1, 10**9)), chained_outputs=(2,)
            ),
            ChainedOperator(2, "map", "map", cloudpickle.dumps(MapSpec(fn)), chained_outputs=(3,)),
            ChainedOperator(3, "sink", "sink", cloudpickle.dumps(DiscardingSinkSpec())),
        ),
    )


@pytest.fixture
def shuffle() -> Iterator[ShuffleEnvironment]:
    env = ShuffleEnvironment("127.0.0.1", 0)
    env.start()
    yield env
    env.close()


class _Started:
    """Shared with the task's functions (pickled by reference: the module is importable)."""

    event = threading.Event()
    stop = threading.Event()


def _run_task(shuffle: ShuffleEnvironment, fn: Any, fatal: list[str]) -> tuple[Task, list[ExecutionState]]:
    states: list[ExecutionState] = []
    settings = CancellationSettings(interval_s=0.05, timeout_s=1.0)
    task = Task(_tdd(fn, {}), shuffle, lambda t, s, e: states.append(s), lambda k, p: None, None, None, settings)
    task._fatal_error = fatal.append
    _Started.event.clear()
    task.start()
    assert _Started.event.wait(20), "the map did not start"
    return task, states


def test_a_task_in_a_slow_map_stops_at_the_next_record(shuffle: ShuffleEnvironment) -> None:
    def slow(x: int) -> int:
        _Started.event.set()
        time.sleep(0.01)  # 65 536 records: ~11 minutes a batch
        return x

    fatal: list[str] = []
    task, states = _run_task(shuffle, slow, fatal)
    task.cancel()
    task.join(5)
    assert not task.is_alive and states[-1] == ExecutionState.CANCELED and fatal == []
    assert task.canceler is not None and task.canceler.watch.interrupts == 0  # ended politely


def test_a_task_stuck_in_one_call_is_interrupted(shuffle: ShuffleEnvironment) -> None:
    def stuck(x: int) -> int:
        _Started.event.set()
        while True:  # never back to the record loop
            time.sleep(0.001)

    fatal: list[str] = []
    task, states = _run_task(shuffle, stuck, fatal)
    task.cancel()
    task.join(5)
    assert not task.is_alive and states[-1] == ExecutionState.CANCELED and fatal == []
    assert task.canceler is not None and task.canceler.watch.interrupts >= 1


def test_a_task_that_swallows_interrupts_is_a_fatal_error(shuffle: ShuffleEnvironment) -> None:
    _Started.stop.clear()

    def stubborn(x: int) -> int:
        _Started.event.set()
        while not _Started.stop.is_set():
            try:
                time.sleep(0.001)
            except BaseException:  # noqa: BLE001, S110 - the point of the test
                pass
        return x

    fatal: list[str] = []
    task, states = _run_task(shuffle, stubborn, fatal)
    try:
        task.cancel()
        wait_until(lambda: fatal, 10, "the fatal error")
        assert "task slow (1/1)" in fatal[0] and task.is_alive
        assert ExecutionState.CANCELED not in states
    finally:
        _Started.stop.set()
        task.join(5)
