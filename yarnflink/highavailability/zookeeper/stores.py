"""The HA stores on ZooKeeper: pointers and counters in ZooKeeper, bulky data in the storageDir.

Every write is one transaction that starts with the writer's fence check (``fencing.py``), so a
deposed leader's late write fails with ``LeadershipLostError`` instead of landing. All methods block
on ZooKeeper (and the filesystem): run them on a worker thread, not on a component's loop.
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from yarnflink.highavailability.errors import HaStoreError
from yarnflink.highavailability.filesystem import FileSystemStateStorage
from yarnflink.highavailability.leaderelection import LeaderFence
from yarnflink.highavailability.stores import (
    GLOBALLY_TERMINAL,
    INITIAL_CHECKPOINT_ID,
    CheckpointIDCounter,
    CompletedCheckpointPointerStore,
    JobGraphStore,
)
from yarnflink.highavailability.zookeeper.client import ZooKeeperPaths
from yarnflink.highavailability.zookeeper.fencing import TransactionConflict, fenced_commit
from yarnflink.jobgraph.jobgraph import JobGraph, JobGraphError

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = [
    "ZooKeeperCheckpointIDCounter",
    "ZooKeeperCompletedCheckpointPointerStore",
    "ZooKeeperJobGraphStore",
    "delete_tree",
]

_MAX_CONFLICTS = 20


def _until_no_conflict(client: KazooClient, attempt: Callable[[], T]) -> T:
    """Runs ``attempt`` (read, then a fenced transaction) again while concurrent changes make its
    transaction fail; connection losses are retried by kazoo's command retry."""
    last: TransactionConflict | None = None
    for _ in range(_MAX_CONFLICTS):
        try:
            return client.retry(attempt)  # type: ignore[no-any-return]
        except TransactionConflict as e:
            last = e
    raise HaStoreError(f"gave up after {_MAX_CONFLICTS} conflicting concurrent changes: {last}")


def delete_tree(client: KazooClient, path: str, fence: LeaderFence | None) -> None:
    """Deletes ``path`` and everything below it in one fenced transaction (no-op if absent)."""

    def attempt() -> None:
        nodes: list[str] = []

        def walk(p: str) -> None:
            try:
                children = client.get_children(p)
            except NoNodeError:
                return
            for c in children:
                walk(posixpath.join(p, c))
            nodes.append(p)  # children first

        walk(path)

        def ops(tx: Any) -> None:
            for n in nodes:
                tx.delete(n)

        if nodes:
            fenced_commit(client, fence, ops)

    _until_no_conflict(client, attempt)


