"""REST handlers of the dashboard, metrics and logs, with Flink's paths and shapes:

* ``/`` and ``/web/{filename}``: the dashboard (plain HTML and JavaScript from package data);
* ``/jobs/{jobid}/vertices/{vertexid}`` (subtasks), ``.../metrics``, ``.../subtasks/metrics``
  (aggregated), ``.../subtasks/{subtaskindex}/metrics``, ``.../backpressure``;
  ``/jobs/{jobid}/metrics``, ``/jobs/{jobid}/checkpoints``, ``/jobs/{jobid}/config``;
* ``/jobmanager/metrics``, ``/jobmanager/logs`` (+ ``/{filename}``), ``/jobmanager/log``,
  ``/jobmanager/stdout``;
* ``/taskmanagers/{taskmanagerid}`` (slots with their tasks, memory), ``.../metrics``,
  ``.../logs`` (+ ``/{filename}``), ``.../log``, ``.../stdout``.

Metric values come from the MetricStore, refreshed by the MetricFetcher at most once per
``metrics.fetcher.update-interval``.
"""

from __future__ import annotations

import time
from importlib import resources
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse, PlainTextResponse, Response

from yarnflink.common.rpc_errors import RpcException
from yarnflink.dispatcher import rest_models as m
from yarnflink.dispatcher.metric_fetcher import UnknownTaskManager
from yarnflink.dispatcher.rest_errors import NotFound, RestError, parse_job_id
from yarnflink.dispatcher.views import (
    backpressure_json,
    find_vertex,
    job_metrics,
    subtask_metrics,
    taskmanager_details,
    vertex_metric_ids,
)
from yarnflink.metrics import logfiles
from yarnflink.metrics import names as n
from yarnflink.metrics.checkpoint_stats import checkpoint_details, public_stats, task_checkpoint_details
from yarnflink.metrics.process import process_metrics
from yarnflink.metrics.store import (
    MetricQueryError,
    aggregate_values,
    metric_values,
    parse_aggs,
    parse_get,
    parse_subtasks,
)
from yarnflink.resourcemanager.gateway import TaskManagerInfo

if TYPE_CHECKING:
    from yarnflink.dispatcher.dispatcher import Dispatcher

#: The dashboard's files (``yarnflink/dispatcher/static``) and their media types.
STATIC_FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
LOG_MAX_BYTES = logfiles.DEFAULT_MAX_BYTES

Responses = dict[int | str, dict[str, Any]]
_E400: Responses = {400: {"model": m.ErrorResponse, "description": "bad request"}}
_E404: Responses = {404: {"model": m.ErrorResponse, "description": "not found"}}
_E: Responses = {**_E400, **_E404}
_TEXT: dict[str, Any] = {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "the file's text"}


def _doc(model: Any, description: str = "OK") -> Responses:
    return {200: {"model": model, "description": description}, **_E}


def _static(name: str) -> bytes:
    return resources.files("yarnflink.dispatcher").joinpath("static", name).read_bytes()


