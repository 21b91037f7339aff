"""The REST API's errors, raised by the handlers of ``rest`` and ``rest_monitoring`` and answered by
``rest``'s exception handlers as Flink does: ``{"errors": [message]}`` with the status."""

from __future__ import annotations


class RestError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class NotFound(Exception):
    """Answered with 404 and the message."""


def parse_job_id(value: str) -> str:
    """A job id path parameter, normalized; a RestError 400 unless 32 hex characters."""
    v = value.strip().lower()
    if len(v) != 32 or any(c not in "0123456789abcdef" for c in v):
        raise RestError(400, f"{value!r} is not a job id (32 hex characters)")
    return v
