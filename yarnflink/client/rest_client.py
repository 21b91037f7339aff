"""A small client of the Dispatcher's REST API, used by the CLI and the job executor.

It finds the cluster's token (and the CA of its HTTPS certificate) by the cluster's URL, see
``yarnflink.security.client``, so callers pass only the URL. For a cluster with ZooKeeper HA it
also finds how to reach the leading master (``yarnflink.client.leader``): a request that finds
the master gone or a standby (503) is sent again to the leader ZooKeeper names, until
``rest.await-leader-timeout``.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import time
from typing import Any

import httpx

from yarnflink.client.leader import resolver_for
from yarnflink.client.sessions import session_credentials
from yarnflink.security.client import RestCredentials, from_environment, process_default, register, registered

TERMINAL_STATES = ("FINISHED", "FAILED", "CANCELED")

log = logging.getLogger(__name__)

#: Set to 1 to see every request of the REST clients (httpx's ``HTTP Request: GET ...`` lines).
HTTP_LOG_ENV = "YARNFLINK_HTTP_LOG"


def quiet_http_logging() -> None:
    """httpx logs every request at INFO: a job program calling ``logging.basicConfig(level=INFO)``
    would see its console flooded by the executor's polling. Those lines are shown only at
    WARNING and above, unless ``YARNFLINK_HTTP_LOG`` is set to 1 (or the program sets the
    ``httpx`` logger's level itself, after this module is imported)."""
    if os.environ.get(HTTP_LOG_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        return
    logger = logging.getLogger("httpx")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)


quiet_http_logging()


class RestClientError(Exception):
    """The REST API answered with an error, or could not be reached; the message says which."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def find_credentials(url: str) -> RestCredentials:
    """The credentials for the cluster at ``url``: one this process started, a local session,
    the environment, or (in a master process) its own cluster's; empty if none is known."""
    return registered(url) or session_credentials(url) or from_environment() or process_default() or RestCredentials()


class RestClient:
    def __init__(
        self,
        base_url: str,
        timeout: float = 30.0,
        *,
        credentials: RestCredentials | None = None,
        leader_resolver: Any = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        if leader_resolver is None:
            leader_resolver = resolver_for(self.base_url)
        #: HA: a RestLeaderResolver (yarnflink.client.leader); None for a cluster without HA
        self.leader_resolver = leader_resolver
        #: whether the last request was sent more than once (a POST may have been applied before)
        self.last_request_retried = False
        #: job ids whose submission failed without a clear answer (it may have been applied)
        self._maybe_submitted: set[str] = set()
        creds = credentials if credentials is not None else find_credentials(self.base_url)
        self._credentials = creds
        token = creds.token
        #: The Authorization header this client sends (for callers that use httpx directly).
        self.headers = {"authorization": f"Bearer {token}"} if token else {}
        verify: Any = True
        if creds.ca_file and self.base_url.startswith("https:"):
            verify = ssl.create_default_context(cafile=creds.ca_file)
        self._http = httpx.Client(
            base_url=self.base_url, timeout=timeout, trust_env=False, headers=self.headers, verify=verify
        )

    def close(self) -> None:
        self._http.close()
        if self.leader_resolver is not None:
            self.leader_resolver.close()

    def __enter__(self) -> RestClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; with HA, sent again (to the leader ZooKeeper names) while the master is
        gone or answers 503, until ``rest.await-leader-timeout``."""
        self.last_request_retried = False
        deadline: float | None = None
        delay = 0.05
        while True:
            try:
                resp = self._http.request(method, path, **kwargs)
                if resp.status_code != 503 or self.leader_resolver is None:
                    return resp
                problem = f"{self.base_url} is not the leading master (503)"
            except httpx.HTTPError as e:
                if self.leader_resolver is None or isinstance(e, httpx.ReadTimeout) and method != "GET":
                    raise RestClientError(f"cannot reach the cluster at {self.base_url}: {e}") from None
                problem = f"cannot reach the cluster at {self.base_url}: {e}"
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.leader_resolver.await_leader_timeout_s
                log.info("%s; looking for the leader in ZooKeeper", problem)
            if now >= deadline:
                raise RestClientError(
                    f"{problem}; no leading master answered within {self.leader_resolver.await_leader_timeout_s:.0f}s"
                ) from None
            try:
                leader = self.leader_resolver.current()
            except Exception as e:  # noqa: BLE001 - ZooKeeper unreachable: keep trying until the deadline
                log.info("cannot ask ZooKeeper for the leader: %s", e)
                leader = None
            ended = getattr(self.leader_resolver, "ended", "")  # a YARN application that ended: no leader comes
            if ended:
                raise RestClientError(f"{problem}; {ended}") from None
            if leader and leader.rstrip("/") != self.base_url:
                log.info("the leading master's REST endpoint is now %s", leader)
                self.base_url = leader.rstrip("/")
                self._remember(self.base_url)
                self._http.base_url = httpx.URL(self.base_url)
            time.sleep(min(delay, max(0.0, deadline - now)))
            delay = min(delay * 2, 0.5)
            self.last_request_retried = True

    def _remember(self, url: str) -> None:
        """Later clients of this process find the new leader's credentials and HA by its URL."""
        register(url, self._credentials)
        self.leader_resolver.remember(url)

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        resp = self._send(method, path, **kwargs)
        if resp.status_code == 401:
            raise RestClientError(
                f"the cluster at {self.base_url} refused the request: it needs its REST token "
                f"({'the token sent is not valid' if self.headers else 'none is known for this address'}; "
                f"set YARNFLINK_REST_TOKEN_FILE to the cluster's security/rest-token file)",
                401,
            )
        if resp.status_code >= 400:
            try:
                errors = resp.json().get("errors") or [resp.text]
            except (ValueError, AttributeError):
                errors = [resp.text]
            raise RestClientError("; ".join(str(e) for e in errors), resp.status_code)
        return resp.json() if resp.content else {}

    def submit_job(self, job_graph_json: dict[str, Any]) -> str:
        """Submits a JobGraph; idempotent for this client: the job id is in the JobGraph, so a
        409 ("already submitted") for a JobGraph whose earlier sending may have been applied (a
        failover in between, a 5xx or no answer) means it was accepted."""
        job_id = str(job_graph_json["jobId"])
        body = json.dumps(job_graph_json).encode()
        try:
            self._request("POST", "/jobs", content=body, headers={"content-type": "application/json"})
        except RestClientError as e:
            if e.status == 409 and (self.last_request_retried or job_id in self._maybe_submitted):
                pass  # sent again after a failover or a failed attempt: that attempt was applied
            else:
                if e.status is None or e.status >= 500:
                    self._maybe_submitted.add(job_id)  # it may have been applied before it failed
                raise
        self._maybe_submitted.discard(job_id)
        return job_id

    def job(self, job_id: str) -> dict[str, Any]:
        return self._request("GET", f"/jobs/{job_id}")  # type: ignore[no-any-return]

    def jobs_overview(self) -> list[dict[str, Any]]:
        return self._request("GET", "/jobs/overview")["jobs"]  # type: ignore[no-any-return]

    def exceptions(self, job_id: str) -> dict[str, Any]:
        return self._request("GET", f"/jobs/{job_id}/exceptions")  # type: ignore[no-any-return]

    def execution_result(self, job_id: str) -> dict[str, Any]:
        return self._request("GET", f"/jobs/{job_id}/execution-result")  # type: ignore[no-any-return]

    def collected(self, job_id: str, offset: int) -> dict[str, Any]:
        """``execute_and_collect()`` results after ``offset``: payloads, next offset, stale, done."""
        return self._request("GET", f"/jobs/{job_id}/collect", params={"offset": offset})  # type: ignore[no-any-return]

    def cancel(self, job_id: str) -> None:
        self._request("PATCH", f"/jobs/{job_id}", params={"mode": "cancel"})

    def trigger_savepoint(
        self, job_id: str, target_directory: str | None = None, *, stop: bool = False, drain: bool = False
    ) -> str:
        """``POST /jobs/:id/savepoints`` (``stop``: ``POST /jobs/:id/stop``); the trigger id."""
        if stop:
            body: dict[str, Any] = {"drain": drain}
            if target_directory:
                body["targetDirectory"] = target_directory
            return str(self._request("POST", f"/jobs/{job_id}/stop", json=body)["request-id"])
        body = {"cancel-job": False}
        if target_directory:
            body["target-directory"] = target_directory
        return str(self._request("POST", f"/jobs/{job_id}/savepoints", json=body)["request-id"])

    def savepoint_status(self, job_id: str, trigger_id: str) -> dict[str, Any]:
        return self._request("GET", f"/jobs/{job_id}/savepoints/{trigger_id}")  # type: ignore[no-any-return]

    def wait_for_savepoint(self, job_id: str, trigger_id: str, timeout: float = 600.0) -> str:
        """The savepoint's location once it completed; RestClientError with the cause if it failed
        or did not complete within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            status = self.savepoint_status(job_id, trigger_id)
            if status.get("status", {}).get("id") == "COMPLETED":
                op = status.get("operation") or {}
                if op.get("location"):
                    return str(op["location"])
                cause = (op.get("failure-cause") or {}).get("stack-trace") or "unknown cause"
                raise RestClientError(f"the savepoint of job {job_id} failed: {cause}")
            if time.monotonic() > deadline:
                raise RestClientError(
                    f"the savepoint of job {job_id} did not complete within {timeout:.0f} s "
                    f"(trigger {trigger_id}; it may still complete)"
                )
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def overview(self) -> dict[str, Any]:
        return self._request("GET", "/overview")  # type: ignore[no-any-return]

    def taskmanagers(self) -> list[dict[str, Any]]:
        return self._request("GET", "/taskmanagers")["taskmanagers"]  # type: ignore[no-any-return]

    def shutdown(self) -> None:
        self._request("DELETE", "/cluster")

    def get_json(self, path: str, **params: Any) -> Any:
        """GET any JSON resource (metrics, checkpoints, ...)."""
        return self._request("GET", path, params=params or None)

    def get_text(self, path: str) -> str:
        """GET a text resource (a log file)."""
        resp = self._send("GET", path)
        if resp.status_code >= 400:
            try:
                errors = resp.json().get("errors") or [resp.text]
            except (ValueError, AttributeError):
                errors = [resp.text]
            raise RestClientError("; ".join(str(e) for e in errors), resp.status_code)
        return resp.text
