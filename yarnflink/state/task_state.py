"""The seam between a Task and the state of its operators.

A Task (later) creates one ``TaskStateManager`` with what it restores (a ``TaskStateSnapshot``
from the JobMaster) and where snapshots go (a ``CheckpointStreamFactory`` from checkpoint
storage), and sets it as ``OperatorContext.state``; stateful operators then call
``keyed_state_backend_for(ctx)`` / ``operator_state_backend_for(ctx)`` in ``open``. Without a
manager (today) operators get fresh, empty backends.

On a checkpoint barrier the Task calls ``snapshot_chain(chain, checkpoint_id, timestamp,
stream_factory)``, whose future yields the ``TaskStateSnapshot`` to acknowledge; on completion /
abort it calls ``notify_checkpoint_complete`` / ``notify_checkpoint_aborted`` on the chain's
operators (``notify_chain``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor, Future
from typing import Any, Union

from yarnflink.common.keygroups import key_group_range
from yarnflink.state.handles import KeyGroupRange, OperatorSubtaskState, SnapshotResult, TaskStateSnapshot
from yarnflink.state.heap import SNAPSHOT_MODES, HeapKeyedStateBackend
from yarnflink.state.incremental import MaterializationRule
from yarnflink.state.operator_state import OperatorStateBackend
from yarnflink.state.options import IncrementalCheckpointOptions, RocksDBOptions, StateBackendOptions
from yarnflink.state.rocksdb import RocksDBKeyedStateBackend, RocksDBMemory
from yarnflink.state.streams import (
    EXCLUSIVE,
    CheckpointStreamFactory,
    InlineStreamFactory,
    StateReader,
    read_inline,
    write_shared_file,
    write_state_file,
)

#: what ``state.backend.type`` gives a keyed operator (both have the same interface)
KeyedStateBackend = Union[HeapKeyedStateBackend, RocksDBKeyedStateBackend]

STATE_BACKEND_KEY = StateBackendOptions.STATE_BACKEND.key
SNAPSHOT_MODE_KEY = StateBackendOptions.SNAPSHOT_MODE.key
COMPRESSION_KEY = StateBackendOptions.SNAPSHOT_COMPRESSION.key
SUPPORTED_BACKENDS = ("hashmap", "rocksdb")


def _now_ms() -> int:
    return int(time.time() * 1000)


def check_state_backend(config: Mapping[str, str] | None) -> str:
    name = (config or {}).get(STATE_BACKEND_KEY, "hashmap").strip().lower()
    if name not in SUPPORTED_BACKENDS:
        raise ValueError(
            f"{STATE_BACKEND_KEY}: unsupported state backend {name!r}; yarnflink supports "
            + ", ".join(SUPPORTED_BACKENDS)
        )
    return name


def create_keyed_state_backend(
    config: Mapping[str, str] | None,
    max_parallelism: int,
    key_groups: KeyGroupRange,
    *,
    name: str = "",
    clock: Callable[[], int] = _now_ms,
    executor: Executor | None = None,
) -> KeyedStateBackend:
    """The keyed state backend ``state.backend.type`` names: ``hashmap`` or ``rocksdb``."""
    backend = check_state_backend(config)
    compress = str((config or {}).get(COMPRESSION_KEY) or "false").strip().lower() in ("true", "1", "yes")
    if backend == "rocksdb":
        local_dir, memory = rocksdb_settings(config)
        return RocksDBKeyedStateBackend(
            max_parallelism,
            key_groups,
            clock=clock,
            executor=executor,
            name=name,
            local_dir=local_dir,
            memory=memory,
            compression="lz4" if compress else None,
            incremental=bool(IncrementalCheckpointOptions.INCREMENTAL.read(config or {})),
        )
    mode = str((config or {}).get(SNAPSHOT_MODE_KEY) or "thread").strip().lower()
    if mode not in SNAPSHOT_MODES:
        raise ValueError(
            f"{SNAPSHOT_MODE_KEY}: unknown snapshot mode {mode!r}; expected one of " + ", ".join(SNAPSHOT_MODES)
        )
    conf = config or {}
    return HeapKeyedStateBackend(
        max_parallelism,
        key_groups,
        clock=clock,
        executor=executor,
        name=name,
        snapshot_mode=mode,
        compression="lz4" if compress else None,
        incremental=bool(IncrementalCheckpointOptions.INCREMENTAL.read(conf)),
        materialization=MaterializationRule(
            int(IncrementalCheckpointOptions.INCREMENTAL_MAX_DELTAS.read(conf)),
            float(IncrementalCheckpointOptions.INCREMENTAL_MAX_DELTA_RATIO.read(conf)),
        ),
    )


def rocksdb_settings(config: Mapping[str, str] | None) -> tuple[str | None, RocksDBMemory]:
    """The ``state.backend.rocksdb.*`` keys of ``config``: the local directory (None: the
    default) and the memory bounds; a bad value is a ``ConfigError`` naming its key."""
    c = config or {}

    def get(option: Any) -> Any:
        raw = c.get(option.key)
        return option.default if raw is None or raw == "" else option.parse(raw)

    local_dir = get(RocksDBOptions.LOCAL_DIRECTORIES)
    memory = RocksDBMemory(
        managed=get(RocksDBOptions.USE_MANAGED_MEMORY),
        fixed_per_tm=get(RocksDBOptions.FIX_PER_TM_MEMORY_SIZE),
        write_buffer_ratio=get(RocksDBOptions.WRITE_BUFFER_RATIO),
        block_cache_size=get(RocksDBOptions.BLOCK_CACHE_SIZE),
        write_buffer_size=get(RocksDBOptions.WRITE_BUFFER_SIZE),
        write_buffer_count=get(RocksDBOptions.MAX_WRITE_BUFFER_NUMBER),
    )
    return (str(local_dir).strip() or None) if local_dir is not None else None, memory


class TaskStateManager:
    def __init__(
        self,
        *,
        restored: TaskStateSnapshot | None = None,
        restored_checkpoint_id: int | None = None,
        stream_factory: CheckpointStreamFactory | None = None,
        reader: StateReader = read_inline,
        config: Mapping[str, str] | None = None,
        clock: Callable[[], int] = _now_ms,
        executor: Executor | None = None,
    ):
        self.restored = restored
        self.restored_checkpoint_id = restored_checkpoint_id
        self.stream_factory = stream_factory or InlineStreamFactory()
        self.reader = reader
        self.config = dict(config or {})
        self.clock = clock
        self.executor = executor
        check_state_backend(self.config)
        #: the keyed backends made, told of completed / aborted checkpoints (incremental chains)
        self.keyed_backends: list[KeyedStateBackend] = []

    def notify_checkpoint(self, checkpoint_id: int, completed: bool) -> None:
        """(Task thread) checkpoint ``checkpoint_id`` completed or was aborted."""
        for b in self.keyed_backends:
            if completed:
                b.notify_checkpoint_complete(checkpoint_id)
            else:
                b.notify_checkpoint_aborted(checkpoint_id)

    def _restored_state(self, operator_id: str) -> OperatorSubtaskState | None:
        return self.restored.get(operator_id) if self.restored is not None else None

    def keyed_state_backend(
        self,
        operator_id: str,
        max_parallelism: int,
        key_groups: KeyGroupRange,
        name: str = "",
        clock: Callable[[], int] | None = None,
    ) -> KeyedStateBackend:
        backend = create_keyed_state_backend(
            self.config,
            max_parallelism,
            key_groups,
            name=name or operator_id,
            clock=clock or self.clock,
            executor=self.executor,
        )
        st = self._restored_state(operator_id)
        if st is not None and st.managed_keyed_state:
            backend.restore(st.managed_keyed_state, self.reader)
        self.keyed_backends.append(backend)
        return backend

    def operator_state_backend(self, operator_id: str, name: str = "") -> OperatorStateBackend:
        backend = OperatorStateBackend(name or operator_id)
        st = self._restored_state(operator_id)
        if st is not None and st.managed_operator_state:
            backend.restore(st.managed_operator_state, self.reader)
        return backend


def _operator_id(ctx: Any) -> str:
    return getattr(ctx, "operator_id", "") or ctx.operator_name


def keyed_state_backend_for(ctx: Any, clock: Callable[[], int] | None = None) -> KeyedStateBackend:
    """The keyed state backend of the operator running with OperatorContext ``ctx``: the key
    groups of its subtask (Flink's formula), restored when the task has a TaskStateManager."""
    groups = KeyGroupRange.of(key_group_range(ctx.max_parallelism, ctx.parallelism, ctx.subtask_index))
    mgr: TaskStateManager | None = ctx.state
    if mgr is None:
        return create_keyed_state_backend(
            ctx.config, ctx.max_parallelism, groups, name=ctx.operator_name, clock=clock or _now_ms
        )
    return mgr.keyed_state_backend(_operator_id(ctx), ctx.max_parallelism, groups, clock=clock)


def operator_state_backend_for(ctx: Any) -> OperatorStateBackend:
    mgr: TaskStateManager | None = ctx.state
    if mgr is None:
        return OperatorStateBackend(ctx.operator_name)
    return mgr.operator_state_backend(_operator_id(ctx))


# ----------------------------------------------------------------------------- chain snapshots
class LazyStreamFactory:
    """A ``CheckpointStreamFactory`` made on its first use: creating a checkpoint's directory
    (a round trip to S3) then happens on the snapshot thread, not in the task's synchronous
    part (``make`` is called at most once, from whichever thread writes first)."""

    def __init__(
        self,
        make: Callable[[], CheckpointStreamFactory],
        *,
        shared_state: bool = False,
        shared_prefix: str | None = None,
    ) -> None:
        self._make = make
        self._factory: Any = None
        self._lock = threading.Lock()
        #: whether snapshots may write shared files (a checkpoint to storage, not a savepoint)
        self.shared_state = shared_state
        #: the URL prefix of the job's shared directory (a chain elsewhere is not built on)
        self.shared_prefix = shared_prefix

    def _get(self) -> Any:
        with self._lock:
            if self._factory is None:
                self._factory = self._make()
            return self._factory

    def write_state(self, data: bytes, name: str, *args: Any, **kwargs: Any) -> Any:
        return self._get().write_state(data, name, *args, **kwargs)

    def write_shared(self, data: Any, name: str, key_group_range: KeyGroupRange, kind: str) -> Any:
        return self._get().write_shared(data, name, key_group_range, kind)

    def write_state_file(self, local_path: str, name: str, scope: str = EXCLUSIVE) -> Any:
        return write_state_file(self._get(), local_path, name, scope)

    def write_shared_file(self, local_path: str, name: str, key_group_range: KeyGroupRange, kind: str) -> Any:
        return write_shared_file(self._get(), local_path, name, key_group_range, kind)


def snapshot_operators(
    operators: Iterable[tuple[str, Any]],
    checkpoint_id: int,
    timestamp: int,
    stream_factory: CheckpointStreamFactory | None = None,
) -> Future[TaskStateSnapshot]:
    """Synchronous parts of every stateful operator now (in order); the returned future
    completes when all background parts have, with the task's ``TaskStateSnapshot`` (or the
    first error). ``operators``: ``(operator_id, operator)``; operators without
    ``snapshot_state`` are skipped."""
    pending: list[tuple[str, Future]] = []
    for op_id, op in operators:
        snap = getattr(op, "snapshot_state", None)
        if snap is None:
            continue
        for f in snap(checkpoint_id, timestamp, stream_factory):
            pending.append((op_id, f))
    result: Future = Future()
    if not pending:
        result.set_result(TaskStateSnapshot())
        return result
    remaining = [len(pending)]

    def done(_: Future) -> None:
        remaining[0] -= 1  # callbacks may run on several threads; the last one assembles
        if remaining[0] != 0 or result.done():
            return
        snapshot = TaskStateSnapshot()
        try:
            for op_id, f in pending:
                r: SnapshotResult = f.result()
                st = snapshot.subtask_states.setdefault(op_id, OperatorSubtaskState())
                st.managed_keyed_state.extend(r.keyed_handles)
                if r.operator is not None:
                    st.managed_operator_state.append(r.operator)
            snapshot.subtask_states = {k: v for k, v in snapshot.subtask_states.items() if not v.is_empty()}
            result.set_result(snapshot)
        except BaseException as e:  # noqa: BLE001 - delivered through the future
            if not result.done():
                result.set_exception(e)

    lock = threading.Lock()

    def locked_done(f: Future) -> None:
        with lock:
            done(f)

    for _, f in pending:
        f.add_done_callback(locked_done)
    return result


def snapshot_chain(
    chain: Any, checkpoint_id: int, timestamp: int, stream_factory: CheckpointStreamFactory | None = None
) -> Future[TaskStateSnapshot]:
    """``snapshot_operators`` over an ``OperatorChain`` (ids from each operator's context)."""
    ops = []
    for nid in chain.order:
        op = chain.operators[nid]
        ctx = getattr(op, "ctx", None)
        ops.append((_operator_id(ctx) if ctx is not None else str(nid), op))
    return snapshot_operators(ops, checkpoint_id, timestamp, stream_factory)


def notify_chain(chain: Any, checkpoint_id: int, completed: bool) -> None:
    """``notify_checkpoint_complete`` / ``notify_checkpoint_aborted`` on every operator that has it."""
    method = "notify_checkpoint_complete" if completed else "notify_checkpoint_aborted"
    for nid in chain.order:
        f = getattr(chain.operators[nid], method, None)
        if f is not None:
            f(checkpoint_id)
