"""The State Processor API on Spark (Flink's ``flink-state-processor-api``): read the keyed state
of a savepoint as a Spark DataFrame, and write a savepoint from a DataFrame that a job can start
from with ``yarnflink run -s PATH``.

* ``read_savepoint(spark, path, uid, state_name)``: a DataFrame ``(key, value)`` with one row per
  key that has an entry in keyed state ``state_name`` of the operator with ``uid`` (a
  ``ValueState``'s value; a ``ListState`` gives its Python list, a ``MapState`` its dict, a
  ``ReducingState`` / ``AggregatingState`` its accumulated value: Spark infers array / map /
  scalar columns, or use ``schema``). Values under a TTL are unwrapped; only the default
  namespace is read (window contents and timers are not). The built-in ``reduce`` / ``sum`` /
  ``min`` / ``max`` keep their running values as key -> value dicts in union operator state
  (state names ``reduce``, ``aggregate-sum``, ...): those are read as ``(key, value)`` too.
* ``bootstrap_savepoint(df, path, uid, state_name, max_parallelism)``: a self-contained savepoint
  at ``path`` whose operator ``uid`` has keyed state ``state_name`` (a ``ValueState`` unless
  ``kind`` says otherwise) with one entry per row of ``df`` (columns ``key``, ``value``, or the
  first two). Keys go to key groups with Flink's formula (``yarnflink.common.keygroups``), so a
  job with that uid and the same max parallelism restores each key in the subtask that owns it,
  at any parallelism.

Both run on Spark: every state file is decoded / written by a Spark task (an executor needs
yarnflink and the file system's library). Paths are ``file://``, ``s3://`` or ``hdfs://``;
``storage_options`` are fsspec options, or pass ``conf`` (a yarnflink configuration with
``s3.endpoint`` ... as the cluster has).

pyspark is imported here only; nothing in the runtime imports this module.
"""

from __future__ import annotations

import pickle
import posixpath
import tempfile
import time
import uuid
from collections.abc import Generator, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from yarnflink.checkpoint.metadata import CompletedCheckpoint, OperatorState, serialize_metadata
from yarnflink.checkpoint.storage import (
    CheckpointStorageError,
    _io,
    _url,
    _write_metadata_file,
    filesystem_for,
    make_reader,
    read_stream_handle,
    resolve_restore_location,
    storage_options_from_config,
)
from yarnflink.common.keygroups import (
    UPPER_BOUND_MAX_PARALLELISM,
    key_group_ids,
    key_group_range,
    operator_index_for_key_group,
)
from yarnflink.state.handles import (
    FileStateHandle,
    IncrementalKeyedStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    OperatorSubtaskState,
    StateMetaInfo,
)
from yarnflink.state.heap import SNAPSHOT_FORMAT, HeapKeyedStateBackend, TtlValue, _encode
from yarnflink.state.rocksdb import RocksDBKeyedStateBackend

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

KINDS = ("value", "list", "map", "reducing", "aggregating")
BOOTSTRAP_JOB_ID = "00000000000000000000000000000000"


class StateProcessorError(ValueError):
    """The savepoint or the request does not fit (unknown uid or state, bad argument); the
    message names the path and the problem."""


def _options(path: str, storage_options: Mapping[str, Any] | None, conf: Mapping[str, Any] | None) -> dict:
    if storage_options is not None:
        return dict(storage_options)
    return storage_options_from_config(conf, path)


# ----------------------------------------------------------------------------- read
def _decode(task: tuple[dict, str, dict]) -> Iterator[tuple[Any, Any]]:
    """One keyed state handle -> its (key, value) entries of one state (runs in a Spark task)."""
    handle_json, state_name, options = task
    handle = KeyGroupsStateHandle.from_json(handle_json)
    data = read_stream_handle(handle.delegate, options)
    with pa.ipc.open_stream(pa.BufferReader(data)) as reader:
        if (reader.schema.metadata or {}).get(b"format") != SNAPSHOT_FORMAT.encode():
            raise StateProcessorError(f"{getattr(handle.delegate, 'path', 'inline state')}: not a keyed state snapshot")
        table = reader.read_all()
    rng = handle.key_group_range
    for kg, state, entry, value in zip(
        table.column("key_group").to_pylist(),
        table.column("state").to_pylist(),
        table.column("entry").to_pylist(),
        table.column("value").to_pylist(),
    ):
        if state != state_name or kg not in rng:
            continue
        key, namespace = pickle.loads(entry)
        if namespace is not None:
            continue
        yield key, _without_ttl(pickle.loads(value))


