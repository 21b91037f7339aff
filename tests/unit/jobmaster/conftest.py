from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.jobmaster.harness import StartJobMaster, started_jobmasters


@pytest.fixture
def start_jobmaster() -> Iterator[StartJobMaster]:
    """Starts a JobMaster whose peers are testing gateways (tests/unit/jobmaster/harness.py)."""
    yield from started_jobmasters()
