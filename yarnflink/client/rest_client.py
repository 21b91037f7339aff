"""A small client of the Dispatcher's REST API, used by the CLI and the job executor."""

from __future__ import annotations

import json
from typing import Any, Optional

import httpx

TERMINAL_STATES = ("FINISHED", "FAILED", "CANCELED")


class RestClientError(Exception):
    """The REST API answered with an error, or could not be reached; the message says which."""

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        self.status = status


class RestClient:
    def __init__(self, base_url: str, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, trust_env=False)

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
