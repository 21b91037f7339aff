"""Task mailbox benchmark (issue 16 point 4): how fast a task takes up a checkpoint trigger, and
how many rows a task moves, with real ``Task`` threads and a real ``ShuffleEnvironment`` on
loopback in this one process (no cluster: the figures are the task's own).

* ``source trigger->barrier``: a busy source (an endless sequence feeding a counting consumer) gets
  ``trigger_checkpoint`` as the TaskExecutor's ``TriggerCheckpoint`` RPC hands it over; measured
  until the source's result partition receives the barrier.
* ``idle trigger->barrier``: the same for a task blocked on an input that sends nothing (where a
  polling task waits for its next poll).
* ``idle notify->operator``: ``notify_checkpoint`` to a consumer blocked on empty input, until its
  operator's ``notify_checkpoint_complete`` runs (a sink's commit).
* ``throughput``: rows/s from a source to a counting consumer until both finish, with 64 Ki-row
  batches and checkpointing off, and with 1 Ki-row batches and checkpointing on; and rows per CPU
  second of the two task threads (``time.thread_time``), which a loaded machine disturbs far less
  (pinned to one core with ``taskset -c 1``, run to run within a few percent).

    python -m benchmarks.task_mailbox [--runs 3] [--triggers 40] [--rows 50000000] [--json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cloudpickle

from yarnflink.checkpoint.barriers import CheckpointBarrier
from yarnflink.common.records import Batch
from yarnflink.network import ShuffleEnvironment
from yarnflink.operators import factory
from yarnflink.operators.base import StreamOperator
from yarnflink.operators.memory import tune_allocator
from yarnflink.operators.sources import SequenceSource
from yarnflink.operators.specs import SequenceSourceSpec
from yarnflink.taskexecutor.task import Task

CHECKPOINTING = {"execution.checkpointing.interval": "1 h"}  # on; the benchmark triggers itself


@dataclass
class SizedSequenceSpec(SequenceSourceSpec):
    """A sequence source with its own batch size."""

    batch_rows: int = 65536


@dataclass
class CounterSpec:
    name: str


class Counter(StreamOperator):
    """Counts rows; remembers when each checkpoint's completion reached it."""

    instances: dict[str, Counter] = {}

    def __init__(self, spec: CounterSpec) -> None:
        self.rows = 0
        self.notified: dict[int, float] = {}
        Counter.instances[spec.name] = self

    def process_batch(self, batch: Batch) -> None:
        self.rows += len(batch)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.notified[checkpoint_id] = time.perf_counter()

    def end_input(self) -> None:
        pass


def _register_operators() -> None:
    def sized_source(spec: SizedSequenceSpec) -> SequenceSource:
        return SequenceSource(spec, batch_rows=spec.batch_rows)

    factory.OPERATORS[SizedSequenceSpec] = sized_source  # type: ignore[assignment]  # a factory, as for ProcessSpec
    factory.OPERATORS[CounterSpec] = Counter


class ProbedShuffle(ShuffleEnvironment):
    """Records when a checkpoint barrier enters each result partition. Its queues hold every
    barrier of a run: the idle task's output has no consumer."""

    def __init__(self) -> None:
        super().__init__("127.0.0.1", 0, max_buffers_per_channel=100_000)
        self.barriers: dict[tuple[str, int], float] = {}

    def create_result_partition(self, partition_id: str, num_subpartitions: int, **kwargs: Any) -> Any:
        partition = super().create_result_partition(partition_id, num_subpartitions, **kwargs)
        emit = partition.emit_event

        def emit_event(event: object, subpartition: int | None = None) -> None:
            if isinstance(event, CheckpointBarrier):
                self.barriers.setdefault((partition_id, event.checkpoint_id), time.perf_counter())
            emit(event, subpartition)

        partition.emit_event = emit_event  # type: ignore[method-assign]
        return partition


