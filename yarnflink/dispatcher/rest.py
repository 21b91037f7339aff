"""The Dispatcher's REST API with Flink's paths and JSON shapes, served by uvicorn on the
Dispatcher's own loop (so handlers touch Dispatcher state directly). Errors are
``{"errors": [message]}`` as in Flink. The OpenAPI description is at ``/openapi.json``.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import uvicorn
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from yarnflink.dispatcher import rest_models as m
from yarnflink.dispatcher.errors import DuplicateJobSubmission, UnknownJob
from yarnflink.dispatcher.leadership import NotLeader
from yarnflink.dispatcher.limits import JobGraphTooLarge, check_job_graph_size
from yarnflink.dispatcher.options import RestOptions, WebOptions
from yarnflink.dispatcher.rest_errors import NotFound, RestError, parse_job_id
from yarnflink.dispatcher.rest_monitoring import monitoring_router
from yarnflink.dispatcher.rest_openapi import doc, install_openapi_fixups
from yarnflink.dispatcher.views import task_manager_json
from yarnflink.highavailability.errors import LeadershipLostError
from yarnflink.jobgraph.jobgraph import JobGraph, JobGraphError
from yarnflink.jobmaster.submission import JobSubmissionException
from yarnflink.metrics.prometheus import active_reporter_address
from yarnflink.security.rest import install_rest_security, uvicorn_ssl_options
from yarnflink.version import __version__

if TYPE_CHECKING:
    from yarnflink.dispatcher.dispatcher import Dispatcher

log = logging.getLogger(__name__)

JOB_ID_PATTERN = "^[0-9a-f]{32}$"
#: the fields of a ``POST /jobs/:id/stop`` body (``target-directory`` is accepted as in /savepoints)
STOP_FIELDS = frozenset({"targetDirectory", "target-directory", "drain"})


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"errors": [message]}, status_code=status)


def _plain_json(handler: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """For the endpoints a dashboard polls, whose bodies are plain JSON values already: answers
    with a ``JSONResponse``, so FastAPI skips ``jsonable_encoder``'s walk over every value (a third
    of the master's CPU under 200 polling clients, see benchmarks/rest_load.py)."""

    @functools.wraps(handler)
    async def answer(*args: Any, **kwargs: Any) -> Any:
        body = await handler(*args, **kwargs)
        return body if isinstance(body, Response) else JSONResponse(body)

    return answer