class ZooKeeperJobGraphStore(JobGraphStore):
    """``jobgraphs/<job id>`` holds ``{"path": <pointer>}``; the pointer names the JobGraph's JSON
    (``JobGraph.to_json()``) in ``<storageDir>/<cluster-id>/``."""

    def __init__(
        self,
        client: KazooClient,
        paths: ZooKeeperPaths,
        storage: FileSystemStateStorage,
        fence: LeaderFence | None = None,
    ) -> None:
        self.client = client
        self.paths = paths
        self.storage = storage
        self.fence = fence

    def put_job_graph(self, job_graph: Any) -> None:
        node = self.paths.job_graph(job_graph.job_id)
        data = json.dumps(job_graph.to_json()).encode()
        pointer = self.storage.store(f"submittedJobGraph-{job_graph.job_id}-", data)  # before its pointer
        self.client.ensure_path(self.paths.job_graphs)
        payload = json.dumps({"path": pointer}).encode()
        replaced: list[str | None] = [None]

        def attempt() -> None:
            try:
                old, stat = self.client.get(node)
            except NoNodeError:
                fenced_commit(self.client, self.fence, lambda tx: tx.create(node, payload))
                return
            fenced_commit(self.client, self.fence, lambda tx: tx.set_data(node, payload, stat.version))
            replaced[0] = _pointer(old)

        try:
            _until_no_conflict(self.client, attempt)
        except Exception:
            self.storage.discard(pointer)
            raise
        if replaced[0] is not None and replaced[0] != pointer:
            self.storage.discard(replaced[0])

    def recover_job_graph(self, job_id: str) -> Any | None:
        try:
            data, _ = self.client.retry(self.client.get, self.paths.job_graph(job_id))
        except NoNodeError:
            return None
        pointer = _pointer(data)
        if pointer is None:
            raise HaStoreError(f"the JobGraph pointer of job {job_id} in ZooKeeper is corrupt: {data[:200]!r}")
        try:
            return JobGraph.from_json(json.loads(self.storage.retrieve(pointer).decode()))
        except (ValueError, UnicodeDecodeError, JobGraphError) as e:
            raise HaStoreError(f"the JobGraph of job {job_id} at {pointer} is corrupt: {e}") from None

    def get_job_ids(self) -> list[str]:
        try:
            return sorted(self.client.retry(self.client.get_children, self.paths.job_graphs))
        except NoNodeError:
            return []

    def global_cleanup(self, job_id: str) -> None:
        node = self.paths.job_graph(job_id)
        removed: list[str | None] = [None]

        def attempt() -> None:
            try:
                data, stat = self.client.get(node)
            except NoNodeError:
                return
            fenced_commit(self.client, self.fence, lambda tx: tx.delete(node, stat.version))
            removed[0] = _pointer(data)

        _until_no_conflict(self.client, attempt)
        if removed[0] is not None:
            self.storage.discard(removed[0])  # after the pointer: never a pointer to nothing


def _pointer(data: bytes) -> str | None:
    try:
        p = json.loads(data.decode())["path"]
        return p if isinstance(p, str) else None
    except (ValueError, UnicodeDecodeError, KeyError, TypeError):
        return None


class ZooKeeperCheckpointIDCounter(CheckpointIDCounter):
    """``jobs/<job id>/checkpoint_id_counter`` holds the next id in decimal; increments are a
    compare-and-set on the node's version (Flink uses Curator's SharedCount the same way)."""

    def __init__(
        self, client: KazooClient, paths: ZooKeeperPaths, job_id: str, fence: LeaderFence | None = None
    ) -> None:
        self.client = client
        self.path = paths.checkpoint_id_counter(job_id)
        self.fence = fence

    def start(self) -> None:
        self.client.ensure_path(posixpath.dirname(self.path))

        def attempt() -> None:
            if self.client.exists(self.path) is None:
                fenced_commit(
                    self.client, self.fence, lambda tx: tx.create(self.path, str(INITIAL_CHECKPOINT_ID).encode())
                )

        _until_no_conflict(self.client, attempt)

    def _read(self) -> tuple[int, int]:
        try:
            data, stat = self.client.get(self.path)
        except NoNodeError:
            raise HaStoreError(f"checkpoint id counter {self.path} does not exist (start() it first)") from None
        try:
            return int(data.decode()), stat.version
        except ValueError:
            raise HaStoreError(f"checkpoint id counter {self.path} is corrupt: {data[:50]!r}") from None

    def get_and_increment(self) -> int:
        def attempt() -> int:
            value, version = self._read()
            fenced_commit(self.client, self.fence, lambda tx: tx.set_data(self.path, str(value + 1).encode(), version))
            return value

        return _until_no_conflict(self.client, attempt)

    def get(self) -> int:
        return self.client.retry(self._read)[0]  # type: ignore[no-any-return]

    def set_count(self, count: int) -> None:
        def attempt() -> None:
            _, version = self._read()
            fenced_commit(self.client, self.fence, lambda tx: tx.set_data(self.path, str(count).encode(), version))

        _until_no_conflict(self.client, attempt)

    def shutdown(self, job_status: str) -> None:
        if job_status in GLOBALLY_TERMINAL:
            delete_tree(self.client, self.path, self.fence)


