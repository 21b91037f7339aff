"""The chaos workload: checkpointed streaming jobs with exactly-once FileSinks on the HA session.
Each is tests/ha_jobs.py's keyed running sum over a finite sequence, slowed down while a flag
file exists so that it outlasts the faults, and run at full speed once the flag goes, so that it
ends and its committed output can be compared with the failure-free one (tests/oracles.py).

Two jobs, one per checkpoint storage the faults hit: ``disk`` checkpoints to the fault-injecting
local file system (``chaosfile://``), ``s3`` to moto's S3 behind the stoppable endpoint."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from tests.ha_jobs import SlowWhile, add, expected_running_sums, key_of, to_key
from yarnflink import FileSink, StreamExecutionEnvironment
from yarnflink.api.environment import set_default_executor
from yarnflink.client.executor import RestClusterExecutor

__all__ = ["ChaosJob", "PAUSE_S", "records_for", "submit"]

#: a record's pause while slowed down: a checkpointing source emits 1024-record batches, so
#: barriers pass about once a second
PAUSE_S = 0.001
PARALLELISM = 2


def records_for(duration_s: float, warmup_s: float = 40.0) -> int:
    """Records enough for a job to run slowed down through ``duration_s`` of faults (and its
    restarts from checkpoints) with a margin: each of the parallel subtasks takes half of them."""
    return int(math.ceil(PARALLELISM * 1.3 * (duration_s + warmup_s) / PAUSE_S / 1000.0)) * 1000


@dataclass
class ChaosJob:
    name: str
    checkpoint_dir: str
    out: Path
    flag: Path
    records: int
    job_id: str = ""

    def expected(self) -> list[tuple[int, int]]:
        return expected_running_sums(self.records)


def submit(rest_url: str, job: ChaosJob, conf: dict[str, str]) -> str:
    """Submits ``job`` (the flag file is created first); returns and keeps its job id."""
    job.flag.touch()
    executor = RestClusterExecutor(rest_url)
    set_default_executor(executor)
    try:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(PARALLELISM)
        for k, v in {
            "execution.checkpointing.interval": "500 ms",
            "execution.checkpointing.dir": job.checkpoint_dir,
            "execution.checkpointing.timeout": "10 s",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "100000",
            "restart-strategy.fixed-delay.delay": "200 ms",
            **conf,
        }.items():
            env.get_config().set(k, v)
        (
            env.from_sequence(0, job.records - 1)
            .map(SlowWhile(str(job.flag), PAUSE_S))
            .map(to_key)
            .key_by(key_of)
            .reduce(add)
            .sink_to(FileSink(str(job.out), format="jsonl"))
        )
        job.job_id = str(env.execute_async(f"chaos {job.name}").get_job_id())
        return job.job_id
    finally:
        set_default_executor(None)
        executor.rest.close()
