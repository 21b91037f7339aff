"""A small client of the Dispatcher's REST API, used by the CLI and the job executor.

It finds the cluster's token (and the CA of its HTTPS certificate) by the cluster's URL, see
``yarnflink.security.client``, so callers pass only the URL.
"""

from __future__ import annotations

import json
import ssl
from typing import Any, Optional

import httpx

from yarnflink.security.client import RestCredentials, from_environment, process_default, registered

TERMINAL_STATES = ("FINISHED", "FAILED", "CANCELED")


class RestClientError(Exception):
    """The REST API answered with an error, or could not be reached; the message says which."""

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        self.status = status


def find_credentials(url: str) -> RestCredentials:
    """The credentials for the cluster at ``url``: one this process started, a local session,
    the environment, or (in a master process) its own cluster's; empty if none is known."""
    from yarnflink.deployment.local.cluster import session_credentials

    return (registered(url) or session_credentials(url) or from_environment() or process_default()
            or RestCredentials())


class RestClient:
    def __init__(self, base_url: str, timeout: float = 30.0, *,
                 credentials: Optional[RestCredentials] = None) -> None:
        self.base_url = base_url.rstrip("/")
        creds = credentials if credentials is not None else find_credentials(self.base_url)
        token = creds.token
        #: The Authorization header this client sends (for callers that use httpx directly).
        self.headers = {"authorization": f"Bearer {token}"} if token else {}
        verify: Any = True
        if creds.ca_file and self.base_url.startswith("https:"):
            verify = ssl.create_default_context(cafile=creds.ca_file)
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, trust_env=False,
                                  headers=self.headers, verify=verify)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "RestClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as e:
            raise RestClientError(f"cannot reach the cluster at {self.base_url}: {e}") from None
        if resp.status_code == 401:
            raise RestClientError(
                f"the cluster at {self.base_url} refused the request: it needs its REST token "
                f"({'the token sent is not valid' if self.headers else 'none is known for this address'}; "
                f"set YARNFLINK_REST_TOKEN_FILE to the cluster's security/rest-token file)", 401)
        if resp.status_code >= 400:
            try:
                errors = resp.json().get("errors") or [resp.text]
            except (ValueError, AttributeError):
                errors = [resp.text]
            raise RestClientError("; ".join(str(e) for e in errors), resp.status_code)
        return resp.json() if resp.content else {}

    def submit_job(self, job_graph_json: dict[str, Any]) -> str:
        body = json.dumps(job_graph_json).encode()
        self._request("POST", "/jobs", content=body, headers={"content-type": "application/json"})
        return str(job_graph_json["jobId"])

    def job(self, job_id: str) -> dict[str, Any]:
        return self._request("GET", f"/jobs/{job_id}")  # type: ignore[no-any-return]

    def jobs_overview(self) -> list[dict[str, Any]]:
        return self._request("GET", "/jobs/overview")["jobs"]  # type: ignore[no-any-return]

    def exceptions(self, job_id: str) -> dict[str, Any]:
        return self._request("GET", f"/jobs/{job_id}/exceptions")  # type: ignore[no-any-return]

    def execution_result(self, job_id: str) -> dict[str, Any]:
        return self._request("GET", f"/jobs/{job_id}/execution-result")  # type: ignore[no-any-return]

    def cancel(self, job_id: str) -> None:
        self._request("PATCH", f"/jobs/{job_id}", params={"mode": "cancel"})

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
        try:
            resp = self._http.get(path)
        except httpx.HTTPError as e:
            raise RestClientError(f"cannot reach the cluster at {self.base_url}: {e}") from None
        if resp.status_code >= 400:
            try:
                errors = resp.json().get("errors") or [resp.text]
            except (ValueError, AttributeError):
                errors = [resp.text]
            raise RestClientError("; ".join(str(e) for e in errors), resp.status_code)
        return resp.text