def _without_ttl(v: Any) -> Any:
    """A stored value without its TTL wrappers."""
    if isinstance(v, TtlValue):
        return v.value
    if isinstance(v, list):
        return [e.value if isinstance(e, TtlValue) else e for e in v]
    if isinstance(v, dict):
        return {k: (e.value if isinstance(e, TtlValue) else e) for k, e in v.items()}
    return v


def _decode_incremental(task: tuple[dict, str, dict, int]) -> Iterator[tuple[Any, Any]]:
    """One incremental keyed state handle (a checkpoint of ``execution.checkpointing.incremental``)
    -> its (key, value) entries of one state (a Spark task). A ``hashmap`` chain (base and deltas)
    is replayed into a heap backend of its key groups; a ``rocksdb`` one (SST files) is restored
    into a rocksdb backend in a temporary directory of the task's machine, streamed from its
    store, and the directory deleted when the entries are read (or the task stops reading)."""
    handle_json, state_name, options, max_parallelism = task
    handle = IncrementalKeyedStateHandle.from_json(handle_json)
    read = make_reader(options)
    items: Generator[tuple[int, Any, Any, Any], None, None]
    if handle.backend == HeapKeyedStateBackend.backend_name:
        heap = HeapKeyedStateBackend(max_parallelism, handle.key_group_range)
        heap.restore([handle], read)
        items = heap.stored_items(state_name)
    elif handle.backend == RocksDBKeyedStateBackend.backend_name:
        items = _rocksdb_items(handle, state_name, read, max_parallelism)
    else:
        raise StateProcessorError(
            f"incremental keyed state of the {handle.backend!r} backend cannot be read here (only "
            f"{HeapKeyedStateBackend.backend_name!r} and {RocksDBKeyedStateBackend.backend_name!r} "
            "chains); take a savepoint of the job and read that"
        )
    try:
        for _kg, key, namespace, value in items:
            if namespace is None:
                yield key, _without_ttl(value)
    finally:
        items.close()  # (a rocksdb store's directory is deleted now, not when collected)


def _rocksdb_items(
    handle: IncrementalKeyedStateHandle, state_name: str, read: Any, max_parallelism: int
) -> Generator[tuple[int, Any, Any, Any], None, None]:
    """The stored entries of ``state_name`` in the rocksdb incremental checkpoint ``handle``:
    restored into a rocksdb backend under a temporary directory (its memory the backend's
    default budget), deleted with the backend however the iteration ends."""
    with tempfile.TemporaryDirectory(prefix="yarnflink-state-processor-") as local_dir:
        backend = RocksDBKeyedStateBackend(max_parallelism, handle.key_group_range, local_dir=local_dir)
        try:
            backend.restore([handle], read)
            yield from backend.stored_items(state_name)
        finally:
            backend.dispose()


def _decode_any(task: tuple) -> Iterator[tuple[Any, Any]]:
    return _decode_incremental(task) if len(task) == 4 else _decode(task)  # type: ignore[arg-type]


def _decode_keyed_dicts(task: tuple[dict, str, dict]) -> Iterator[tuple[Any, Any]]:
    """One operator state handle -> the (key, value) items of the dicts its union list state
    ``state_name`` holds (the running values of reduce / sum / min / max; a Spark task)."""
    handle_json, state_name, options = task
    handle = OperatorStateHandle.from_json(handle_json)
    with pa.ipc.open_stream(pa.BufferReader(read_stream_handle(handle.delegate, options))) as reader:
        table = reader.read_all()
    elems = [v for n, v in zip(table.column("state").to_pylist(), table.column("value").to_pylist()) if n == state_name]
    _, indices = handle.states[state_name]
    for i in indices:
        d = pickle.loads(elems[i])
        if isinstance(d, dict):
            yield from d.items()


