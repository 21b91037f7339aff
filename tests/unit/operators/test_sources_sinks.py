import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from yarnflink.common.records import Batch, record_kind, records_from_ipc, records_to_arrow
from yarnflink.operators import specs as S
from yarnflink.operators.factory import create_operator
from yarnflink.operators.sources import file_splits, list_files

from .helpers import ListOutput, make_ctx, run_operator, source_rows


# ----------------------------------------------------------------------------- sources
def test_collection_source_splits_items():
    items = list(range(10))
    parts = [source_rows(S.CollectionSourceSpec(items), i, 3) for i in range(3)]
    assert parts == [items[0::3], items[1::3], items[2::3]]


def test_collection_source_batches_are_rows():
    op = create_operator(S.CollectionSourceSpec([(1, "a")] * 5))
    op.batch_rows = 2
    op.open(make_ctx())
    batches = list(op.batches())
    assert [len(b) for b in batches] == [2, 2, 1] and all(b.has_rows for b in batches)


@pytest.mark.parametrize("start,end,p", [(1, 10, 3), (0, 0, 2), (-5, 200_000, 4), (5, 4, 2), (1, 3, 5)])
def test_sequence_source_contiguous_split(start, end, p):
    parts = [source_rows(S.SequenceSourceSpec(start, end), i, p) for i in range(p)]
    assert [x for part in parts for x in part] == list(range(start, end + 1))
    sizes = [len(part) for part in parts]
    assert max(sizes) - min(sizes) <= 1


def test_sequence_source_batches_are_int64_arrow():
    op = create_operator(S.SequenceSourceSpec(1, 150_000))
    op.open(make_ctx())
    batches = list(op.batches())
    assert [len(b) for b in batches] == [65536, 65536, 150_000 - 2 * 65536]
    for b in batches:
        assert b.has_arrow and not b.has_rows
        rb = b.arrow()
        assert rb.schema.field("f0").type == pa.int64() and record_kind(rb) == "scalar"


def _write_files(root, fmt, nfiles=7, rows_per_file=5):
    os.makedirs(root / "sub", exist_ok=True)
    expected = {}
    for i in range(nfiles):
        sub = root / "sub" if i % 2 else root
        path = sub / f"data-{i}.{fmt}"
        rows = [{"file": i, "n": j, "s": f"v{j}"} for j in range(rows_per_file)]
        t = pa.Table.from_pylist(rows)
        if fmt == "parquet":
            pq.write_table(t, path)
        elif fmt == "csv":
            pcsv.write_csv(t, path)
        else:
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        expected[str(path)] = rows
    (root / "_SUCCESS").write_text("")
    (root / ".hidden").write_text("garbage")
    return expected


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_file_source_splits_cover_every_file_once(tmp_path, fmt):
    expected = _write_files(tmp_path, fmt)
    _, files = list_files(str(tmp_path))
    assert sorted(files) == files and len(files) == 7
    p = 3
    assigned = [f for i in range(p) for f in file_splits(files, p, i)]
    assert sorted(assigned) == sorted(files)
    got = []
    for i in range(p):
        rows = source_rows(S.FileSourceSpec(str(tmp_path), fmt), i, p)
        assert all(isinstance(r, dict) for r in rows)
        got.extend(rows)
    want = [r for rows in expected.values() for r in rows]
    key = lambda r: (r["file"], r["n"])  # noqa: E731
    assert sorted(got, key=key) == sorted(want, key=key)


def test_file_source_single_file_and_kind_row(tmp_path):
    path = tmp_path / "one.parquet"
    pq.write_table(pa.table({"f0": [1, 2, 3]}), path)  # a column named f0 still gives dicts
    assert source_rows(S.FileSourceSpec(str(path), "parquet")) == [{"f0": 1}, {"f0": 2}, {"f0": 3}]
    assert source_rows(S.FileSourceSpec(str(path), "parquet"), 1, 2) == []


def test_file_source_rechunks_large_csv(tmp_path):
    path = tmp_path / "big.csv"
    pcsv.write_csv(pa.table({"x": np.arange(200_000)}), path)
    op = create_operator(S.FileSourceSpec(str(path), "csv"))
    op.open(make_ctx())
    sizes = [len(b) for b in op.batches()]
    assert sum(sizes) == 200_000 and max(sizes) <= 65536


def test_file_source_missing_path(tmp_path):
    op = create_operator(S.FileSourceSpec(str(tmp_path / "nope"), "csv"))
    op.open(make_ctx())
    with pytest.raises(FileNotFoundError):
        list(op.batches())


# ----------------------------------------------------------------------------- sinks
def _sink(tmp_path, fmt, batches, subtask=1, parallelism=2):
    out = tmp_path / "out"
    run_operator(S.FileSinkSpec(str(out), fmt), batches, subtask=subtask, parallelism=parallelism)
    return out / f"part-{subtask}-0.{fmt}"


def test_file_sink_jsonl(tmp_path):
    path = _sink(tmp_path, "jsonl", [[(1, "a"), (2, "b")], [{"k": 1}], [3, "x", None, b"\x01"]])
    lines = path.read_text().splitlines()
    assert [json.loads(x) for x in lines] == [[1, "a"], [2, "b"], {"k": 1}, 3, "x", None, "AQ=="]


def test_file_sink_parquet(tmp_path):
    batches = [[(1, "a"), (2, "b")], Batch.from_arrow(records_to_arrow([(3, "c")]))]
    path = _sink(tmp_path, "parquet", batches, subtask=0, parallelism=1)
    t = pq.read_table(path)
    assert t.column_names == ["f0", "f1"]
    assert t.to_pylist() == [{"f0": 1, "f1": "a"}, {"f0": 2, "f1": "b"}, {"f0": 3, "f1": "c"}]


