"""Sinks: files (fsspec + pyarrow), print, collect."""

from __future__ import annotations

import base64
import datetime
import json
import sys
import threading
import uuid
from concurrent.futures import Future
from typing import Any

import pyarrow as pa

from yarnflink.common.records import KIND_PICKLE, Batch, batches_to_ipc_bytes, record_kind, to_ipc_bytes
from yarnflink.operators.base import OperatorContext, StreamOperator
from yarnflink.operators.checkpointed import CheckpointedValue
from yarnflink.operators.specs import CollectSinkSpec, DiscardingSinkSpec, FileSinkSpec, PrintSinkSpec

FILE_EXTENSIONS = {"jsonl": "jsonl", "parquet": "parquet", "csv": "csv", "text": "txt"}


class _NullOutput:
    def emit(self, batch: Batch) -> None:
        pass

    def end_input(self) -> None:
        pass


class SinkOperator(StreamOperator):
    """A sink has no downstream; ``output`` is a no-op unless the chain wires one."""

    output = _NullOutput()


def _json_default(o: Any) -> Any:
    if isinstance(o, (bytes, bytearray)):
        return base64.b64encode(bytes(o)).decode("ascii")
    if isinstance(o, (datetime.datetime, datetime.date, datetime.time)):
        return o.isoformat()
    if isinstance(o, (set, frozenset)):
        return list(o)
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


def _plain_schema(rb: pa.RecordBatch) -> pa.RecordBatch:
    return rb.replace_schema_metadata(None)


def part_file_path(path: str, subtask_index: int, fmt: str, prefix: str = "part", suffix: str | None = None) -> str:
    return f"{path.rstrip('/')}/{prefix}-{subtask_index}-0{_suffix(fmt, suffix)}"


def _suffix(fmt: str, suffix: str | None) -> str:
    return f".{FILE_EXTENSIONS[fmt]}" if suffix is None else suffix


def _part_subtask(name: str, prefix: str) -> int | None:
    """The subtask index in a part file name ``<prefix><subtask>-...`` (None: not one)."""
    if not name.startswith(prefix):
        return None
    head = name[len(prefix) :].split("-", 1)[0]
    return int(head) if head.isdigit() else None


