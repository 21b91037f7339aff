"""Keyed state larger than memory on the ``rocksdb`` backend (docs/PERFORMANCE.md has the figures):
one process, one backend (all 128 key groups), ``GB`` gigabytes of value state (one value of
``VALUE_BYTES`` random bytes per key) written through the state API as a task would (one
``set_current_key`` and one ``update`` per record), then random reads of existing keys, then one
full snapshot to a local checkpoint directory and its restore into a fresh backend of half the key
groups. The memory RocksDB may use is ``state.backend.rocksdb.memory.fixed-per-tm`` (``MEMORY``);
peak RSS is the process's high-water mark (``ru_maxrss``), sampled after each phase.

    python -m benchmarks.rocksdb_state [GB] [MEMORY] [--no-snapshot]
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import sys
import tempfile
import time

from yarnflink.common.config import parse_memory
from yarnflink.common.keygroups import key_group_ids
from yarnflink.state.descriptors import ValueStateDescriptor
from yarnflink.state.handles import KeyGroupRange
from yarnflink.state.rocksdb import RocksDBKeyedStateBackend, RocksDBMemory

VALUE_BYTES = 1000


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _du(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    gb = float(args[0]) if args else 3.0
    memory = parse_memory(args[1]) if len(args) > 1 else 256 << 20
    snapshot = "--no-snapshot" not in sys.argv
    n = int(gb * (1 << 30) / VALUE_BYTES)
    root = tempfile.mkdtemp(prefix="yarnflink-bench-rocksdb-")
    print(f"{gb:g} GB = {n} keys of {VALUE_BYTES} B, RocksDB memory {memory >> 20} MB, load {os.getloadavg()[0]:.2f}")
    b = RocksDBKeyedStateBackend(128, KeyGroupRange(0, 127), local_dir=root, memory=RocksDBMemory(fixed_per_tm=memory))
    try:
        state = b.get_partitioned_state(ValueStateDescriptor("v"))
        payload = os.urandom(VALUE_BYTES * 64)
        t = time.perf_counter()
        for start in range(0, n, 8192):  # key groups computed per batch, as a keyed operator does
            keys = list(range(start, min(n, start + 8192)))
            for i, kg in zip(keys, key_group_ids(keys, 128).tolist()):
                b.set_current_key(i, kg)
                off = (i * 13) % (VALUE_BYTES * 63)
                state.update(payload[off : off + VALUE_BYTES])
        b.set_current_key(-1)  # the last key's write
        dt = time.perf_counter() - t
        print(
            f"write: {n / dt / 1e3:.0f}k records/s, {gb * 1024 / dt:.0f} MB/s; store {_du(b.path) / 2**30:.2f} GB; "
            f"peak RSS {_peak_rss_mb():.0f} MB; load {os.getloadavg()[0]:.2f}"
        )
        rnd = random.Random(1)
        reads = min(n, 300_000)
        keys = [rnd.randrange(n) for _ in range(reads)]
        kgs = key_group_ids(keys, 128).tolist()
        t = time.perf_counter()
        for k, kg in zip(keys, kgs):
            b.set_current_key(k, kg)
            assert state.value() is not None
        dt = time.perf_counter() - t
        print(f"random read: {reads / dt / 1e3:.0f}k records/s; peak RSS {_peak_rss_mb():.0f} MB")
        if snapshot:
            from yarnflink.checkpoint.storage import FsCheckpointStorage, make_reader

            storage = FsCheckpointStorage(f"file://{root}/checkpoints", "job")
            storage.initialize()
            t = time.perf_counter()
            result = b.snapshot(1, 0, storage.stream_factory(1)).result()
            dt = time.perf_counter() - t
            size = sum(h.state_size for h in result.keyed_handles)
            print(
                f"full snapshot: {dt:.1f} s, {len(result.keyed_handles)} files, {size / 2**30:.2f} GB; "
                f"peak RSS {_peak_rss_mb():.0f} MB"
            )
            b.dispose()
            r = RocksDBKeyedStateBackend(
                128, KeyGroupRange(0, 63), local_dir=root, memory=RocksDBMemory(fixed_per_tm=memory)
            )
            t = time.perf_counter()
            count = r.restore(result.keyed_handles, make_reader())
            dt = time.perf_counter() - t
            print(f"restore of half the key groups: {count} entries in {dt:.1f} s; peak RSS {_peak_rss_mb():.0f} MB")
            r.dispose()
        print(f"load average after {os.getloadavg()[0]:.2f}")
    finally:
        b.dispose()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
