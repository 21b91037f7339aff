from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.resourcemanager.harness import StartResourceManager, started_resource_managers


@pytest.fixture
def start_resource_manager() -> Iterator[StartResourceManager]:
    """Starts a ResourceManager whose peers are testing gateways (tests/unit/resourcemanager/harness.py)."""
    yield from started_resource_managers()