def read_savepoint(
    spark: SparkSession,
    path: str,
    uid: str,
    state_name: str,
    *,
    schema: Any = None,
    storage_options: Mapping[str, Any] | None = None,
    conf: Mapping[str, Any] | None = None,
) -> DataFrame:
    """The keyed state ``state_name`` of operator ``uid`` in the savepoint (or retained
    checkpoint) at ``path`` as a DataFrame ``(key, value)``."""
    options = _options(path, storage_options, conf)
    checkpoint = resolve_restore_location(path, options).checkpoint
    assert checkpoint is not None
    where = checkpoint.external_pointer or path
    op = checkpoint.operator_states.get(uid)
    if op is None:
        raise StateProcessorError(
            f"{where}: no state of an operator with uid {uid!r} "
            f"(operators: {', '.join(sorted(checkpoint.operator_states)) or 'none'})"
        )
    handles = [h for s in op.subtask_states.values() for h in s.managed_keyed_state]
    names = {m.name: m.kind for h in handles for m in h.states}
    op_handles = [h for s in op.subtask_states.values() for h in s.managed_operator_state]
    # reduce / sum / min / max keep key -> value dicts as union operator state ("reduce", "aggregate-sum", ...)
    union_names = {n for h in op_handles for n, (mode, _) in h.states.items() if mode == "UNION"}
    if state_name in names:
        tasks: list[tuple] = [
            (h.to_json(), state_name, options)
            if isinstance(h, KeyGroupsStateHandle)
            else (h.to_json(), state_name, options, op.max_parallelism)
            for h in handles
            if any(m.name == state_name for m in h.states)
        ]
        decode: Any = _decode_any
    elif state_name in union_names:
        tasks = [(h.to_json(), state_name, options) for h in op_handles if state_name in h.states]
        decode = _decode_keyed_dicts
    else:
        raise StateProcessorError(
            f"{where}: operator {uid!r} has no keyed state {state_name!r} "
            f"(its keyed states: {', '.join(sorted(set(names) | union_names)) or 'none'})"
        )
    rdd = spark.sparkContext.parallelize(tasks, max(1, len(tasks))).flatMap(decode)
    if schema is not None:
        return spark.createDataFrame(rdd, schema)
    if rdd.isEmpty():
        return spark.createDataFrame([], "key string, value string")
    return spark.createDataFrame(rdd, ["key", "value"], samplingRatio=None)


# ----------------------------------------------------------------------------- write
def _write_subtask(
    index: int,
    rows: Iterator[Any],
    *,
    path: str,
    uid: str,
    state_name: str,
    kind: str,
    max_parallelism: int,
    parallelism: int,
    options: dict,
) -> Iterator[tuple[int, dict]]:
    """The rows of subtask ``index`` -> one state file in the savepoint directory (a Spark task);
    yields ``(index, KeyGroupsStateHandle JSON)``."""
    by_group: dict[int, dict] = {}
    for kg, key, value in rows:
        entries = by_group.setdefault(kg, {})
        if (key, None) in entries:
            raise StateProcessorError(f"bootstrap_savepoint: key {key!r} appears more than once")
        entries[(key, None)] = value
    if not by_group:
        return
    payload = _encode([(kg, state_name, None, d) for kg, d in by_group.items()], int(time.time() * 1000))
    fs, directory = filesystem_for(path, options)
    file_path = posixpath.join(directory.rstrip("/"), f"{uid}-{index}-{uuid.uuid4().hex}.arrow")
    url = _url(fs, file_path)
    _io(url, "writing a state file", lambda: fs.pipe_file(file_path, payload))
    rng = KeyGroupRange.of(key_group_range(max_parallelism, parallelism, index))
    handle = KeyGroupsStateHandle(rng, FileStateHandle(url, len(payload)), (StateMetaInfo(state_name, kind),))
    yield index, handle.to_json()