class FileSink(SinkOperator):
    """One file per subtask, ``<path>/part-<subtask>-0.<ext>``, written incrementally and closed
    at end_input.

    * jsonl: one JSON value per line (tuple -> array, dict -> object, scalar -> itself; bytes as
      base64, datetimes as ISO strings). The file exists even if no record arrives.
    * parquet / csv: via pyarrow, the Arrow form of the records (tuples -> columns f0..fn-1,
      scalars -> f0, dicts -> their keys). Later batches are cast to the first batch's schema
      (an error if impossible). A csv file exists even if empty; a parquet file is written only
      if at least one record arrives (parquet needs a schema).
    """

    def __init__(self, spec: FileSinkSpec):
        if spec.format not in FILE_EXTENSIONS:
            raise ValueError(f"FileSink: unknown format {spec.format!r} (jsonl, parquet, csv, text)")
        self.spec = spec
        self._file: Any = None  # a file of the path's fsspec file system, while one is open
        self._writer: Any = None  # pyarrow's ParquetWriter or CSVWriter on it (parquet, csv)
        self._schema: pa.Schema | None = None
        self.path: str | None = None
        self.exactly_once = False

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        import fsspec  # deferred: fsspec loads on the first file system use

        fs, root = fsspec.core.url_to_fs(self.spec.path, **self.spec.storage_options)
        self._fs = fs
        self._root = root
        fs.makedirs(root, exist_ok=True)
        # union state: on restore every subtask sees every old subtask's files (rescaling)
        self._checkpointed = CheckpointedValue(ctx, "file-sink-files", union=True, legacy="file-sink")
        self.exactly_once = self._checkpointed.enabled
        if self.exactly_once:
            self._restore_exactly_once()
            return
        self.path = part_file_path(
            root, ctx.subtask_index, self.spec.format, self.spec.part_prefix, self.spec.part_suffix
        )
        if self.spec.format != "parquet":
            self._file = fs.open(self.path, "wb")

    # ------------------------------------------------------------------ exactly-once (checkpointing)
    # Records go to a hidden in-progress file per checkpoint interval; snapshot_state closes it and
    # remembers it as pending for that checkpoint; notify_checkpoint_complete (and end of input)
    # renames pending files to their final name part-<subtask>-<n>.<ext>. On restore, files pending
    # in the restored checkpoint are committed and every other in-progress file is deleted. At
    # another parallelism, new subtask i does both for the files of old subtasks k with
    # k % parallelism == i (named after k), and numbers its own files after any part-i-* there.
    def _final_path(self, n: int, subtask: int | None = None) -> str:
        i = self.ctx.subtask_index if subtask is None else subtask
        suffix = _suffix(self.spec.format, self.spec.part_suffix)
        return f"{self._root.rstrip('/')}/{self.spec.part_prefix}-{i}-{n}{suffix}"

    def _restore_exactly_once(self) -> None:
        self._pending: dict[int, list[tuple[str, int]]] = {}  # checkpoint id -> [(in-progress file, n)]
        self._counter = 0
        self._uid = uuid.uuid4().hex[:8]
        me, p = self.ctx.subtask_index, self.ctx.parallelism
        restored = [dict(st, subtask=me) for st in self._checkpointed.legacy[:1]] + list(self._checkpointed.restored)
        old_subtasks = {int(st["subtask"]) for st in restored}
        for st in restored:
            owner = int(st["subtask"])
            if owner == me:
                self._counter = max(self._counter, int(st["counter"]))
            if owner % p == me:
                for cid, files in st["pending"].items():
                    for tmp, n in files:
                        self._commit_file(tmp, n, owner)
        # what later (uncheckpointed) attempts left behind: in-progress files of old subtasks k with k % p == me
        for f in self._fs.ls(self._root, detail=False):
            name = f.rstrip("/").rsplit("/", 1)[-1]
            k = _part_subtask(name, ".part-")
            if k is not None and k % p == me and name.endswith(".inprogress"):
                self._fs.rm(f)
        self.path = None
        # This subtask already reached the end of its input after the restored checkpoint and
        # committed everything (its first file after the checkpoint exists): the replayed input is
        # the same (not after a scale-down), so it is dropped instead of written twice.
        self._already_committed = (
            me in old_subtasks and all(k < p for k in old_subtasks) and self._fs.exists(self._final_path(self._counter))
        )
        if restored and not self._already_committed:  # never overwrite a part-<me>-<n> of an earlier parallelism
            for f in self._fs.ls(self._root, detail=False):
                name = f.rstrip("/").rsplit("/", 1)[-1]
                if _part_subtask(name, f"{self.spec.part_prefix}-") == me:
                    try:
                        self._counter = max(self._counter, int(name.split("-")[2].split(".")[0]) + 1)
                    except (IndexError, ValueError):
                        pass

    def _commit_file(self, tmp: str, n: int, subtask: int | None = None) -> None:
        final = self._final_path(n, subtask)
        if self._fs.exists(tmp):
            self._fs.mv(tmp, final)  # a rename on local and HDFS file systems

    def _ensure_open(self) -> None:
        if self.path is None:
            self.path = (
                f"{self._root.rstrip('/')}/.part-{self.ctx.subtask_index}-{self._counter}-{self._uid}.inprogress"
            )
            self._current_n = self._counter
            self._counter += 1
            if self.spec.format != "parquet":
                self._file = self._fs.open(self.path, "wb")

    def _roll(self) -> list[tuple[str, int]]:
        """Closes the in-progress file; returns it (as a list) if one was open."""
        if self.path is None:
            return []
        self._finish()
        rolled = [(self.path, self._current_n)]
        self.path = None
        self._schema = None
        return rolled

    def snapshot_state(self, checkpoint_id: int, timestamp: int, factory: Any) -> list:
        if not self.exactly_once:
            return []
        rolled = self._roll()
        if rolled:
            self._pending[checkpoint_id] = rolled
        state = {
            "subtask": self.ctx.subtask_index,
            "counter": self._counter,
            "pending": {str(c): files for c, files in self._pending.items()},
        }
        return self._checkpointed.snapshot(state, checkpoint_id, timestamp, factory)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        if not self.exactly_once:
            return
        for cid in sorted(c for c in self._pending if c <= checkpoint_id):
            for tmp, n in self._pending.pop(cid):
                self._commit_file(tmp, n)

    def _open_parquet(self, schema: pa.Schema) -> None:
        import pyarrow.parquet as pq  # deferred: pyarrow's Parquet reader/writer, for that format only

        self._file = self._fs.open(self.path, "wb")
        self._writer = pq.ParquetWriter(self._file, schema)

    def _conform(self, rb: pa.RecordBatch) -> pa.RecordBatch:
        if record_kind(rb) == KIND_PICKLE:
            raise TypeError(
                f"FileSink({self.spec.format}) {self.path}: these records cannot be stored as "
                f"columns (mixed types, nested or arbitrary objects); use format='jsonl' or map "
                f"them to tuples/dicts of primitive values first"
            )
        rb = _plain_schema(rb)
        if self._schema is None:
            self._schema = rb.schema
            return rb
        if rb.schema.equals(self._schema):
            return rb
        try:
            if rb.schema.names != self._schema.names:
                raise ValueError("different columns")
            return rb.cast(self._schema)
        except (pa.ArrowException, ValueError) as e:
            raise TypeError(
                f"FileSink({self.spec.format}) {self.path}: records with schema {rb.schema} "
                f"cannot be written to a file with schema {self._schema}: {e}"
            ) from e

    def process_batch(self, batch: Batch) -> None:
        if len(batch) == 0:
            return
        if self.exactly_once:
            if self._already_committed:
                return
            self._ensure_open()
        fmt = self.spec.format
        if fmt == "jsonl":
            dumps = json.dumps
            text = "\n".join([dumps(r, default=_json_default, ensure_ascii=False) for r in batch.rows()])
            self._file.write((text + "\n").encode("utf-8"))
            return
        if fmt == "text":  # Encoder.simple_string_encoder(): one str(record) per line
            self._file.write("".join([f"{r}\n" for r in batch.rows()]).encode("utf-8"))
            return
        rb = self._conform(batch.arrow())
        if fmt == "parquet":
            if self._writer is None:
                self._open_parquet(rb.schema)
            self._writer.write_batch(rb)
        else:
            import pyarrow.csv as pcsv  # deferred: pyarrow's CSV reader/writer, for that format only

            if self._writer is None:
                self._writer = pcsv.CSVWriter(self._file, rb.schema)
            self._writer.write_batch(rb)

    def _finish(self) -> None:
        try:
            if self._writer is not None:
                self._writer.close()
        finally:
            self._writer = None
            if self._file is not None:
                f, self._file = self._file, None
                f.close()

    def end_input(self) -> None:
        if self.exactly_once:  # end of input commits everything (Flink: the final checkpoint)
            rolled = self._roll()
            for cid in sorted(self._pending):
                for tmp, n in self._pending.pop(cid):
                    self._commit_file(tmp, n)
            for tmp, n in rolled:
                self._commit_file(tmp, n)
        self._finish()
        self.output.end_input()

    def close(self) -> None:
        self._finish()