def test_file_sink_parquet_casts_later_batches(tmp_path):
    rb32 = pa.record_batch({"a": pa.array([1], type=pa.int32())})
    path = _sink(tmp_path, "parquet", [[{"a": 5}], Batch.from_arrow(rb32)])
    assert pq.read_table(path).to_pylist() == [{"a": 5}, {"a": 1}]


def test_file_sink_csv(tmp_path):
    path = _sink(tmp_path, "csv", [[{"word": "a", "n": 1}], [{"word": "b", "n": 2}]])
    assert pcsv.read_csv(path).to_pylist() == [{"word": "a", "n": 1}, {"word": "b", "n": 2}]


def test_file_sink_rejects_unstorable_records(tmp_path):
    with pytest.raises(TypeError, match="use format='jsonl'"):
        _sink(tmp_path, "csv", [[1, "mixed"]])


def test_file_sink_empty(tmp_path):
    assert _sink(tmp_path, "jsonl", []).read_text() == ""
    assert not _sink(tmp_path, "parquet", []).exists()


def test_print_sink(capsys):
    run_operator(S.PrintSinkSpec(), [[1, (2, "a")]], subtask=1, parallelism=2)
    assert capsys.readouterr().out == "2> 1\n2> (2, 'a')\n"
    run_operator(S.PrintSinkSpec(), [["x"]], subtask=0, parallelism=1)
    assert capsys.readouterr().out == "x\n"
    run_operator(S.PrintSinkSpec(prefix="id"), [["x"]], subtask=0, parallelism=3)
    assert capsys.readouterr().out == "id:1> x\n"


def test_collect_sink_sends_ipc_batches():
    sent = []
    op = create_operator(S.CollectSinkSpec())
    op.output = ListOutput()
    op.open(make_ctx(send_to_coordinator=lambda kind, payload: sent.append((kind, payload))))
    op.process_batch(Batch.from_rows([(1, "a"), (2, "b")]))
    op.process_batch(Batch.from_rows([]))
    op.process_batch(Batch.from_rows([{"x": [1, 2]}]))
    op.end_input()
    assert [k for k, _ in sent] == ["collect", "collect"]
    assert records_from_ipc(sent[0][1]) == [(1, "a"), (2, "b")]
    assert records_from_ipc(sent[1][1]) == [{"x": [1, 2]}]


def test_file_source_and_sink_through_fsspec_memory_filesystem():
    import fsspec

    fs = fsspec.filesystem("memory")
    run_operator(S.FileSinkSpec("memory://yf-test/out", "parquet"), [[{"a": 1}, {"a": 2}]], subtask=0, parallelism=2)
    run_operator(S.FileSinkSpec("memory://yf-test/out", "parquet"), [[{"a": 3}]], subtask=1, parallelism=2)
    assert sorted(fs.ls("/yf-test/out", detail=False)) == [
        "/yf-test/out/part-0-0.parquet",
        "/yf-test/out/part-1-0.parquet",
    ]
    rows = source_rows(S.FileSourceSpec("memory://yf-test/out", "parquet"))
    assert rows == [{"a": 1}, {"a": 2}, {"a": 3}]
    fs.rm("/yf-test", recursive=True)


class OneSendAtATime:
    """A coordinator link as the TaskExecutor's: sends run in order on one thread, one at a time;
    a send completes only when the test releases it."""

    def __init__(self) -> None:
        import concurrent.futures
        import threading

        self.pool = concurrent.futures.ThreadPoolExecutor(1)
        self.release = threading.Semaphore(0)
        self.sent: list[bytes] = []
        self.fail = False

    def later(self, kind, payloads):
        assert kind == "collect"

        def send():
            self.release.acquire()
            if self.fail:
                raise ConnectionError("JobMaster gone")
            self.sent.extend(payloads())

        return self.pool.submit(send)


def test_collect_sink_does_not_wait_for_a_send_and_sends_what_piles_up_meanwhile_as_one_payload():
    link = OneSendAtATime()
    op = create_operator(S.CollectSinkSpec())
    op.output = ListOutput()
    op.open(make_ctx(send_to_coordinator_later=link.later))
    op.process_batch(Batch.from_rows([(1, "a")]))  # scheduled; no send returns until released
    op.process_batch(Batch.from_rows([(2, "b")]))
    op.process_batch(Batch.from_rows([(3, "c")]))
    op.process_batch(Batch.from_rows([{"x": 1}]))  # another schema: its own payload
    link.release.release()  # the one scheduled send takes all four
    op.process_batch(Batch.from_rows([(4, "d")]))
    link.release.release()
    link.release.release()
    op.end_input()  # waits for the last one
    # (4, "d") goes with the first send if it came before its take, else in a second: the same
    # payloads either way (its schema differs from {"x": 1}'s)
    assert [records_from_ipc(p) for p in link.sent] == [[(1, "a"), (2, "b"), (3, "c")], [{"x": 1}], [(4, "d")]]


def test_collect_sink_checkpoint_waits_for_the_sends_and_a_failed_send_fails_the_task():
    link = OneSendAtATime()
    op = create_operator(S.CollectSinkSpec())
    op.output = ListOutput()
    op.open(make_ctx(send_to_coordinator_later=link.later))
    op.process_batch(Batch.from_rows([(1, "a")]))
    link.release.release()
    op.prepare_snapshot_pre_barrier(1)
    assert [records_from_ipc(p) for p in link.sent] == [[(1, "a")]]
    link.fail = True
    op.process_batch(Batch.from_rows([(2, "b")]))
    link.release.release()
    with pytest.raises(ConnectionError):
        op.end_input()
