"""The keyed state backends the state tests run against: ``make_backend`` is parametrized over
``hashmap`` and ``rocksdb`` (a store in the test's temporary directory), so each test that takes it
runs on both; the backends it made are disposed of after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from yarnflink.state.handles import KeyGroupRange
from yarnflink.state.heap import HeapKeyedStateBackend
from yarnflink.state.rocksdb import RocksDBKeyedStateBackend

BACKENDS = ("hashmap", "rocksdb")


def backend_maker(kind: str, tmp_path: Path, made: list) -> Callable[..., Any]:
    def make(max_parallelism: int = 128, key_groups: KeyGroupRange | range = range(0, 128), **kw: Any) -> Any:
        if kind == "rocksdb":
            kw.pop("snapshot_mode", None)
            b: Any = RocksDBKeyedStateBackend(max_parallelism, key_groups, local_dir=str(tmp_path / "rocksdb"), **kw)
        else:
            b = HeapKeyedStateBackend(max_parallelism, key_groups, **kw)
        made.append(b)
        return b

    make.kind = kind  # type: ignore[attr-defined]
    return make


@pytest.fixture(params=BACKENDS)
def make_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    made: list = []
    yield backend_maker(request.param, tmp_path, made)
    for b in made:
        b.dispose()