class PrintSink(SinkOperator):
    """One line per record (``str(record)``) on stdout, prefixed as Flink's PrintSinkFunction:
    ``"{identifier}:{i+1}> "`` / ``"{i+1}> "`` when parallelism > 1, ``"{identifier}> "`` /
    nothing otherwise. Flushed after every batch and at end of input."""

    def __init__(self, spec: PrintSinkSpec, stream=None):
        self.identifier = spec.prefix or ""
        self.stream = stream

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        prefix = self.identifier
        if ctx.parallelism > 1:
            prefix = f"{prefix}:{ctx.subtask_index + 1}" if prefix else f"{ctx.subtask_index + 1}"
        self.prefix = f"{prefix}> " if prefix else ""

    def process_batch(self, batch: Batch) -> None:
        rows = batch.rows()
        if not rows:
            return
        stream = self.stream or sys.stdout
        p = self.prefix
        stream.write("".join([f"{p}{r}\n" for r in rows]))
        stream.flush()

    def end_input(self) -> None:
        (self.stream or sys.stdout).flush()
        self.output.end_input()


#: Rows' Arrow bytes a collect sink lets pile up behind the send in flight before a batch waits
#: for it (backpressure)
COLLECT_PENDING_BYTES = 8 << 20


class CollectSink(SinkOperator):
    """Sends every batch to the JobMaster as an Arrow IPC stream (kind metadata included;
    decode with ``yarnflink.common.records.records_from_ipc``), kind "collect".

    Where the task offers asynchronous sends (``ctx.send_to_coordinator_later``), at most one
    send is in flight and the task does not wait for it: the batches that arrive meanwhile go
    out together, as one IPC stream of several batches, when it returns (one RPC per batch,
    waited for, cost more than the job's work in small-result jobs). A batch waits for the
    send in flight once ``COLLECT_PENDING_BYTES`` are pending. ``end_input`` and every
    checkpoint (``prepare_snapshot_pre_barrier``) wait until everything before them is sent,
    as when each send was waited for; a failed send fails the task at the next batch or at
    the latest there. Without asynchronous sends each batch is sent and waited for."""

    def __init__(self, spec: CollectSinkSpec):
        self._lock = threading.Lock()
        self._pending: list[pa.RecordBatch] = []
        self._pending_bytes = 0
        self._scheduled = False  # a send is scheduled that has not taken the pending batches yet
        self._last: Future | None = None  # the latest send scheduled

    def process_batch(self, batch: Batch) -> None:
        if not len(batch):
            return
        later = self.ctx.send_to_coordinator_later
        if later is None:
            self.ctx.send_to_coordinator("collect", to_ipc_bytes(batch.arrow()))
            return
        last = self._last
        if last is not None and last.done():
            last.result()  # raises a failed send's error
        rb = batch.arrow()
        with self._lock:
            self._pending.append(rb)
            self._pending_bytes += rb.nbytes
            if not self._scheduled:
                self._scheduled = True
                self._last = later("collect", self._take)
            last = self._last if self._pending_bytes >= COLLECT_PENDING_BYTES else None
        if last is not None:
            last.result()

    def _take(self) -> list[bytes]:
        """The pending batches as IPC streams (one per run of batches of one schema, of at most
        ``COLLECT_PENDING_BYTES`` unless one batch is larger); called when the scheduled send's
        turn comes."""
        with self._lock:
            batches, self._pending, self._pending_bytes, self._scheduled = self._pending, [], 0, False
        payloads: list[bytes] = []
        run: list[pa.RecordBatch] = []
        size = 0
        for rb in batches:
            if run and (
                size + rb.nbytes > COLLECT_PENDING_BYTES or not rb.schema.equals(run[0].schema, check_metadata=True)
            ):
                payloads.append(batches_to_ipc_bytes(run))
                run, size = [], 0
            run.append(rb)
            size += rb.nbytes
        if run:
            payloads.append(batches_to_ipc_bytes(run))
        return payloads

    def flush(self) -> None:
        """Wait until every batch so far is sent (raises a failed send's error)."""
        last = self._last
        if last is not None:
            last.result()

    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        self.flush()

    def end_input(self) -> None:
        self.flush()
        super().end_input()


class DiscardingSink(SinkOperator):
    """Drops every record; counts them (Flink's DiscardingSink)."""

    def __init__(self, spec: DiscardingSinkSpec):
        self.records = 0

    def process_batch(self, batch: Batch) -> None:
        self.records += len(batch)