def create_app(dispatcher: Dispatcher) -> FastAPI:
    app = FastAPI(
        title="yarnflink REST API",
        version=__version__,
        description="Flink's REST API paths and shapes, served by the yarnflink Dispatcher.",
    )
    max_body = int(dispatcher.config.get(RestOptions.SERVER_MAX_CONTENT_LENGTH))

    @app.middleware("http")
    async def _leader_only(request: Request, call_next: Any) -> Any:
        """HA: a master that does not lead (or is still recovering) answers the job endpoints
        with 503 naming the leader's REST URL (added before the security middleware, which thus
        runs first)."""
        if not dispatcher.is_leader and request.url.path.startswith("/jobs"):
            return _not_leader(dispatcher)
        return await call_next(request)

    install_rest_security(app, dispatcher.config)  # token auth, /health, /login, body limits

    @app.exception_handler(RestError)
    async def _rest_error(_: Request, e: RestError) -> JSONResponse:
        return _error(e.status, e.message)

    @app.exception_handler(UnknownJob)
    async def _unknown_job(_: Request, e: UnknownJob) -> JSONResponse:
        return _error(404, f"Job {e.args[0]} not found")

    @app.exception_handler(NotFound)
    async def _not_found(_: Request, e: NotFound) -> JSONResponse:
        return _error(404, str(e))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, e: StarletteHTTPException) -> JSONResponse:
        return _error(e.status_code, str(e.detail))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, e: RequestValidationError) -> JSONResponse:
        msgs = [f"{'.'.join(str(p) for p in err.get('loc', ()))}: {err.get('msg')}" for err in e.errors()]
        return JSONResponse({"errors": msgs or ["bad request"]}, status_code=400)

    @app.exception_handler(NotLeader)
    @app.exception_handler(LeadershipLostError)
    async def _leadership_lost(_: Request, e: Exception) -> JSONResponse:
        # e.g. a leader resuming from a freeze handles requests before it learns it was deposed:
        # its fenced writes fail and nothing of the request stays; the client asks the leader
        log.info("REST request refused, this master does not lead: %s", e)
        return _not_leader(dispatcher)

    @app.exception_handler(Exception)
    async def _internal(_: Request, e: Exception) -> JSONResponse:
        if _lost_leadership(e):  # wrapped (an ExceptionGroup, a chained cause): still a 503
            log.info("REST request refused, this master does not lead: %s", e)
            return _not_leader(dispatcher)
        log.exception("REST handler failed")
        return _error(500, f"Internal server error: {type(e).__name__}: {e}")

    # ------------------------------------------------------------------ cluster
    @app.get("/config", summary="Dashboard configuration", response_model=None, responses=doc(m.DashboardConfiguration))
    async def config() -> dict[str, Any]:
        refresh = dispatcher.config.get_seconds(WebOptions.REFRESH_INTERVAL) or 3.0
        prom = active_reporter_address()
        return {
            "refresh-interval": int(refresh * 1000),
            "timezone-name": "UTC",
            "timezone-offset": 0,
            "flink-version": __version__,
            "flink-revision": "yarnflink",
            "features": {
                "web-submit": False,
                "web-cancel": bool(dispatcher.config.get(WebOptions.CANCEL_ENABLE)),
                "web-history": False,
            },
            "metric-reporters": {"prom": prom} if prom else {},
        }

    @app.get(
        "/jobmanager/config",
        summary="The master's configuration as key/value pairs",
        response_model=None,
        responses=doc(list[m.ConfigEntry]),
    )
    async def jobmanager_config() -> list[dict[str, str]]:
        return [{"key": k, "value": v} for k, v in sorted(dispatcher.config.to_dict().items())]

    @app.get("/overview", summary="Cluster overview", response_model=None, responses=doc(m.ClusterOverview))
    @_plain_json
    async def overview() -> dict[str, Any]:
        resources = await dispatcher.resource_manager_gateway.request_resource_overview()
        states = [o["state"] for o in await dispatcher.overviews()]
        return {
            "taskmanagers": resources.number_task_managers,
            "slots-total": resources.number_registered_slots,
            "slots-available": resources.number_free_slots,
            "jobs-running": sum(s not in ("FINISHED", "CANCELED", "FAILED") for s in states),
            "jobs-finished": states.count("FINISHED"),
            "jobs-cancelled": states.count("CANCELED"),
            "jobs-failed": states.count("FAILED"),
            "flink-version": __version__,
            "flink-commit": "yarnflink",
        }

    @app.get(
        "/taskmanagers",
        summary="All registered TaskExecutors and their slots",
        response_model=None,
        responses=doc(m.TaskManagersList),
    )
    async def taskmanagers() -> dict[str, Any]:
        infos = await dispatcher.resource_manager_gateway.request_task_manager_info()
        return {"taskmanagers": [task_manager_json(tm) for tm in infos]}

    @app.delete("/cluster", summary="Shut the cluster down", response_model=None, responses=doc(m.Empty))
    async def shutdown() -> dict[str, Any]:
        asyncio.get_running_loop().call_later(0.2, dispatcher.on_shutdown_request)
        return {}

    # ------------------------------------------------------------------ jobs
    @app.post(
        "/jobs",
        status_code=202,
        summary="Submit a JobGraph (JSON body)",
        response_model=None,
        responses=doc(m.SubmitResponse, 202, conflict=True),
        openapi_extra={
            "requestBody": {"required": True, "content": {"application/json": {"schema": m.JOB_GRAPH_SCHEMA}}}
        },
    )
    async def submit(request: Request) -> dict[str, Any]:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_body:
            raise RestError(
                413, f"request body of {declared} bytes exceeds rest.server.max-content-length ({max_body})"
            )
        body = bytearray()
        async for chunk in request.stream():
            body.extend(chunk)
            if len(body) > max_body:
                raise RestError(413, f"request body exceeds rest.server.max-content-length ({max_body} bytes)")
        try:
            data = json.loads(bytes(body))
        except (ValueError, UnicodeDecodeError, RecursionError) as e:  # RecursionError: nesting too deep
            raise RestError(400, f"request body is not JSON: {e}") from None
        if isinstance(data, dict) and "jobGraph" in data:
            data = data["jobGraph"]
        try:
            graph = JobGraph.from_json(data)
            check_job_graph_size(graph)
        except JobGraphTooLarge as e:
            raise RestError(413, f"JobGraph too large: {e}") from None
        except JobGraphError as e:
            raise RestError(400, f"invalid JobGraph: {e}") from None
        try:
            await dispatcher.submit_job(graph)
        except DuplicateJobSubmission as e:
            raise RestError(409, str(e)) from None
        except NotLeader:
            return _not_leader(dispatcher)  # type: ignore[return-value]
        except JobSubmissionException as e:  # e.g. failover-strategy 'individual' for a job with exchanges
            raise RestError(400, f"job not accepted: {e}") from None
        return {"jobUrl": f"/jobs/{graph.job_id}"}

    @app.get("/jobs", summary="Job ids and states", response_model=None, responses=doc(m.JobIdsWithStatus))
    @_plain_json
    async def jobs() -> dict[str, Any]:
        return {"jobs": [{"id": o["jid"], "status": o["state"]} for o in await dispatcher.overviews()]}

    @app.get("/jobs/overview", summary="Overview of all jobs", response_model=None, responses=doc(m.JobsOverview))
    @_plain_json
    async def jobs_overview() -> dict[str, Any]:
        return {"jobs": await dispatcher.overviews()}

    @app.get(
        "/jobs/{jobid}",
        summary="Details of a job: vertices with state, parallelism and metrics, and its plan",
        response_model=None,
        responses=doc(m.JobDetails),
    )
    @_plain_json
    async def job(jobid: str) -> dict[str, Any]:
        return await dispatcher.job_details_with_metrics(parse_job_id(jobid))

    @app.patch(
        "/jobs/{jobid}",
        status_code=202,
        summary="Cancel a job (mode=cancel)",
        response_model=None,
        responses=doc(m.Empty, 202, conflict=True),
    )
    async def cancel(jobid: str, mode: str | None = Query(default="cancel")) -> dict[str, Any]:
        if mode not in ("cancel", None):
            raise RestError(400, f"unsupported mode {mode!r}; supported: cancel")
        job_id = parse_job_id(jobid)
        if not await dispatcher.cancel_job(job_id):
            details = await dispatcher.job_details(job_id)
            if details["state"] in ("FINISHED", "FAILED", "CANCELED"):
                raise RestError(409, f"Job {job_id} is already {details['state']}")
        return {}

    @app.get(
        "/jobs/{jobid}/exceptions",
        summary="Exception history of a job",
        response_model=None,
        responses=doc(m.JobExceptions),
    )
    async def exceptions(jobid: str) -> dict[str, Any]:
        return await dispatcher.job_exceptions(parse_job_id(jobid))

    async def _json_body(request: Request) -> dict[str, Any]:
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            raise RestError(400, "the body is not JSON") from None
        if not isinstance(body, dict):
            raise RestError(400, "the body must be a JSON object")
        return body

    def _target(body: dict[str, Any], *keys: str) -> str | None:
        for key in keys:
            value = body.get(key)
            if value is not None:
                if not isinstance(value, str) or not value.strip():
                    raise RestError(400, f"{key} must be a non-empty string (a directory path or URL)")
                value = value.strip()
                if "://" not in value and not value.startswith("/"):
                    raise RestError(400, f"{key} {value!r} must be an absolute path or a URL (file://, s3://, hdfs://)")
                return value
        return None

    @app.post(
        "/jobs/{jobid}/savepoints",
        summary="Trigger a savepoint ({'request-id'})",
        response_model=None,
        responses=doc(m.Empty, conflict=True),
    )
    async def trigger_savepoint(jobid: str, request: Request) -> dict[str, Any]:
        body = await _json_body(request)
        target = _target(body, "target-directory")
        cancel_job = body.get("cancel-job", False)
        if not isinstance(cancel_job, bool):
            raise RestError(400, "cancel-job must be true or false")
        trigger_id = await dispatcher.trigger_savepoint(parse_job_id(jobid), target, cancel_job=cancel_job)
        if trigger_id is None:
            raise RestError(409, f"Job {jobid} is not running with checkpointing enabled")
        return {"request-id": trigger_id}

    @app.post(
        "/jobs/{jobid}/stop",
        summary="Stop a job with a savepoint ({'request-id'})",
        response_model=None,
        responses=doc(m.Empty, conflict=True),
    )
    async def stop_with_savepoint(jobid: str, request: Request) -> dict[str, Any]:
        """Stop-with-savepoint (FLIP-34): a synchronous savepoint, then the job ends FINISHED;
        ``drain``: MAX_WATERMARK first (all event-time timers and windows fire into it). The
        result (``GET /jobs/:id/savepoints/:triggerid``) is known once the job ended, or failed
        (the job keeps running)."""
        body = await _json_body(request)
        unknown = sorted(set(body) - STOP_FIELDS)
        if unknown:
            raise RestError(
                400,
                f"unknown field(s) {', '.join(unknown)} in the stop request; "
                f"accepted: targetDirectory (a directory path or URL), drain (true or false)",
            )
        target = _target(body, "targetDirectory", "target-directory")
        drain = body.get("drain", False)
        if not isinstance(drain, bool):
            raise RestError(400, f"drain must be true or false, got {drain!r}")
        trigger_id = await dispatcher.trigger_savepoint(parse_job_id(jobid), target, stop=True, drain=drain)
        if trigger_id is None:
            raise RestError(409, f"Job {jobid} is not running with checkpointing enabled")
        return {"request-id": trigger_id}

    @app.get(
        "/jobs/{jobid}/savepoints/{triggerid}",
        summary="Status of a savepoint",
        response_model=None,
        responses=doc(m.Empty),
    )
    async def savepoint_status(jobid: str, triggerid: str) -> dict[str, Any]:
        status = await dispatcher.savepoint_status(parse_job_id(jobid), triggerid)
        if status is None:
            raise RestError(404, f"no savepoint {triggerid} of job {jobid}")
        return status

    @app.get(
        "/jobs/{jobid}/execution-result",
        summary="Result of a job once it has ended",
        response_model=None,
        responses=doc(m.JobExecutionResult),
    )
    async def execution_result(jobid: str) -> dict[str, Any]:
        job_id = parse_job_id(jobid)
        entry = dispatcher.entry(job_id)
        if entry.archive is None:
            return {"status": {"id": "IN_PROGRESS"}}
        details = entry.archive["details"]
        state = details["state"]
        exc = entry.archive["exceptions"]
        return {
            "status": {"id": "COMPLETED"},
            "job-execution-result": {
                "id": job_id,
                "application-status": {"FINISHED": "SUCCEEDED"}.get(state, state),
                "net-runtime": details["duration"],
                "accumulator-results": {
                    "collect": [base64.b64encode(p).decode("ascii") for p in entry.archive["collected"]],
                },
                "failure-cause": (
                    {
                        "class": exc["exceptionHistory"]["entries"][0]["exceptionName"],  # newest first
                        "stack-trace": exc["root-exception"],
                        "serialized-throwable": "",
                    }
                    if state == "FAILED" and exc["root-exception"]
                    else None
                ),
            },
        }

    @app.get(
        "/jobs/{jobid}/collect",
        summary="execute_and_collect() results of a running or ended job, after an offset",
        response_model=None,
        responses=doc(m.CollectedResults),
    )
    async def collect(jobid: str, offset: int = Query(default=0)) -> dict[str, Any]:
        job_id = parse_job_id(jobid)
        try:
            got, ended = await dispatcher.job_collected(job_id, offset)
        except ValueError as e:
            raise RestError(400, str(e)) from None
        return {
            "payloads": [base64.b64encode(p).decode("ascii") for p in got.payloads],
            "offset": got.offset,
            "stale": got.stale,
            "done": ended,
        }

    @app.get(
        "/jobs/{jobid}/plan",
        summary="The JobGraph of a job: vertices with their inputs",
        response_model=None,
        responses=doc(m.JobPlan),
    )
    async def plan(jobid: str) -> dict[str, Any]:
        return {"plan": dispatcher.entry(parse_job_id(jobid)).plan}

    app.include_router(monitoring_router(dispatcher))  # dashboard, metrics, logs
    install_openapi_fixups(app)

    return app


