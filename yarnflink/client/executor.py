"""Runs JobGraphs on a cluster through its REST API: the executor ``yarnflink run`` installs.

Attached, it shows the job's progress on ``progress`` (stderr for ``yarnflink run``): every vertex
with its state, running subtasks and records per second in and out, the job's restarts and its
last checkpoint. On a terminal the block is redrawn in place every second; otherwise a block is
printed when a state changes and every ``PLAIN_PROGRESS_INTERVAL_S`` seconds.
"""

from __future__ import annotations

import shutil
import time
from typing import IO, Any

from yarnflink.api.common import JobExecutionResult
from yarnflink.client.collect import CollectResultIterator
from yarnflink.client.console import ConsoleForwarder
from yarnflink.client.polling import poll_intervals
from yarnflink.client.rest_client import TERMINAL_STATES, RestClient
from yarnflink.common.config import Configuration
from yarnflink.jobgraph.jobgraph import JobGraph


class JobExecutionException(Exception):
    """The job ended FAILED or CANCELED; the message carries the root cause's traceback."""

    def __init__(self, job_id: str, state: str, cause: str) -> None:
        super().__init__(f"Job {job_id} {state}.\n{cause}".rstrip())
        self.job_id = job_id
        self.state = state
        self.cause = cause


class RestJobClient:
    def __init__(self, executor: RestClusterExecutor, job_id: str, job_name: str) -> None:
        self.executor = executor
        self.job_id = job_id
        self.job_name = job_name

    def get_job_id(self) -> str:
        return self.job_id

    def get_job_status(self) -> str:
        return str(self.executor.rest.job(self.job_id)["state"])

    def cancel(self) -> None:
        self.executor.rest.cancel(self.job_id)

    def get_job_execution_result(self) -> JobExecutionResult:
        return self.executor.wait(self.job_id, self.job_name)


class RestClusterExecutor:
    def __init__(
        self,
        rest_url: str,
        configuration: Configuration | None = None,
        *,
        progress: IO[str] | None = None,
        poll_interval: float = 0.2,
        console: ConsoleForwarder | None = None,
    ) -> None:
        self.rest = RestClient(rest_url)
        #: attached to a cluster of this machine: copies the TaskExecutors' stdout to the console
        self.console = console
        self.configuration = configuration or Configuration()
        self.progress = progress
        self.poll_interval = poll_interval
        self.submitted: list[str] = []

    def submit(self, job_graph: JobGraph) -> str:
        job_id = self.rest.submit_job(job_graph.to_json())
        self.submitted.append(job_id)
        return job_id

    def execute(self, job_graph: JobGraph, attached: bool = True) -> JobExecutionResult:
        job_id = self.submit(job_graph)
        if not attached:
            return JobExecutionResult(job_id, job_graph.job_name, detached=True)
        return self.wait(job_id, job_graph.job_name)

    def execute_async(self, job_graph: JobGraph) -> RestJobClient:
        return RestJobClient(self, self.submit(job_graph), job_graph.job_name)

    def execute_and_collect(self, job_graph: JobGraph) -> CollectResultIterator:
        """Submits now; the iterator reads the results while the job runs (and cancels it when
        closed early)."""
        return CollectResultIterator(self, self.submit(job_graph), job_graph.job_name)

    def wait(self, job_id: str, job_name: str = "") -> JobExecutionResult:
        """Waits for the job to end, printing progress; raises if it did not finish."""
        progress = ProgressPrinter(self.rest, self.progress) if self.progress is not None else None
        delays = poll_intervals(self.poll_interval)
        while True:
            details = self.rest.job(job_id)
            ended = details["state"] in TERMINAL_STATES
            if progress is not None:
                progress.update(details, final=ended)
            if ended:
                break
            time.sleep(next(delays))
        if self.console is not None:
            self.console.drain()  # all the job printed, before execute() returns
        delays = poll_intervals(self.poll_interval)
        while True:
            result = self.rest.execution_result(job_id)
            if result["status"]["id"] == "COMPLETED":
                break
            time.sleep(next(delays))
        r = result["job-execution-result"]
        if details["state"] != "FINISHED":
            cause = (r.get("failure-cause") or {}).get("stack-trace") or ""
            if not cause:
                cause = self.rest.exceptions(job_id).get("root-exception") or ""
            raise JobExecutionException(job_id, details["state"], cause)
        return JobExecutionResult(
            job_id, job_name or details["name"], int(r.get("net-runtime", 0)), dict(r.get("accumulator-results", {}))
        )


