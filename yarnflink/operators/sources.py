"""Sources: collection, sequence, files (fsspec + pyarrow)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from yarnflink.common.records import KIND_ROW, KIND_SCALAR, Batch, with_kind
from yarnflink.operators.base import OperatorContext, SourceOperator
from yarnflink.operators.checkpointed import CheckpointedSplits
from yarnflink.operators.specs import CollectionSourceSpec, FileSourceSpec, SequenceSourceSpec

SOURCE_BATCH_ROWS = 65536

#: with checkpointing, sources emit smaller batches: a barrier goes in between batches
CHECKPOINTING_BATCH_ROWS = 1024

_SEQ_SCHEMA = pa.schema([pa.field("f0", pa.int64())], metadata={b"yarnflink.kind": KIND_SCALAR.encode()})


class SourceStateError(ValueError):
    """Restored source state this source cannot continue from."""


def range_owner_splits(num_splits: int, parallelism: int, index: int) -> range:
    """The splits subtask ``index`` owns when ``num_splits`` contiguous splits are spread over
    ``parallelism`` subtasks: a contiguous range (as key groups are)."""
    return range(index * num_splits // parallelism, (index + 1) * num_splits // parallelism)


class _SplitSource(SourceOperator):
    """A source whose input is cut into splits whose identity does not depend on the parallelism
    (Flink's source splits): sequences and collections into a fixed number of splits (the max
    parallelism at the first start, then the number in the restored state), files one split per
    file. ``self.progress`` maps each split this subtask owns to how far it is read; the task
    snapshots between batches, so progress counts the batch being pushed as emitted. The
    snapshot (``CheckpointedSplits``) restores at any parallelism: every split to one subtask.
    Every subtask snapshots all its splits (``_plan`` runs before the first snapshot, read or
    not), so after a restore a split missing from the state was owned by a subtask that had
    finished: it is done."""

    num_splits = 0
    _planned = False
    batch_rows: int  # set by each kind of source

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        self._splits = CheckpointedSplits(ctx)
        self.progress: dict = {}
        if self._splits.enabled:
            self.batch_rows = min(self.batch_rows, CHECKPOINTING_BATCH_ROWS)

    def split_entries(self) -> list:
        raise NotImplementedError

    def _plan(self) -> None:
        """Decides (once) the splits this subtask owns and how far each was read."""
        raise NotImplementedError

    def snapshot_state(self, checkpoint_id: int, timestamp: int, factory: Any) -> list:
        return self._splits.snapshot(self.split_entries(), checkpoint_id, timestamp, factory)

    def _restored_counted_splits(self, kind: str) -> tuple[int, dict[int, int] | None]:
        """``(number of splits, split -> rows emitted)`` of a sequence or collection: from the
        restored entries, else the max parallelism and None (nothing restored)."""
        entries = self._splits.restored
        if not entries:
            return max(1, self.ctx.max_parallelism), None
        if (
            any(not (isinstance(e, tuple) and len(e) == 4 and e[0] == kind) for e in entries)
            or len({e[1] for e in entries}) != 1
        ):
            raise SourceStateError(
                f"{type(self).__name__}: the restored state is not the split state of a "
                f"{kind} source (was the operator uid given to another source?)"
            )
        return int(entries[0][1]), {int(e[2]): int(e[3]) for e in entries}

    def _legacy_position(self) -> Any:
        """The one position of an older checkpoint (None: none), valid at unchanged parallelism."""
        legacy = self._splits.legacy
        if not legacy:
            return None
        if len(legacy) != 1:
            raise SourceStateError(
                f"{type(self).__name__} subtask {self.ctx.subtask_index}: the checkpoint holds the read position "
                f"of an older yarnflink version (one per subtask), which restores only at the parallelism it was "
                f"taken with; this subtask got {len(legacy)} positions. Restore it at its original parallelism, "
                f"take a new savepoint, then change the parallelism"
            )
        return legacy[0]


class CollectionSource(_SplitSource):
    """Split k (of n) holds the items whose index is k mod n; subtask i owns the splits k with
    ``k % parallelism == i`` and emits its items in index order (``items[i::parallelism]`` when n
    is a multiple of the parallelism or at most the number of items)."""

    def __init__(self, spec: CollectionSourceSpec, batch_rows: int = SOURCE_BATCH_ROWS):
        self.items = list(spec.items)
        self.batch_rows = batch_rows

    def split_entries(self) -> list:
        self._plan()
        return [("items", self.num_splits, k, off) for k, off in sorted(self.progress.items())]

    def _plan(self) -> None:
        if self._planned:
            return
        p, i = self.ctx.parallelism, self.ctx.subtask_index
        if self._legacy_position() is not None:
            raise SourceStateError(
                "CollectionSource: the checkpoint holds the read position of an older yarnflink version, which "
                "cannot be restored by this version; start the job without it"
            )
        n, done = self._restored_counted_splits("items")
        self.num_splits = n
        size = lambda k: len(range(k, len(self.items), n))  # noqa: E731
        self.progress = {k: (0 if done is None else done.get(k, size(k))) for k in range(n) if k % p == i}
        self._planned = True

    def batches(self) -> Iterator[Batch]:
        self._plan()
        n, p, i = self.num_splits, self.ctx.parallelism, self.ctx.subtask_index
        left: Any
        if not any(self.progress.values()) and (n % p == 0 or len(self.items) <= n):
            left = range(i, len(self.items), p)  # the same items, without sorting
        else:
            left = sorted(j for k in self.progress for j in range(k + n * self.progress[k], len(self.items), n))
        for a in range(0, len(left), self.batch_rows):
            chunk = left[a : a + self.batch_rows]
            for j in chunk:
                self.progress[j % n] += 1
            yield Batch.from_rows([self.items[j] for j in chunk])


def sequence_split(start: int, end: int, parallelism: int, index: int) -> tuple[int, int]:
    """Piece ``index`` ``[lo, hi)`` of ``[start, end]`` cut into ``parallelism`` contiguous pieces."""
    n = max(end - start + 1, 0)
    return start + index * n // parallelism, start + (index + 1) * n // parallelism


class SequenceSource(_SplitSource):
    """``[start, end]`` inclusive, cut into n contiguous splits; subtask i owns a contiguous range
    of them (``range_owner_splits``); int64 Arrow batches (scalar records)."""

    def __init__(self, spec: SequenceSourceSpec, batch_rows: int = SOURCE_BATCH_ROWS):
        self.start, self.end = int(spec.start), int(spec.end)
        self.batch_rows = batch_rows

    def split_entries(self) -> list:
        self._plan()
        return [("seq", self.num_splits, k, off) for k, off in sorted(self.progress.items())]

    def _plan(self) -> None:
        if self._planned:
            return
        p, i = self.ctx.parallelism, self.ctx.subtask_index
        legacy = self._legacy_position()
        done: dict[int, int] | None
        if legacy is not None:  # older state: the piece of [start, end] at this parallelism = split i of p
            lo, _ = sequence_split(self.start, self.end, p, i)
            n, done = p, {i: max(0, int(legacy) - lo)}
            owned: Any = [i]
        else:
            n, done = self._restored_counted_splits("seq")
            owned = range_owner_splits(n, p, i)
        self.num_splits = n

        def size(k: int) -> int:
            lo, hi = sequence_split(self.start, self.end, n, k)
            return hi - lo

        self.progress = {k: (0 if done is None else done.get(k, size(k))) for k in owned}
        self._planned = True

    def batches(self) -> Iterator[Batch]:
        self._plan()
        n = self.num_splits
        # what is left of each owned split, in order; a batch may span adjacent splits
        todo = []
        for k in self.progress:
            lo, hi = sequence_split(self.start, self.end, n, k)
            if lo + self.progress[k] < hi:
                todo.append((k, lo + self.progress[k], hi))
        pieces: list[tuple[int, int, int]] = []
        rows = 0
        for k, lo, hi in todo:
            while lo < hi:
                b = min(hi, lo + self.batch_rows - rows)
                pieces.append((k, lo, b))
                rows += b - lo
                lo = b
                if rows == self.batch_rows:
                    yield self._emit(pieces)
                    pieces, rows = [], 0
        if pieces:
            yield self._emit(pieces)

    def _emit(self, pieces: list[tuple[int, int, int]]) -> Batch:
        for k, a, b in pieces:
            self.progress[k] += b - a
        if len(pieces) == 1:
            arr = np.arange(pieces[0][1], pieces[0][2], dtype=np.int64)
        else:
            arr = np.concatenate([np.arange(a, b, dtype=np.int64) for _, a, b in pieces])
        return Batch.from_arrow(pa.RecordBatch.from_arrays([pa.array(arr)], schema=_SEQ_SCHEMA))


def list_files(path: str, storage_options: dict | None = None) -> tuple[object, list[str]]:
    """``(fs, sorted files)``: the file itself, or every file below a directory, skipping
    hidden/bookkeeping files whose name starts with ``.`` or ``_`` (Flink's default filter)."""
    import fsspec  # deferred: fsspec loads on the first file system use

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


class FileSource(_SplitSource):
    """Records are dicts (one per row): batches carry ``yarnflink.kind=row``. One split per file
    (by path); file i of the sorted list goes to subtask ``i % parallelism``; its progress is
    ``(rows emitted, finished)``. After a restore a file that is not in the state is not read
    (its subtask had finished, or the file is new: as Flink's bounded FileSource, the files are
    those listed at the first start)."""

    def __init__(self, spec: FileSourceSpec, batch_rows: int = SOURCE_BATCH_ROWS):
        if spec.format not in ("parquet", "csv", "jsonl", "text"):
            raise ValueError(f"FileSource: unknown format {spec.format!r} (parquet, csv, jsonl, text)")
        self.spec = spec
        self.batch_rows = batch_rows

    def my_files(self) -> list[str]:
        fs, files = list_files(self.spec.path, self.spec.storage_options)
        self._fs = fs
        return file_splits(files, self.ctx.parallelism, self.ctx.subtask_index)

    def split_entries(self) -> list:
        self._plan()
        return [("file", path, rows, finished) for path, (rows, finished) in self.progress.items()]

    def _plan(self) -> None:
        if not self._planned:
            self._files = self.my_files()
            self.progress = self._restored_progress(self._files)
            self._planned = True

    def _restored_progress(self, files: list[str]) -> dict[str, tuple[int, bool]]:
        legacy = self._legacy_position()
        if legacy is not None:  # older state: (index of the file in this subtask's split, rows emitted)
            start_file, skip = legacy
            return {
                f: ((0, True) if fi < start_file else (int(skip), False) if fi == start_file else (0, False))
                for fi, f in enumerate(files)
            }
        restored: dict[str, tuple[int, bool]] = {}
        for e in self._splits.restored:
            if not (isinstance(e, tuple) and len(e) == 4 and e[0] == "file"):
                raise SourceStateError(
                    "FileSource: the restored state is not the split state of a file source "
                    "(was the operator uid given to another source?)"
                )
            restored[e[1]] = (int(e[2]), bool(e[3]))
        absent = (0, True) if restored else (0, False)
        return {f: restored.get(f, absent) for f in files}

    def _pushed_down(self, files: list[str]) -> bool:
        """Whether the one operator chained after this source reads ``files`` itself (a BATCH
        Spark step, ``yarnflink.operators.spark``: ``accept_files``)."""
        out = getattr(self, "output", None)
        targets, networks = getattr(out, "targets", None), getattr(out, "networks", None)
        if not files or not targets or len(targets) != 1 or networks:
            return False
        accept = getattr(targets[0], "accept_files", None)
        return bool(accept is not None and accept(self.spec.format, files, self._fs))

    def _read(self, fs, path: str) -> Iterator[pa.RecordBatch]:
        fmt = self.spec.format
        with fs.open(path, "rb") as f:
            if fmt == "parquet":
                import pyarrow.parquet as pq  # deferred: pyarrow's Parquet reader/writer, for that format only

                yield from pq.ParquetFile(f).iter_batches(batch_size=self.batch_rows)
            elif fmt == "text":  # StreamFormat.text_line_format(): one str record per line
                lines = f.read().decode("utf-8").splitlines()
                for i in range(0, len(lines), self.batch_rows):
                    yield pa.record_batch([pa.array(lines[i : i + self.batch_rows], pa.string())], names=["f0"])
            elif fmt == "csv":
                import pyarrow.csv as pcsv  # deferred: pyarrow's CSV reader/writer, for that format only

                reader = pcsv.open_csv(f, read_options=pcsv.ReadOptions(block_size=8 << 20))
                yield from _rechunk(reader, self.batch_rows)
            else:
                import pyarrow.json as pjson  # deferred: pyarrow's JSON reader, for that format only

                reader = pjson.open_json(f, read_options=pjson.ReadOptions(block_size=8 << 20))
                yield from _rechunk(reader, self.batch_rows)

    def batches(self) -> Iterator[Batch]:
        self._plan()
        files = self._files
        if all(v == (0, False) for v in self.progress.values()) and self._pushed_down(files):
            self.progress = {f: (0, True) for f in files}
            return
        for path in files:
            skip, finished = self.progress[path]
            if finished:
                continue
            done = 0
            for rb in self._read(self._fs, path):
                if done + rb.num_rows <= skip:
                    done += rb.num_rows
                    continue
                if done < skip:
                    rb = rb.slice(skip - done)
                    done = skip
                if rb.num_rows:
                    done += rb.num_rows
                    self.progress[path] = (done, False)
                    yield Batch.from_arrow(with_kind(rb, KIND_SCALAR if self.spec.format == "text" else KIND_ROW))
            self.progress[path] = (done, True)
