"""Jobs of the master-failover drills (integration/test_master_failover.py) and of the takeover
benchmark (benchmarks/ha.py): every user function logs its ``open()`` (stage, subtask, attempt
number, TaskExecutor pid) to a file, so a drill counts how often each subtask was deployed over the
whole drill -- a new JobMaster's attempt numbers prove nothing by themselves.

* ``submit_forward_job``: a checkpointed STREAMING job, ``from_sequence -> map -> FileSink``
  (exactly-once), all forward: one pipelined region per subtask, so a region failover restarts
  one subtask and leaves the others alone. Slowed down while a flag file exists.
* ``submit_batch_job``: a BATCH job with a blocking exchange: stage "first" (source and maps)
  writes a blocking result; stage "second" (keyed reduce, a map held while a flag file exists,
  FileSink) reads it.

The job functions are pickled by value: TaskExecutors cannot import ``tests``.
"""

from __future__ import annotations

import glob
import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import cloudpickle

from tests.ha_jobs import add, key_of, to_key
from yarnflink import FileSink, MapFunction, RuntimeExecutionMode, StreamExecutionEnvironment
from yarnflink.api.environment import set_default_executor
from yarnflink.client.executor import RestClusterExecutor

cloudpickle.register_pickle_by_value(sys.modules[__name__])

__all__ = ["OpenLogging", "committed_values", "expected_batch_sums", "opens", "submit_batch_job", "submit_forward_job"]


class OpenLogging(MapFunction):
    """The identity, logging each ``open()`` to ``log``; while ``flag`` exists every record waits
    ``pause_s`` (``hold``: waits until the flag is gone). ``progress_every``: also logs, every so
    many records, the subtask's count and the time (``"stage": "progress"``: the benchmark's
    throughput, read from the TaskExecutors' side, so it needs no master)."""

    def __init__(
        self,
        log: str,
        stage: str,
        flag: str = "",
        pause_s: float = 0.0,
        hold: bool = False,
        progress_every: int = 0,
    ) -> None:
        self.log = log
        self.stage = stage
        self.flag = flag
        self.pause_s = pause_s
        self.hold = hold
        self.progress_every = progress_every
        self._subtask = 0
        self._count = 0

    def _append(self, entry: dict[str, Any]) -> None:
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(entry) + "\n").encode())  # one write of a short line: atomic with O_APPEND
        finally:
            os.close(fd)

    def open(self, runtime_context: Any) -> None:
        self._subtask = runtime_context.get_index_of_this_subtask()
        self._count = 0
        self._append(
            {
                "stage": self.stage,
                "subtask": self._subtask,
                "attempt": runtime_context.get_attempt_number(),
                "pid": os.getpid(),
                "time": time.time(),
            }
        )

    def map(self, value: Any) -> Any:
        if self.progress_every:
            self._count += 1
            if self._count % self.progress_every == 0:
                self._append({"stage": "progress", "subtask": self._subtask, "n": self._count, "time": time.time()})
        if self.flag:
            if self.hold:
                while os.path.exists(self.flag):
                    time.sleep(0.01)
            elif self.pause_s and os.path.exists(self.flag):
                time.sleep(self.pause_s)
        return value


def opens(log: Path, stage: str | None = None) -> list[dict[str, Any]]:
    """Every ``open()`` logged (of ``stage`` only, if given), in order."""
    if not log.exists():
        return []
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [e for e in entries if stage is None or e["stage"] == stage]


def _environment(rest_url: str, parallelism: int, config: Mapping[str, str]) -> tuple[Any, RestClusterExecutor]:
    executor = RestClusterExecutor(rest_url)
    set_default_executor(executor)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    for k, v in config.items():
        env.get_config().set(k, v)
    return env, executor


def submit_forward_job(
    rest_url: str,
    *,
    n: int,
    out: Path,
    checkpoints: Path,
    flag: Path,
    log: Path,
    name: str = "forward",
    parallelism: int = 2,
    checkpoint_interval: str = "300 ms",
    pause_s: float = 0.0005,
    config: Mapping[str, str] | None = None,
    progress_every: int = 0,
) -> str:
    """0..n-1 through an ``OpenLogging`` map into an exactly-once FileSink; returns the job id."""
    env, executor = _environment(
        rest_url,
        parallelism,
        {
            "execution.checkpointing.interval": checkpoint_interval,
            "execution.checkpointing.dir": f"file://{checkpoints}",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "1000",
            "restart-strategy.fixed-delay.delay": "0 ms",
            **(config or {}),
        },
    )
    try:
        (
            env.from_sequence(0, n - 1)
            .map(OpenLogging(str(log), "map", str(flag), pause_s, progress_every=progress_every))
            .sink_to(FileSink(str(out), format="jsonl"))
        )
        return str(env.execute_async(name).get_job_id())
    finally:
        set_default_executor(None)
        executor.rest.close()


def committed_values(out: Path) -> list[Any]:
    """The sorted records of the committed ``part-*`` files (in-progress files are hidden)."""
    values: list[Any] = []
    for f in sorted(glob.glob(str(out / "part-*"))):
        with open(f) as fh:
            values.extend(json.loads(line) for line in fh if line.strip())
    return sorted(values)


def submit_batch_job(
    rest_url: str, *, n: int, out: Path, flag: Path, log: Path, name: str = "batch", parallelism: int = 2
) -> str:
    """BATCH: stage "first" (0..n-1, keyed by x // 100) -> blocking exchange -> stage "second"
    (keyed sum, held while ``flag`` exists) -> FileSink."""
    env, executor = _environment(rest_url, parallelism, {"restart-strategy.type": "fixed-delay"})
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    try:
        (
            env.from_sequence(0, n - 1)
            .map(OpenLogging(str(log), "first"))
            .map(to_key)
            .key_by(key_of)
            .reduce(add)
            .map(OpenLogging(str(log), "second", str(flag), hold=True))
            .sink_to(FileSink(str(out), format="jsonl"))
        )
        return str(env.execute_async(name).get_job_id())
    finally:
        set_default_executor(None)
        executor.rest.close()


def expected_batch_sums(n: int) -> list[list[int]]:
    sums: dict[int, int] = {}
    for x in range(n):
        sums[x // 100] = sums.get(x // 100, 0) + x
    return sorted([k, s] for k, s in sums.items())
