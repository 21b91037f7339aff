"""Fixtures of the network tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from yarnflink.network import ShuffleEnvironment


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