def bootstrap_savepoint(
    df: DataFrame,
    path: str,
    uid: str,
    state_name: str,
    max_parallelism: int,
    *,
    parallelism: int = 1,
    kind: str = "value",
    storage_options: Mapping[str, Any] | None = None,
    conf: Mapping[str, Any] | None = None,
) -> str:
    """Write a savepoint at ``path`` (a new directory) holding ``df``'s ``(key, value)`` rows as
    keyed state ``state_name`` of operator ``uid``; returns its URL (for ``run -s``).
    ``parallelism`` only sets how many state files are written: a job restores them at any
    parallelism, but its max parallelism must be ``max_parallelism``."""
    if not uid:
        raise StateProcessorError("bootstrap_savepoint: uid must not be empty")
    if not state_name:
        raise StateProcessorError("bootstrap_savepoint: state_name must not be empty")
    if kind not in KINDS:
        raise StateProcessorError(f"bootstrap_savepoint: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if not isinstance(max_parallelism, int) or not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise StateProcessorError(
            f"bootstrap_savepoint: max_parallelism must be in 1..{UPPER_BOUND_MAX_PARALLELISM}, got {max_parallelism!r}"
        )
    if not isinstance(parallelism, int) or not 0 < parallelism <= max_parallelism:
        raise StateProcessorError(
            f"bootstrap_savepoint: parallelism must be in 1..{max_parallelism}, got {parallelism!r}"
        )
    if len(df.columns) < 2:
        raise StateProcessorError(f"bootstrap_savepoint: the DataFrame needs (key, value) columns, it has {df.columns}")
    key_col, value_col = ("key", "value") if {"key", "value"} <= set(df.columns) else tuple(df.columns[:2])
    options = _options(path, storage_options, conf)
    fs, directory = filesystem_for(path, options)
    directory = directory.rstrip("/")
    target = _url(fs, directory)
    if _io(target, "checking the savepoint directory", lambda: fs.exists(posixpath.join(directory, "_metadata"))):
        raise CheckpointStorageError(target, "a savepoint already exists there")
    _io(target, "creating the savepoint directory", lambda: fs.makedirs(directory, exist_ok=True))

    def with_groups(part: Iterable[Any]) -> Iterator[tuple[int, tuple[int, Any, Any]]]:
        rows = [(r[0], r[1]) for r in part]
        if not rows:
            return
        groups = key_group_ids([k for k, _ in rows], max_parallelism)
        subtasks = operator_index_for_key_group(max_parallelism, parallelism, groups)
        for (k, v), kg, sub in zip(rows, groups.tolist(), subtasks.tolist()):
            yield sub, (kg, k, v)

    def write(index: int, part: Iterable[Any]) -> Iterator[tuple[int, dict]]:
        return _write_subtask(
            index,
            (row for _, row in part),
            path=target,
            uid=uid,
            state_name=state_name,
            kind=kind,
            max_parallelism=max_parallelism,
            parallelism=parallelism,
            options=options,
        )

    pairs = df.select(key_col, value_col).rdd.map(lambda r: (_plain(r[0]), _plain(r[1])))
    written = (
        pairs.mapPartitions(with_groups)
        .partitionBy(parallelism, lambda sub: sub)
        .mapPartitionsWithIndex(write)
        .collect()
    )
    subtasks = {i: OperatorSubtaskState([KeyGroupsStateHandle.from_json(h)]) for i, h in written}
    savepoint = CompletedCheckpoint(
        BOOTSTRAP_JOB_ID,
        0,
        int(time.time() * 1000),
        {uid: OperatorState(uid, parallelism, max_parallelism, subtasks)},
        is_savepoint=True,
        external_pointer=target,
    )
    _write_metadata_file(fs, directory, serialize_metadata(savepoint, relative_to=target))
    return target


def _plain(v: Any) -> Any:
    """Spark Rows / arrays / maps -> plain Python tuples / lists / dicts (what the job's state holds)."""
    from pyspark.sql import Row  # deferred: pyspark loads only when the API is used

    if isinstance(v, Row):
        return tuple(_plain(x) for x in v)
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {_plain(k): _plain(x) for k, x in v.items()}
    return v


__all__ = ["StateProcessorError", "bootstrap_savepoint", "read_savepoint"]
