"""DispatcherGateway: what the REST API (and through it the client) calls on the Dispatcher
(Flink's DispatcherGateway). In the master's process, on the Dispatcher's loop; answers are the
JSON-shaped dicts the REST API serves. Unknown jobs raise ``UnknownJob`` (``KeyError``), a job
submitted twice ``DuplicateJobSubmission``.
"""

from __future__ import annotations

from typing import Any, Protocol

from yarnflink.jobgraph.jobgraph import JobGraph

__all__ = ["DispatcherGateway"]


class DispatcherGateway(Protocol):
    async def submit_job(self, job_graph: JobGraph) -> None: ...

    async def cancel_job(self, job_id: str) -> bool:
        """False if the job runs no longer."""
        ...

    async def overviews(self) -> list[dict[str, Any]]: ...

    async def job_details(self, job_id: str) -> dict[str, Any]: ...

    async def job_exceptions(self, job_id: str) -> dict[str, Any]: ...

    async def job_monitoring(self, job_id: str) -> dict[str, Any]:
        """Details, task metrics, checkpoint statistics and restarts of a job."""
        ...

    async def trigger_savepoint(
        self,
        job_id: str,
        target_directory: str | None,
        *,
        stop: bool = False,
        drain: bool = False,
        cancel_job: bool = False,
    ) -> str | None:
        """The savepoint's trigger id; None if the job runs no longer or has no checkpointing."""
        ...

    async def savepoint_status(self, job_id: str, trigger_id: str) -> dict[str, Any] | None: ...