def _query(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except MetricQueryError as e:
        raise RestError(400, str(e)) from None


def _text(content: bytes, truncated: bool) -> PlainTextResponse:
    text = content.decode("utf-8", errors="replace")
    if truncated:
        text = f"[... only the last {len(content)} bytes of the file ...]\n" + text
    return PlainTextResponse(text)


def monitoring_router(dispatcher: Dispatcher) -> APIRouter:
    r = APIRouter()
    fetcher = dispatcher.metric_fetcher
    assert fetcher is not None

    # ------------------------------------------------------------------ dashboard
    @r.get(
        "/",
        response_class=HTMLResponse,
        summary="The web dashboard",
        responses={200: {"content": {"text/html": {}}, "description": "the dashboard page"}},
    )
    async def index() -> Response:
        return Response(
            _static("index.html"), media_type=STATIC_FILES["index.html"], headers={"cache-control": "no-cache"}
        )

    @r.get(
        "/web/{filename}",
        summary="A file of the web dashboard",
        response_class=Response,
        responses={
            200: {"content": {t.split(";")[0]: {} for t in STATIC_FILES.values()}, "description": "the file"},
            **_E404,
        },
    )
    async def web_file(filename: str) -> Response:
        if filename not in STATIC_FILES or filename == "index.html":
            raise NotFound(f"no dashboard file {filename!r}")
        return Response(_static(filename), media_type=STATIC_FILES[filename], headers={"cache-control": "no-cache"})

    # ------------------------------------------------------------------ job vertices
    async def vertex_and_metrics(
        jobid: str, vertexid: str
    ) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, float]]]:
        snap = await dispatcher.job_monitoring(parse_job_id(jobid))
        vertex = find_vertex(snap["details"], vertexid.strip().lower())
        if vertex is None:
            raise NotFound(f"Vertex {vertexid} not found in job {jobid}")
        return snap, vertex, subtask_metrics(vertex, snap["metrics"])

    @r.get(
        "/jobs/{jobid}/vertices/{vertexid}",
        summary="A job vertex with its subtasks and their metrics",
        response_model=None,
        responses=_doc(m.VertexDetails),
    )
    async def vertex_details(jobid: str, vertexid: str) -> dict[str, Any]:
        job_id = parse_job_id(jobid)
        details = await dispatcher.job_details_with_metrics(job_id)
        vertex = find_vertex(details, vertexid.strip().lower())
        if vertex is None:
            raise NotFound(f"Vertex {vertexid} not found in job {jobid}")
        return {
            "id": vertex["id"],
            "name": vertex["name"],
            "parallelism": vertex["parallelism"],
            "maxParallelism": vertex.get("maxParallelism", -1),
            "now": details["now"],
            "subtasks": vertex.get("subtasks", []),
            "metrics": vertex.get("metrics"),
        }

    @r.get(
        "/jobs/{jobid}/vertices/{vertexid}/metrics",
        response_model=None,
        responses=_doc(list[m.MetricValue]),
        summary="Task metrics of a job vertex: '<subtask>.<name>' per subtask, '<name>' for the vertex",
    )
    async def vertex_metrics(
        jobid: str, vertexid: str, get: str | None = Query(None, description="comma-separated metric ids")
    ) -> Any:
        _, _, per_subtask = await vertex_and_metrics(jobid, vertexid)
        return metric_values(vertex_metric_ids(per_subtask), parse_get(get))

    @r.get(
        "/jobs/{jobid}/vertices/{vertexid}/subtasks/metrics",
        response_model=None,
        responses=_doc(list[m.AggregatedMetric]),
        summary="Task metrics aggregated over the subtasks",
    )
    async def vertex_subtasks_metrics(
        jobid: str,
        vertexid: str,
        get: str | None = Query(None, description="comma-separated metric names"),
        agg: str | None = Query(None, description="comma-separated: min, max, sum, avg, skew"),
        subtasks: str | None = Query(None, description="subtask indices and ranges, e.g. 0,2-3"),
    ) -> Any:
        _, vertex, per_subtask = await vertex_and_metrics(jobid, vertexid)
        aggs = _query(parse_aggs, agg)
        chosen = _query(parse_subtasks, subtasks, int(vertex["parallelism"]))
        return aggregate_values([per_subtask[i] for i in chosen if per_subtask[i]], parse_get(get), aggs)

    @r.get(
        "/jobs/{jobid}/vertices/{vertexid}/subtasks/{subtaskindex}/metrics",
        response_model=None,
        responses=_doc(list[m.MetricValue]),
        summary="Task metrics of one subtask",
    )
    async def subtask_metrics_route(
        jobid: str,
        vertexid: str,
        subtaskindex: int,
        get: str | None = Query(None, description="comma-separated metric names"),
    ) -> Any:
        _, _, per_subtask = await vertex_and_metrics(jobid, vertexid)
        if not 0 <= subtaskindex < len(per_subtask):
            raise NotFound(f"subtask {subtaskindex} does not exist (parallelism {len(per_subtask)})")
        return metric_values(per_subtask[subtaskindex], parse_get(get))

    @r.get(
        "/jobs/{jobid}/vertices/{vertexid}/backpressure",
        response_model=None,
        responses=_doc(m.JobVertexBackPressure),
        summary="Backpressure of a job vertex's subtasks",
    )
    async def backpressure(jobid: str, vertexid: str) -> dict[str, Any]:
        _, vertex, per_subtask = await vertex_and_metrics(jobid, vertexid)
        return backpressure_json(vertex, per_subtask, int(time.time() * 1000))

    # ------------------------------------------------------------------ jobs
    @r.get(
        "/jobs/{jobid}/metrics",
        response_model=None,
        responses=_doc(list[m.MetricValue]),
        summary="Job metrics: uptime, numRestarts, checkpoint counts, sizes and durations",
    )
    async def job_metrics_route(jobid: str, get: str | None = Query(None)) -> Any:
        snap = await dispatcher.job_monitoring(parse_job_id(jobid))
        return metric_values(job_metrics(snap["details"], snap["checkpoints"], snap["num_restarts"]), parse_get(get))

    @r.get(
        "/jobs/{jobid}/checkpoints",
        response_model=None,
        responses=_doc(m.CheckpointingStatistics),
        summary="Checkpoint statistics and history of a job",
    )
    async def checkpoints(jobid: str) -> dict[str, Any]:
        snap = await dispatcher.job_monitoring(parse_job_id(jobid))
        return public_stats(snap["checkpoints"])

    @r.get(
        "/jobs/{jobid}/checkpoints/details/{checkpointid}",
        response_model=None,
        responses=_doc(m.CheckpointDetails),
        summary="One checkpoint of the history, with its vertices",
    )
    async def checkpoint_details_route(jobid: str, checkpointid: int) -> dict[str, Any]:
        snap = await dispatcher.job_monitoring(parse_job_id(jobid))
        details = checkpoint_details(snap["checkpoints"], checkpointid)
        if details is None:
            raise NotFound(f"checkpoint {checkpointid} is not in the job's checkpoint history")
        return details

    @r.get(
        "/jobs/{jobid}/checkpoints/details/{checkpointid}/subtasks/{vertexid}",
        response_model=None,
        responses=_doc(m.TaskCheckpointDetails),
        summary="One checkpoint of one vertex, subtask by subtask",
    )
    async def task_checkpoint_details_route(jobid: str, checkpointid: int, vertexid: str) -> dict[str, Any]:
        snap = await dispatcher.job_monitoring(parse_job_id(jobid))
        details = task_checkpoint_details(snap["checkpoints"], checkpointid, vertexid)
        if details is None:
            raise NotFound(f"no checkpoint {checkpointid} of vertex {vertexid!r} in the job's checkpoint history")
        return details

    @r.get("/jobs/{jobid}/config", response_model=None, responses=_doc(m.JobConfig), summary="Configuration of a job")
    async def job_config(jobid: str) -> dict[str, Any]:
        return dict(dispatcher.entry(parse_job_id(jobid)).job_config)

    # ------------------------------------------------------------------ master
    @r.get(
        "/jobmanager/metrics",
        response_model=None,
        responses=_doc(list[m.MetricValue]),
        summary="Metrics of the master process and the cluster",
    )
    async def jobmanager_metrics(get: str | None = Query(None)) -> Any:
        values = process_metrics().snapshot()
        cluster = await dispatcher.resource_manager_gateway.request_resource_overview()
        values.update(
            {
                n.NUM_REGISTERED_TASK_MANAGERS: float(cluster.number_task_managers),
                n.TASK_SLOTS_TOTAL: float(cluster.number_registered_slots),
                n.TASK_SLOTS_AVAILABLE: float(cluster.number_free_slots),
                n.NUM_RUNNING_JOBS: float(sum(1 for e in dispatcher.jobs.values() if e.archive is None)),
            }
        )
        return metric_values(values, parse_get(get))

    @r.get("/jobmanager/logs", response_model=None, responses=_doc(m.LogList), summary="The master's log files")
    async def jobmanager_logs() -> dict[str, Any]:
        return {"logs": [{"name": f.name, "size": f.size, "mtime": f.mtime_ms} for f in logfiles.log_files()]}

    def master_log(name: str | None) -> PlainTextResponse:
        got = logfiles.read_log(name, LOG_MAX_BYTES) if name else None
        if got is None:
            raise NotFound(f"the master has no log file {name!r}" if name else "the master writes no such file")
        return _text(*got)

    @r.get(
        "/jobmanager/logs/{filename}",
        response_class=PlainTextResponse,
        responses={200: _TEXT, **_E404},
        summary="A log file of the master",
    )
    async def jobmanager_log_file(filename: str) -> PlainTextResponse:
        return master_log(filename)

    @r.get(
        "/jobmanager/log", response_class=PlainTextResponse, responses={200: _TEXT, **_E404}, summary="The master's log"
    )
    async def jobmanager_log() -> PlainTextResponse:
        return master_log(logfiles.main_log_name())

    @r.get(
        "/jobmanager/stdout",
        response_class=PlainTextResponse,
        responses={200: _TEXT, **_E404},
        summary="The master's stdout/stderr file",
    )
    async def jobmanager_stdout() -> PlainTextResponse:
        return master_log(logfiles.stdout_name())

    # ------------------------------------------------------------------ TaskExecutors
    async def tm_info(tm_id: str, **kw: Any) -> tuple[TaskManagerInfo, Any]:
        try:
            tm = await fetcher.find_task_manager(tm_id)
        except UnknownTaskManager:
            raise NotFound(f"TaskManager {tm_id} not found") from None
        try:
            return tm, await fetcher.request_info(tm.rpc_address, **kw)
        except RpcException as e:
            raise RestError(503, f"TaskManager {tm_id} did not answer: {e}") from None

    _E503: Responses = {503: {"model": m.ErrorResponse, "description": "the TaskExecutor did not answer"}}

    @r.get(
        "/taskmanagers/{taskmanagerid}",
        response_model=None,
        responses={**_doc(m.TaskManagerDetails), **_E503},
        summary="A TaskExecutor: its slots with the tasks in them, memory, CPU, log files",
    )
    async def taskmanager(taskmanagerid: str) -> dict[str, Any]:
        tm, info = await tm_info(taskmanagerid, include_metrics=True)
        return taskmanager_details(tm, info)

    @r.get(
        "/taskmanagers/{taskmanagerid}/metrics",
        response_model=None,
        responses=_doc(list[m.MetricValue]),
        summary="Metrics of a TaskExecutor process (Status.*)",
    )
    async def taskmanager_metrics(taskmanagerid: str, get: str | None = Query(None)) -> Any:
        try:
            await fetcher.find_task_manager(taskmanagerid)
        except UnknownTaskManager:
            raise NotFound(f"TaskManager {taskmanagerid} not found") from None
        await fetcher.update()
        known = dispatcher.metric_store.task_managers.get(taskmanagerid)
        return metric_values(dict(known.metrics) if known else {}, parse_get(get))

    @r.get(
        "/taskmanagers/{taskmanagerid}/logs",
        response_model=None,
        responses={**_doc(m.LogList), **_E503},
        summary="The log files of a TaskExecutor",
    )
    async def taskmanager_logs(taskmanagerid: str) -> dict[str, Any]:
        _, info = await tm_info(taskmanagerid)
        return {"logs": [{"name": f.name, "size": f.size, "mtime": f.mtime_ms} for f in info.log_files]}

    async def tm_log(tm_id: str, pick: Any) -> PlainTextResponse:
        _, info = await tm_info(tm_id)
        name = pick([f.name for f in info.log_files])
        if name is None:
            raise NotFound(f"TaskManager {tm_id} has no such log file")
        _, info = await tm_info(tm_id, log_name=name, log_max_bytes=LOG_MAX_BYTES)
        return _text(info.log_content, info.log_truncated)

    @r.get(
        "/taskmanagers/{taskmanagerid}/logs/{filename}",
        response_class=PlainTextResponse,
        responses={200: _TEXT, **_E404, **_E503},
        summary="A log file of a TaskExecutor",
    )
    async def taskmanager_log_file(taskmanagerid: str, filename: str) -> PlainTextResponse:
        return await tm_log(taskmanagerid, lambda names: filename if filename in names else None)

    @r.get(
        "/taskmanagers/{taskmanagerid}/log",
        response_class=PlainTextResponse,
        responses={200: _TEXT, **_E404, **_E503},
        summary="The log of a TaskExecutor",
    )
    async def taskmanager_log(taskmanagerid: str) -> PlainTextResponse:
        return await tm_log(taskmanagerid, lambda names: next((x for x in names if not x.endswith(".out")), None))

    @r.get(
        "/taskmanagers/{taskmanagerid}/stdout",
        response_class=PlainTextResponse,
        responses={200: _TEXT, **_E404, **_E503},
        summary="The stdout/stderr file of a TaskExecutor",
    )
    async def taskmanager_stdout(taskmanagerid: str) -> PlainTextResponse:
        return await tm_log(taskmanagerid, lambda names: next((x for x in names if x.endswith(".out")), None))

    return r
