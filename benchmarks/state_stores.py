"""Candidate stores for the ``rocksdb`` keyed state backend, measured as the backend would use
them (docs/STATE_AND_EVENT_TIME.md has the figures and the choice): ``N`` entries whose keys are
a 2-byte key group then a pickled key (Flink's layout), values of ~100 bytes; random writes one at
a time (what a task does per record), random point reads, a full ordered scan, and the time to
take a checkpoint of the store's files.

    python -m benchmarks.state_stores [N]

Stores: ``rocksdict`` (RocksDB; WAL off as Flink has it, a hard-linked checkpoint), ``lmdb`` (a
B+tree in one memory-mapped file; no sync; a write transaction per 1000 writes, since a commit per
write costs a page flush; the checkpoint is ``env.copy``, a full copy), ``sqlite3`` (the standard
library's, WAL journal, ``synchronous=OFF``; the checkpoint is the backup API, a full copy).
"""

from __future__ import annotations

import os
import pickle
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

N = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
BATCH = 1000


def _keys(n: int) -> list[bytes]:
    return [(i % 128).to_bytes(2, "big") + pickle.dumps((f"user-{i}", None)) for i in range(n)]


def _value(i: int) -> bytes:
    return pickle.dumps(("payload", i, "x" * 70))


def _timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _du(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def bench_rocksdict(root: str, keys: list[bytes], order: list[int]) -> dict[str, float]:
    from rocksdict import Checkpoint, Options, Rdict, WriteOptions

    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    db = Rdict(os.path.join(root, "db"), opts)
    wo = WriteOptions()
    wo.disable_wal = True  # type: ignore[method-assign,assignment]  # (a property; the stub says a method)
    db.set_write_options(wo)
    put, get = db.put, db.get
    out = {"write": _timed(lambda: [put(keys[i], _value(i)) for i in order])}
    out["read"] = _timed(lambda: [get(keys[i]) for i in order])
    out["scan"] = _timed(lambda: sum(1 for _ in db.items()))
    db.flush()
    out["checkpoint"] = _timed(lambda: Checkpoint(db).create_checkpoint(os.path.join(root, "chk")))
    out["bytes"] = _du(os.path.join(root, "db"))
    db.close()
    return out


def bench_lmdb(root: str, keys: list[bytes], order: list[int]) -> dict[str, float]:
    import lmdb

    env = lmdb.open(os.path.join(root, "db"), map_size=1 << 34, sync=False, metasync=False, writemap=True)

    def write() -> None:
        for s in range(0, len(order), BATCH):
            with env.begin(write=True) as txn:
                for i in order[s : s + BATCH]:
                    txn.put(keys[i], _value(i))

    out = {"write": _timed(write)}
    with env.begin() as txn:
        out["read"] = _timed(lambda: [txn.get(keys[i]) for i in order])
        out["scan"] = _timed(lambda: sum(1 for _ in txn.cursor()))
    os.makedirs(os.path.join(root, "chk"))
    out["checkpoint"] = _timed(lambda: env.copy(os.path.join(root, "chk"), compact=True))
    out["bytes"] = _du(os.path.join(root, "chk"))
    env.close()
    return out


def bench_sqlite(root: str, keys: list[bytes], order: list[int]) -> dict[str, float]:
    db = sqlite3.connect(os.path.join(root, "db.sqlite"), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=OFF")
    db.execute("CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID")

    def write() -> None:
        for s in range(0, len(order), BATCH):
            db.execute("BEGIN")
            for i in order[s : s + BATCH]:
                db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (keys[i], _value(i)))
            db.execute("COMMIT")

    out = {"write": _timed(write)}
    q = "SELECT v FROM kv WHERE k = ?"
    out["read"] = _timed(lambda: [db.execute(q, (keys[i],)).fetchone() for i in order])
    out["scan"] = _timed(lambda: sum(1 for _ in db.execute("SELECT k, v FROM kv ORDER BY k")))
    dst = sqlite3.connect(os.path.join(root, "chk.sqlite"))
    out["checkpoint"] = _timed(lambda: db.backup(dst))
    out["bytes"] = os.path.getsize(os.path.join(root, "db.sqlite"))
    return out


def main() -> None:
    keys = _keys(N)
    order = list(range(N))
    random.Random(7).shuffle(order)
    print(f"{N} entries, load average {os.getloadavg()[0]:.2f}")
    for name, fn in (("rocksdict", bench_rocksdict), ("lmdb", bench_lmdb), ("sqlite3", bench_sqlite)):
        root = tempfile.mkdtemp(prefix=f"yarnflink-bench-{name}-")
        try:
            r = fn(root, keys, order)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(
            f"{name:10s} write {N / r['write'] / 1e3:7.0f}k/s  read {N / r['read'] / 1e3:7.0f}k/s  "
            f"scan {N / r['scan'] / 1e3:7.0f}k/s  checkpoint {r['checkpoint'] * 1e3:7.1f} ms  "
            f"size {r['bytes'] / 1e6:6.1f} MB"
        )
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