def _tdd(
    name: str,
    config: dict[str, str],
    operator: dict[str, Any],
    upstream: tuple[str, str] | None = None,
    produces: tuple[str, str] | None = None,
) -> Any:
    """A one-operator task reading ``upstream`` (partition id, address) and producing ``produces``
    (dataset, partition id). Built as the typed descriptor, or, on code from before it (the
    "before" run of this benchmark), as the protobuf one."""
    g: Any
    try:
        g = importlib.import_module("yarnflink.taskexecutor.gateway")
    except ImportError:
        g = None
    if g is not None:
        return g.TaskDeploymentDescriptor(
            job_id="bench",
            task_name=name,
            execution_id=f"exec-{name}",
            subtask_index=0,
            parallelism=1,
            max_parallelism=128,
            runtime_mode="STREAMING",
            job_config=config,
            operators=(g.ChainedOperator(**operator),),
            input_gates=(
                (g.InputGateDescriptor("ds", "forward", (g.InputChannelDescriptor(upstream[0], 0, upstream[1]),)),)
                if upstream
                else ()
            ),
            produced_partitions=((g.ResultPartitionDescriptor(*produces, 1, "forward"),) if produces else ()),
        )
    pb = importlib.import_module("yarnflink.rpc.pb.taskexecutor_pb2")
    tdd = pb.TaskDeploymentDescriptor(
        job_id="bench",
        task_name=name,
        execution_id=f"exec-{name}",
        subtask_index=0,
        parallelism=1,
        max_parallelism=128,
        runtime_mode="STREAMING",
        job_config=config,
    )
    tdd.operators.append(pb.ChainedOperator(**{**operator, "output_datasets": list(operator["output_datasets"])}))
    if upstream:
        tdd.input_gates.add(dataset_id="ds", partitioning="forward").channels.add(
            partition_id=upstream[0], subpartition=0, producer_data_address=upstream[1]
        )
    if produces:
        tdd.produced_partitions.add(
            dataset_id=produces[0], partition_id=produces[1], num_subpartitions=1, partitioning="forward"
        )
    return tdd


def source_tdd(name: str, rows: int, batch_rows: int, config: dict[str, str]) -> Any:
    spec = SizedSequenceSpec(0, rows - 1, batch_rows=batch_rows)
    source = {
        "node_id": 1,
        "name": "source",
        "kind": "source",
        "spec": cloudpickle.dumps(spec),
        "output_datasets": ("ds",),
    }
    return _tdd(name, config, source, produces=("ds", f"p-{name}"))


def counter_tdd(name: str, upstream: str, address: str, config: dict[str, str], produce: bool = False) -> Any:
    counter = {
        "node_id": 2,
        "name": "counter",
        "kind": "counter",
        "spec": cloudpickle.dumps(CounterSpec(name)),
        "output_datasets": ("out",) if produce else (),
    }
    return _tdd(name, config, counter, upstream=(upstream, address), produces=("out", f"p-{name}") if produce else None)


def _task(tdd: Any, env: ShuffleEnvironment) -> Task:
    return Task(tdd, env, lambda task, state, error: None, lambda kind, payload: None)


def _wait(predicate: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.0005)


def _summary(samples_s: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000.0 for s in samples_s)
    return {
        "n": len(ms),
        "median_ms": round(statistics.median(ms), 3),
        "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 3),
        "max_ms": round(ms[-1], 3),
        "mean_ms": round(statistics.fmean(ms), 3),
    }


def _spaced(rng: random.Random) -> None:
    time.sleep(rng.uniform(0.005, 0.03))  # triggers at random phases of whatever the task does


def source_trigger_latency(triggers: int, rng: random.Random) -> list[float]:
    env = ProbedShuffle()
    env.start()
    source = _task(source_tdd("src", 10**12, 65536, CHECKPOINTING), env)
    consumer = _task(counter_tdd("sink", "p-src", env.address, CHECKPOINTING), env)
    try:
        source.start()
        consumer.start()
        _wait(lambda: "sink" in Counter.instances and Counter.instances["sink"].rows > 0, "records at the consumer")
        samples = []
        for cid in range(1, triggers + 1):
            _spaced(rng)
            t0 = time.perf_counter()
            source.trigger_checkpoint(cid, int(time.time() * 1000))
            _wait(lambda: ("p-src", cid) in env.barriers, f"barrier {cid}")  # noqa: B023 - waited on at once
            samples.append(env.barriers[("p-src", cid)] - t0)
        return samples
    finally:
        for t in (source, consumer):
            t.cancel()
            t.join(10)
        env.close()
        Counter.instances.clear()


def idle_task_latencies(triggers: int, rng: random.Random) -> tuple[list[float], list[float]]:
    """(trigger->barrier, notify->operator) at a task whose input sends nothing."""
    env = ProbedShuffle()
    env.start()
    env.create_result_partition("p-silent", 1)  # an upstream that never sends
    task = _task(counter_tdd("idle", "p-silent", env.address, CHECKPOINTING, produce=True), env)
    try:
        task.start()
        _wait(lambda: "idle" in Counter.instances and task.state.value == "RUNNING", "the idle task running")
        time.sleep(0.1)  # blocked on its empty input by now
        counter = Counter.instances["idle"]
        barriers, notifications = [], []
        for cid in range(1, triggers + 1):
            _spaced(rng)
            t0 = time.perf_counter()
            task.trigger_checkpoint(cid, int(time.time() * 1000))
            _wait(lambda: ("p-idle", cid) in env.barriers, f"barrier {cid}")  # noqa: B023
            barriers.append(env.barriers[("p-idle", cid)] - t0)
            _spaced(rng)
            t0 = time.perf_counter()
            task.notify_checkpoint(cid, True)
            _wait(lambda: cid in counter.notified, f"notification {cid}")  # noqa: B023
            notifications.append(counter.notified[cid] - t0)
        return barriers, notifications
    finally:
        task.cancel()
        task.join(10)
        env.close()
        Counter.instances.clear()


