"""Sources: collection, sequence, files (fsspec + pyarrow)."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from yarnflink.common.records import KIND_ROW, KIND_SCALAR, Batch, with_kind
from yarnflink.operators.base import OperatorContext, SourceOperator
from yarnflink.operators.checkpointed import CheckpointedValue
from yarnflink.operators.specs import CollectionSourceSpec, FileSourceSpec, SequenceSourceSpec

SOURCE_BATCH_ROWS = 65536

#: with checkpointing, sources emit smaller batches: a barrier goes in between batches
CHECKPOINTING_BATCH_ROWS = 1024

_SEQ_SCHEMA = pa.schema([pa.field("f0", pa.int64())], metadata={b"yarnflink.kind": KIND_SCALAR.encode()})


class _CheckpointedSource(SourceOperator):
    """A source whose read position (``self.position``, any picklable value) is checkpointed: the
    task snapshots between batches, so the position counts the batch being pushed as emitted."""

    position: Any = None

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        self._checkpointed = CheckpointedValue(ctx, "source-position")
        self.restored_position = self._checkpointed.restored[0] if self._checkpointed.restored else None
        if self._checkpointed.enabled:
            self.batch_rows = min(self.batch_rows, CHECKPOINTING_BATCH_ROWS)

    def snapshot_state(self, checkpoint_id: int, timestamp: int, factory: Any) -> list:
        return self._checkpointed.snapshot(self.position, checkpoint_id, timestamp, factory)


class CollectionSource(_CheckpointedSource):
    """Subtask i emits ``items[i::parallelism]`` as row batches."""

    def __init__(self, spec: CollectionSourceSpec, batch_rows: int = SOURCE_BATCH_ROWS):
        self.items = list(spec.items)
        self.batch_rows = batch_rows

    def batches(self) -> Iterator[Batch]:
        mine = self.items[self.ctx.subtask_index :: self.ctx.parallelism]
        start = int(self.restored_position or 0)
        for i in range(start, len(mine), self.batch_rows):
            self.position = min(i + self.batch_rows, len(mine))
            yield Batch.from_rows(mine[i : i + self.batch_rows])


def sequence_split(start: int, end: int, parallelism: int, index: int) -> tuple[int, int]:
    """Subtask ``index``'s contiguous piece ``[lo, hi)`` of ``[start, end]``."""
    n = max(end - start + 1, 0)
    return start + index * n // parallelism, start + (index + 1) * n // parallelism


class SequenceSource(_CheckpointedSource):
    """``[start, end]`` inclusive, split contiguously; int64 Arrow batches (scalar records)."""

    def __init__(self, spec: SequenceSourceSpec, batch_rows: int = SOURCE_BATCH_ROWS):
        self.start, self.end = int(spec.start), int(spec.end)
        self.batch_rows = batch_rows

    def batches(self) -> Iterator[Batch]:
        lo, hi = sequence_split(self.start, self.end, self.ctx.parallelism, self.ctx.subtask_index)
        if self.restored_position is not None:
            lo = max(lo, int(self.restored_position))
        step = self.batch_rows
        for a in range(lo, hi, step):
            b = min(a + step, hi)
            self.position = b
            arr = pa.array(np.arange(a, b, dtype=np.int64))
            yield Batch.from_arrow(pa.RecordBatch.from_arrays([arr], schema=_SEQ_SCHEMA))


def list_files(path: str, storage_options: dict | None = None) -> tuple[object, list[str]]:
    """``(fs, sorted files)``: the file itself, or every file below a directory, skipping
    hidden/bookkeeping files whose name starts with ``.`` or ``_`` (Flink's default filter)."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
    if fs.isdir(root):
        files = [
            f
            for f in fs.find(root)
            if not any(part.startswith((".", "_")) for part in f[len(root.rstrip("/")) :].split("/") if part)
        ]
    elif fs.exists(root):
        files = [root]
    else:
        raise FileNotFoundError(f"FileSource: {path} does not exist")
    return fs, sorted(files)


def file_splits(files: list[str], parallelism: int, index: int) -> list[str]:
    """Split i (= the i-th file, sorted) goes to subtask ``i % parallelism``."""
    return [f for i, f in enumerate(files) if i % parallelism == index]


def _rechunk(batches, rows: int) -> Iterator[pa.RecordBatch]:
    """Re-chunk a stream of RecordBatches (one schema) into batches of about ``rows`` rows."""
    pending: list[pa.RecordBatch] = []
    count = 0
    for rb in batches:
        if rb.num_rows == 0:
            continue
        pending.append(rb)
        count += rb.num_rows
        if count >= rows:
            merged = pa.concat_batches(pending) if len(pending) > 1 else pending[0]
            for i in range(0, merged.num_rows - merged.num_rows % rows, rows):
                yield merged.slice(i, rows)
            rest = merged.num_rows % rows
            pending = [merged.slice(merged.num_rows - rest)] if rest else []
            count = rest
    if count:
        yield pa.concat_batches(pending) if len(pending) > 1 else pending[0]


class FileSource(_CheckpointedSource):
    """Records are dicts (one per row): batches carry ``yarnflink.kind=row``."""

    def __init__(self, spec: FileSourceSpec, batch_rows: int = SOURCE_BATCH_ROWS):
        if spec.format not in ("parquet", "csv", "jsonl"):
            raise ValueError(f"FileSource: unknown format {spec.format!r} (parquet, csv, jsonl)")
        self.spec = spec
        self.batch_rows = batch_rows

    def my_files(self) -> list[str]:
        fs, files = list_files(self.spec.path, self.spec.storage_options)
        self._fs = fs
        return file_splits(files, self.ctx.parallelism, self.ctx.subtask_index)

    def _read(self, fs, path: str) -> Iterator[pa.RecordBatch]:
        fmt = self.spec.format
        with fs.open(path, "rb") as f:
            if fmt == "parquet":
                import pyarrow.parquet as pq

                yield from pq.ParquetFile(f).iter_batches(batch_size=self.batch_rows)
            elif fmt == "csv":
                import pyarrow.csv as pcsv

                reader = pcsv.open_csv(f, read_options=pcsv.ReadOptions(block_size=8 << 20))
                yield from _rechunk(reader, self.batch_rows)
            else:
                import pyarrow.json as pjson

                reader = pjson.open_json(f, read_options=pjson.ReadOptions(block_size=8 << 20))
                yield from _rechunk(reader, self.batch_rows)

    def batches(self) -> Iterator[Batch]:
        files = self.my_files()
        # position: (index of the file in this subtask's split, rows of it already emitted)
        start_file, skip = self.restored_position or (0, 0)
        for fi, path in enumerate(files):
            if fi < start_file:
                continue
            done = 0
            for rb in self._read(self._fs, path):
                if fi == start_file and done + rb.num_rows <= skip:
                    done += rb.num_rows
                    continue
                if fi == start_file and done < skip:
                    rb = rb.slice(skip - done)
                    done = skip
                if rb.num_rows:
                    done += rb.num_rows
                    self.position = (fi, done)
                    yield Batch.from_arrow(with_kind(rb, KIND_ROW))
            self.position = (fi + 1, 0)
