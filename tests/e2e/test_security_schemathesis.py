"""Schemathesis against a real cluster's REST API, with and without the token: whatever it
sends, the answer is never a 5xx, and without the token it is 401 everywhere but /health.

Hypothesis is driven directly (one property per API operation) rather than through
schemathesis' pytest plugin, whose lazy fixture loading does not run on pytest 9."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from .conftest import Cluster, start_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

EXAMPLES_PER_OPERATION = 25


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("fuzzed"), taskexecutors=1, slots=1)
    yield c
    c.stop()


def _operations(c: Cluster) -> list[Any]:
    spec = httpx.get(c.rest_url + "/openapi.json", headers=c.auth, timeout=30).json()
    # DELETE /cluster would end the run; test_security's walk covers it without the token
    schema = schemathesis.openapi.from_dict(spec).exclude(method="DELETE", path="/cluster")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 12
    return operations


def _fuzz(c: Cluster, with_token: bool) -> None:
    for operation in _operations(c):

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def check(case: Any) -> None:
            headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
            case.headers = headers
            response = case.call_and_validate(
                base_url=c.rest_url, headers=dict(c.auth) if with_token else None, checks=[not_a_server_error]
            )
            if not with_token and case.path != "/health":
                assert response.status_code == 401, (case.method, case.path, response.status_code)

        check()
    assert c.rest.overview()["taskmanagers"] == 1  # still serving


def test_no_server_errors_with_the_token(fuzzed: Cluster) -> None:
    _fuzz(fuzzed, with_token=True)


def test_no_server_errors_and_401_without_the_token(fuzzed: Cluster) -> None:
    _fuzz(fuzzed, with_token=False)