#: Without a terminal, a progress block is printed at least this often while the job runs.
PLAIN_PROGRESS_INTERVAL_S = 5.0
TTY_PROGRESS_INTERVAL_S = 1.0


def _rate(x: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= size:
            return f"{x / size:.1f}{unit}/s"
    return f"{x:.0f}/s"


def _count(x: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= size:
            return f"{x / size:.2f}{unit}"
    return f"{x:.0f}"


def progress_lines(details: dict[str, Any], restarts: int | None, checkpoint: str) -> list[str]:
    """The progress block: the job, then one line per vertex."""
    head = f"Job {details['jid']} ({details.get('name', '')}) {details['state']}"
    extras = [f"restarts: {restarts if restarts is not None else '-'}", f"last checkpoint: {checkpoint}"]
    lines = [f"{head}  [{', '.join(extras)}]"]
    vertices = details.get("vertices", [])
    width = min(48, max((len(v["name"]) for v in vertices), default=0))
    for v in vertices:
        tasks = v.get("tasks", {})
        active = tasks.get("RUNNING", 0) + tasks.get("FINISHED", 0)
        m = v.get("metrics") or {}
        name = v["name"] if len(v["name"]) <= width else v["name"][: width - 1] + "~"
        line = (
            f"  {name:<{width}}  {v['status']:<12} {active}/{v['parallelism']}"
            f"  in {_rate(m.get('read-records-per-second', 0.0)):>9} ({_count(m.get('read-records', 0))})"
            f"  out {_rate(m.get('write-records-per-second', 0.0)):>9} ({_count(m.get('write-records', 0))})"
        )
        level = m.get("backpressure-level")
        if level and level != "ok":
            line += f"  backpressure {level}"
        lines.append(line)
    return lines


class ProgressPrinter:
    def __init__(self, rest: RestClient, out: IO[str], *, clock: Any = time.monotonic) -> None:
        self.rest = rest
        self.out = out
        self.clock = clock
        try:
            self.tty = bool(out.isatty())
        except (AttributeError, ValueError):
            self.tty = False
        self.interval = TTY_PROGRESS_INTERVAL_S if self.tty else PLAIN_PROGRESS_INTERVAL_S
        self._last_time = -float("inf")
        self._last_signature: tuple[Any, ...] | None = None
        self._drawn = 0

    def _extras(self, job_id: str) -> tuple[int | None, str]:
        restarts: int | None = None
        checkpoint = "none"
        try:
            for m in self.rest.get_json(f"/jobs/{job_id}/metrics", get="numRestarts"):
                if m.get("id") == "numRestarts":
                    restarts = int(float(m["value"]))
            latest = (self.rest.get_json(f"/jobs/{job_id}/checkpoints").get("latest") or {}).get("completed")
            if latest:
                checkpoint = f"#{latest.get('id')}"
                if latest.get("end_to_end_duration") is not None:
                    checkpoint += f" in {int(latest['end_to_end_duration'])} ms"
                size = latest.get("checkpointed_size", latest.get("state_size"))
                if size is not None:
                    checkpoint += f", {_count(float(size))}B"
        except Exception:  # noqa: BLE001 - progress is best effort; the job result is what counts
            pass
        return restarts, checkpoint

    def update(self, details: dict[str, Any], final: bool = False) -> None:
        signature = (
            details["state"],
            tuple((v["status"], tuple(sorted(v.get("tasks", {}).items()))) for v in details.get("vertices", [])),
        )
        now = self.clock()
        if not final and signature == self._last_signature and now - self._last_time < self.interval:
            return
        self._last_signature, self._last_time = signature, now
        lines = progress_lines(details, *self._extras(details["jid"]))
        if self.tty:
            cols = shutil.get_terminal_size((120, 24)).columns
            lines = [line[: max(20, cols - 1)] for line in lines]
            if self._drawn:
                self.out.write(f"\x1b[{self._drawn}F\x1b[J")
            self._drawn = 0 if final else len(lines)
        self.out.write("\n".join(lines) + "\n")
        self.out.flush()