class ZooKeeperCompletedCheckpointPointerStore(CompletedCheckpointPointerStore):
    """``jobs/<job id>/checkpoints/<id as 19 digits>`` holds the pointer (so names sort by id)."""

    def __init__(
        self,
        client: KazooClient,
        paths: ZooKeeperPaths,
        job_id: str,
        max_retained: int = 1,
        fence: LeaderFence | None = None,
    ) -> None:
        if max_retained < 1:
            raise ValueError("max_retained must be at least 1")
        self.client = client
        self.dir = paths.checkpoints(job_id)
        self.max_retained = max_retained
        self.fence = fence

    def _node(self, checkpoint_id: int) -> str:
        if checkpoint_id < 0:
            raise ValueError(f"invalid checkpoint id {checkpoint_id}")
        return f"{self.dir}/{checkpoint_id:019d}"

    def _ids(self) -> list[int]:
        try:
            return sorted(int(n) for n in self.client.get_children(self.dir) if n.isdigit())
        except NoNodeError:
            return []

    def add_checkpoint(self, checkpoint_id: int, pointer: str) -> list[tuple[int, str]]:
        node = self._node(checkpoint_id)
        job_node = posixpath.dirname(self.dir)

        def attempt() -> list[tuple[int, str]]:
            # The job's node exists while the job does (its checkpoint id counter made it). Once
            # the job's HA data is removed (it ended for good), a late pointer write, e.g. of a
            # checkpoint whose metadata upload outlived the job, is refused: re-creating the path
            # would leave a pointer that no cleanup ever removes.
            create_dir = self.client.exists(self.dir) is None
            if create_dir and self.client.exists(job_node) is None:
                raise HaStoreError(
                    f"checkpoint {checkpoint_id} not added: the HA data of job {posixpath.basename(job_node)} "
                    f"is gone ({job_node}; the job ended and was cleaned up)"
                )
            ids = self._ids()
            if checkpoint_id in ids:
                if self.client.get(node)[0] == pointer.encode():
                    return []  # our own write, retried after a connection loss
                raise HaStoreError(f"checkpoint {checkpoint_id} is already in the store")
            all_ids = sorted(ids + [checkpoint_id])
            drop = all_ids[: max(0, len(all_ids) - self.max_retained)]
            dropped = []
            for cid in drop:
                if cid != checkpoint_id:
                    dropped.append((cid, self.client.get(self._node(cid))[0].decode()))

            def ops(tx: Any) -> None:
                if create_dir:  # fenced: a deposed leader cannot re-create the job's path either
                    tx.create(self.dir)
                if checkpoint_id not in drop:
                    tx.create(node, pointer.encode())
                for cid, _ in dropped:
                    tx.delete(self._node(cid))

            fenced_commit(self.client, self.fence, ops)
            if checkpoint_id in drop:  # older than everything retained: subsumed at once
                dropped.append((checkpoint_id, pointer))
            return dropped

        return _until_no_conflict(self.client, attempt)

    def get_all(self) -> list[tuple[int, str]]:
        def read() -> list[tuple[int, str]]:
            out = []
            for cid in self._ids():
                try:
                    out.append((cid, self.client.get(self._node(cid))[0].decode()))
                except NoNodeError:
                    continue
            return out

        return self.client.retry(read)  # type: ignore[no-any-return]

    def remove(self, checkpoint_id: int) -> None:
        node = self._node(checkpoint_id)

        def attempt() -> None:
            present = self.client.exists(node) is not None
            if present or self.fence is not None:  # absent: the fence is still checked
                fenced_commit(self.client, self.fence, lambda tx: tx.delete(node) if present else None)

        _until_no_conflict(self.client, attempt)

    def check_leadership(self) -> None:
        if self.fence is not None:
            _until_no_conflict(self.client, lambda: fenced_commit(self.client, self.fence, lambda tx: None))

    def shutdown(self, job_status: str) -> list[tuple[int, str]]:
        if job_status not in GLOBALLY_TERMINAL:
            return []
        entries = self.get_all()
        delete_tree(self.client, self.dir, self.fence)
        return entries
