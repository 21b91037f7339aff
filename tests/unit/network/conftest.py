"""Fixtures of the network tests (and making the repo importable without installing it)."""

from __future__ import annotations

import os
import sys
from typing import Callable, Iterator

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
if _ROOT not in sys.path:  # the repo is not installed into the venv
    sys.path.insert(0, _ROOT)

from yarnflink.network import ShuffleEnvironment  # noqa: E402


@pytest.fixture
def make_env() -> Iterator[Callable[..., ShuffleEnvironment]]:
    """Factory of started environments, all closed at the end of the test."""
    envs: list[ShuffleEnvironment] = []

    def factory(**kwargs: object) -> ShuffleEnvironment:
        env = ShuffleEnvironment("127.0.0.1", 0, **kwargs)  # type: ignore[arg-type]
        env.start()
        envs.append(env)
        return env

    yield factory
    for env in envs:
        env.close()
