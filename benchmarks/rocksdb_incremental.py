"""Incremental checkpoints of the ``rocksdb`` backend (docs/PERFORMANCE.md has the figures): 100,000
keys of 1,000 random bytes (~100 MB), one full canonical snapshot, then incremental checkpoints to a
local checkpoint directory, each confirmed, with 1% of the keys rewritten between two.

    python -m benchmarks.rocksdb_incremental
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

from yarnflink.checkpoint.storage import FsCheckpointStorage
from yarnflink.common.keygroups import key_group_ids
from yarnflink.state.descriptors import ValueStateDescriptor
from yarnflink.state.rocksdb import RocksDBKeyedStateBackend

N = 100_000


def main() -> None:
    tmp = tempfile.mkdtemp(prefix="yarnflink-bench-rocksdb-incr-")
    storage = FsCheckpointStorage(f"file://{tmp}/chk", "job")
    storage.initialize()
    b = RocksDBKeyedStateBackend(128, range(128), local_dir=f"{tmp}/local", incremental=True)
    try:
        v = b.get_partitioned_state(ValueStateDescriptor("v"))
        payload = os.urandom(64_000)
        keys = list(range(N))
        kgs = key_group_ids(keys, 128).tolist()

        def write(selected: list[int], tag: int) -> None:
            for k in selected:
                b.set_current_key(k, kgs[k])
                off = (k * 7 + tag) % 63_000
                v.update(payload[off : off + 1000])

        write(keys, 0)
        t = time.perf_counter()
        full = b.snapshot(1).result()
        size = sum(h.state_size for h in full.keyed_handles)
        print(f"full canonical snapshot: {size >> 20} MB in {time.perf_counter() - t:.1f} s")
        for c in range(2, 6):
            t = time.perf_counter()
            h = b.snapshot(c, 0, storage.stream_factory(c)).result().keyed
            took = time.perf_counter() - t
            print(
                f"incremental checkpoint {c}: wrote {h.checkpointed_size >> 10} KB, refers to "  # type: ignore[union-attr]
                f"{h.state_size >> 20} MB in {len(h.shared)} SST files, {took:.2f} s"  # type: ignore[union-attr]
            )
            b.notify_checkpoint_complete(c)
            start = (c * 1000) % N
            write(keys[start : start + N // 100], c)  # 1% of the keys
        print(f"load average {os.getloadavg()[0]:.2f}")
    finally:
        b.dispose()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