def _not_leader(dispatcher: Dispatcher) -> JSONResponse:
    """503 naming the leader's REST URL as leader retrieval knows it, never this master's own:
    a deposed leader may answer before its own, now stale, publication is replaced."""
    url = dispatcher.leadership.leader_rest_url if dispatcher.leadership is not None else None
    if url is not None and url.rstrip("/") == dispatcher.rest_url.rstrip("/"):
        url = None
    return JSONResponse({"errors": [str(NotLeader(url))], "leader": url}, status_code=503)


def _lost_leadership(error: BaseException) -> bool:
    """Whether ``error`` is, wraps or was caused by a fenced action of a master that no longer leads."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        e = pending.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, (LeadershipLostError, NotLeader)):
            return True
        pending += [c for c in (e.__cause__, e.__context__) if c is not None]
        if isinstance(e, BaseExceptionGroup):
            pending += list(e.exceptions)
    return False


async def start_rest_server(
    dispatcher: Dispatcher, host: str, port: int
) -> tuple[uvicorn.Server, asyncio.Task[Any], int]:
    """Binds the socket first (so port 0 works and errors surface here), then serves it."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise OSError(f"REST endpoint cannot bind {host}:{port}: {e.strerror}") from e
    sock.listen(2048)  # uvicorn's own default: many clients connecting at once are queued, not reset
    sock.setblocking(False)
    config = uvicorn.Config(
        create_app(dispatcher),
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=2,
        **uvicorn_ssl_options(dispatcher.config),
    )
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    return server, task, sock.getsockname()[1]