class TaskCpu:
    """A task state reporter (called on the task's thread) that sums the CPU time each task
    thread spends from RUNNING to its end: the tasks' own cost, apart from the rest of the
    process and from other processes on the machine."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.seconds = 0.0

    def __call__(self, task: Task, state: Any, error: Any) -> None:
        if state.value == "RUNNING":
            self.started[task.name] = time.thread_time()
        elif state.value in ("FINISHED", "FAILED", "CANCELED") and task.name in self.started:
            self.seconds += time.thread_time() - self.started.pop(task.name)


def throughput(rows: int, batch_rows: int, config: dict[str, str]) -> tuple[float, float]:
    """(rows per second, rows per CPU second of the two task threads) from a source task to a
    counting consumer task, start to both finished. The second holds up on a loaded machine."""
    env = ShuffleEnvironment("127.0.0.1", 0)
    env.start()
    cpu = TaskCpu()
    source = Task(source_tdd("src", rows, batch_rows, config), env, cpu, lambda kind, payload: None)
    consumer = Task(counter_tdd("sink", "p-src", env.address, config), env, cpu, lambda kind, payload: None)
    try:
        started = time.perf_counter()
        source.start()
        consumer.start()
        source.join(600)
        consumer.join(600)
        elapsed = time.perf_counter() - started
        if consumer.state.value != "FINISHED" or Counter.instances["sink"].rows != rows:
            raise RuntimeError(f"the consumer ended {consumer.state.value} with {Counter.instances['sink'].rows} rows")
        return rows / elapsed, rows / max(cpu.seconds, 1e-9)
    finally:
        for t in (source, consumer):
            t.cancel()
            t.join(10)
        env.close()
        Counter.instances.clear()


THROUGHPUTS = {  # name -> (batch rows, config)
    "64k_batches": (65536, {}),
    "1k_batches_checkpointing": (1024, CHECKPOINTING),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--triggers", type=int, default=40, help="triggers (and notifications) per latency run")
    parser.add_argument("--rows", type=int, default=50_000_000, help="rows per 64 Ki-batch throughput run")
    parser.add_argument("--small-rows", type=int, default=10_000_000, help="rows per 1 Ki-batch throughput run")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = parser.parse_args(argv)
    # as a TaskExecutor process does (yarnflink/entrypoint/taskexecutor.py): without it, glibc's
    # trimming makes page faults of 64 Ki-row batches, and how many depends on when each batch
    # happens to be freed rather than on the task's work
    tune_allocator()
    _register_operators()
    rng = random.Random(args.seed)
    latencies: dict[str, list[float]] = {
        "source_trigger_to_barrier": [],
        "idle_trigger_to_barrier": [],
        "idle_notify_to_operator": [],
    }
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in THROUGHPUTS}
    rows = {"64k_batches": args.rows, "1k_batches_checkpointing": args.small_rows}
    for _ in range(args.runs):
        latencies["source_trigger_to_barrier"] += source_trigger_latency(args.triggers, rng)
        barriers, notifications = idle_task_latencies(args.triggers, rng)
        latencies["idle_trigger_to_barrier"] += barriers
        latencies["idle_notify_to_operator"] += notifications
        for name, (batch_rows, config) in THROUGHPUTS.items():
            rates[name].append(throughput(rows[name], batch_rows, config))
    summaries = {name: _summary(samples) for name, samples in latencies.items()}
    if args.json:
        out = {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            **summaries,
            **{f"throughput_{name}": [[round(w), round(c)] for w, c in runs] for name, runs in rates.items()},
        }
        print(json.dumps(out))
        return
    for name, s in summaries.items():
        print(
            f"{name:28s} n={s['n']:4.0f}  median {s['median_ms']:8.3f} ms  p90 {s['p90_ms']:8.3f} ms"
            f"  max {s['max_ms']:8.3f} ms"
        )
    for name, runs in rates.items():
        wall = [w for w, _ in runs]
        cpu = [c for _, c in runs]
        print(
            f"throughput {name:26s} rows/s: {'  '.join(f'{x / 1e6:.1f}M' for x in wall)}"
            f" (median {statistics.median(wall) / 1e6:.1f}M);  rows/task-CPU-s: {'  '.join(f'{x / 1e6:.1f}M' for x in cpu)}"
            f" (median {statistics.median(cpu) / 1e6:.1f}M)"
        )


if __name__ == "__main__":
    main()
