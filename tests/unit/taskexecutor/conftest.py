from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.taskexecutor.harness import StartTaskExecutor, started_task_executors


@pytest.fixture
def start_task_executor() -> Iterator[StartTaskExecutor]:
    """Starts a TaskExecutor whose peers are testing gateways (tests/unit/taskexecutor/harness.py)."""
    yield from started_task_executors()
