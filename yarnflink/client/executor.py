"""Runs JobGraphs on a cluster through its REST API: the executor ``yarnflink run`` installs."""

from __future__ import annotations

import base64
import sys
import time
from typing import IO, Any, Iterator, Optional

import pyarrow as pa

from yarnflink.api.common import JobExecutionResult
from yarnflink.client.rest_client import TERMINAL_STATES, RestClient
from yarnflink.common.config import Configuration
from yarnflink.common.records import arrow_to_records
from yarnflink.jobgraph.jobgraph import JobGraph


class JobExecutionException(Exception):
    """The job ended FAILED or CANCELED; the message carries the root cause's traceback."""

    def __init__(self, job_id: str, state: str, cause: str) -> None:
        super().__init__(f"Job {job_id} {state}.\n{cause}".rstrip())
        self.job_id = job_id
        self.state = state
        self.cause = cause


class RestJobClient:
    def __init__(self, executor: "RestClusterExecutor", job_id: str, job_name: str) -> None:
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
    def __init__(self, rest_url: str, configuration: Optional[Configuration] = None, *,
                 progress: Optional[IO[str]] = None, poll_interval: float = 0.2) -> None:
        self.rest = RestClient(rest_url)
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

    def execute_and_collect(self, job_graph: JobGraph) -> Iterator[Any]:
        job_id = self.submit(job_graph)
        result = self.wait(job_id, job_graph.job_name)
        for payload in result.accumulators.get("collect", []):
            with pa.ipc.open_stream(base64.b64decode(payload)) as reader:
                for rb in reader:
                    yield from arrow_to_records(rb)

    def wait(self, job_id: str, job_name: str = "") -> JobExecutionResult:
        """Waits for the job to end, printing progress; raises if it did not finish."""
        last = ""
        while True:
            details = self.rest.job(job_id)
            line = _progress_line(details)
            if self.progress is not None and line != last:
                print(line, file=self.progress, flush=True)
                last = line
            if details["state"] in TERMINAL_STATES:
                break
            time.sleep(self.poll_interval)
        while True:
            result = self.rest.execution_result(job_id)
            if result["status"]["id"] == "COMPLETED":
                break
            time.sleep(self.poll_interval)
        r = result["job-execution-result"]
        if details["state"] != "FINISHED":
            cause = (r.get("failure-cause") or {}).get("stack-trace") or ""
            if not cause:
                cause = self.rest.exceptions(job_id).get("root-exception") or ""
            raise JobExecutionException(job_id, details["state"], cause)
        return JobExecutionResult(job_id, job_name or details["name"], int(r.get("net-runtime", 0)),
                                  dict(r.get("accumulator-results", {})))


def _progress_line(details: dict[str, Any]) -> str:
    parts = []
    for v in details.get("vertices", []):
        running = v["tasks"].get("RUNNING", 0)
        finished = v["tasks"].get("FINISHED", 0)
        parts.append(f"{v['name']} [{v['status']} {running + finished}/{v['parallelism']}]")
    return f"Job {details['jid']} {details['state']}: " + "; ".join(parts)


def stderr() -> IO[str]:
    return sys.stderr
