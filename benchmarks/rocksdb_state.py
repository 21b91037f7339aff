"""Keyed state larger than memory on the ``rocksdb`` backend (docs/PERFORMANCE.md has the figures):
one process, one backend (all 128 key groups), ``GB`` gigabytes of value state (one value of
``VALUE_BYTES`` random bytes per key) written through the state API as a task would (one
``set_current_key`` and one ``update`` per record), then random reads of existing keys, then one
full snapshot to a local checkpoint directory and its restore into a fresh backend of half the key
groups. The memory RocksDB may use is ``state.backend.rocksdb.memory.fixed-per-tm`` (``MEMORY``).
Each phase prints its own peak RSS (``VmHWM``, reset at the phase's start), the RSS after it
(anonymous and file-backed pages) and what the shared RocksDB cache holds.

Snapshots: a full canonical one (a savepoint's factory) and an incremental checkpoint (SST files),
each then restored (half the key groups) into a fresh backend; ``--no-full`` /
``--no-incremental`` / ``--no-snapshot`` leave them out.

    python -m benchmarks.rocksdb_state [GB] [MEMORY] [--no-full] [--no-incremental] [--no-snapshot]
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile
import time

from yarnflink.common.config import parse_memory
from yarnflink.common.keygroups import key_group_ids
from yarnflink.state.descriptors import ValueStateDescriptor
from yarnflink.state.handles import KeyGroupRange
from yarnflink.state.rocksdb import RocksDBKeyedStateBackend, RocksDBMemory, _shared_cache, release_free_memory

VALUE_BYTES = 1000


def _status() -> dict[str, float]:
    """/proc/self/status's memory lines, in MB (VmHWM: the peak since ``_reset_peak``)."""
    out: dict[str, float] = {}
    with open("/proc/self/status") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[name] = int(rest.split()[0]) / 1024
    return out


def _reset_peak() -> None:
    """Start a new phase's peak: VmHWM back to the current RSS (Linux's ``clear_refs`` 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


_peaks: list[float] = []


def _phase(memory: RocksDBMemory) -> str:
    """The phase's peak RSS, the RSS now (anonymous + file-backed), and what RocksDB's shared
    cache holds (usage: blocks and the memtables' reservations; pinned: in use by readers)."""
    st = _status()
    _peaks.append(st.get("VmHWM", 0))
    cache, wbm = _shared_cache(memory)
    return (
        f"phase peak RSS {st.get('VmHWM', 0):.0f} MB (run's peak {max(_peaks):.0f} MB); RSS now "
        f"{st.get('VmRSS', 0):.0f} MB = {st.get('RssAnon', 0):.0f} anon + {st.get('RssFile', 0):.0f} file; "
        f"cache {cache.get_usage() / 2**20:.0f} MB ({cache.get_pinned_usage() / 2**20:.0f} pinned), "
        f"memtables {wbm.get_usage() / 2**20:.0f} MB; load {os.getloadavg()[0]:.2f}"
    )


def _du(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    gb = float(args[0]) if args else 3.0
    memory_bytes = parse_memory(args[1]) if len(args) > 1 else 256 << 20
    kinds = [k for k in ("full", "incremental") if f"--no-{k}" not in sys.argv and "--no-snapshot" not in sys.argv]
    memory = RocksDBMemory(fixed_per_tm=memory_bytes)
    n = int(gb * (1 << 30) / VALUE_BYTES)
    root = tempfile.mkdtemp(prefix="yarnflink-bench-rocksdb-")
    print(
        f"{gb:g} GB = {n} keys of {VALUE_BYTES} B, RocksDB memory {memory_bytes >> 20} MB, load {os.getloadavg()[0]:.2f}"
    )
    print(f"start: {_phase(memory)}", flush=True)
    b = RocksDBKeyedStateBackend(
        128, KeyGroupRange(0, 127), local_dir=root, memory=memory, incremental="incremental" in kinds
    )
    try:
        state = b.get_partitioned_state(ValueStateDescriptor("v"))
        payload = os.urandom(VALUE_BYTES * 64)
        _reset_peak()
        t = time.perf_counter()
        for start in range(0, n, 8192):  # key groups computed per batch, as a keyed operator does
            keys = list(range(start, min(n, start + 8192)))
            for i, kg in zip(keys, key_group_ids(keys, 128).tolist()):
                b.set_current_key(i, kg)
                off = (i * 13) % (VALUE_BYTES * 63)
                state.update(payload[off : off + VALUE_BYTES])
            if start % (1 << 20) == 0 and start:
                print(f"  {start} written, {time.perf_counter() - t:.0f} s: {_phase(memory)}", flush=True)
        b.set_current_key(-1)  # the last key's write
        dt = time.perf_counter() - t
        print(
            f"write: {n / dt / 1e3:.0f}k records/s, {gb * 1024 / dt:.0f} MB/s, {dt:.0f} s; "
            f"store {_du(b.path) / 2**30:.2f} GB; {_phase(memory)}",
            flush=True,
        )
        rnd = random.Random(1)
        reads = min(n, 300_000)
        keys = [rnd.randrange(n) for _ in range(reads)]
        kgs = key_group_ids(keys, 128).tolist()
        _reset_peak()
        t = time.perf_counter()
        for k, kg in zip(keys, kgs):
            b.set_current_key(k, kg)
            assert state.value() is not None
        dt = time.perf_counter() - t
        print(f"random read: {reads / dt / 1e3:.0f}k records/s; {_phase(memory)}", flush=True)
        del keys, kgs
        t = time.perf_counter()
        release_free_memory()
        dt = time.perf_counter() - t
        print(f"malloc_trim ({dt * 1000:.0f} ms): {_phase(memory)}", flush=True)
        if kinds:
            from yarnflink.checkpoint.storage import FsCheckpointStorage, make_reader

            storage = FsCheckpointStorage(f"file://{root}/checkpoints", "job")
            storage.initialize()
            for cid, kind in enumerate(kinds, start=1):
                # a savepoint's factory takes no shared state: the backend writes canonical rows
                target = f"{root}/savepoint-{cid}"
                factory = (
                    storage.stream_factory(cid)
                    if kind == "incremental"
                    else storage.savepoint_stream_factory(f"file://{target}")
                )
                _reset_peak()
                t = time.perf_counter()
                result = b.snapshot(cid, 0, factory).result()
                dt = time.perf_counter() - t
                size = sum(h.state_size for h in result.keyed_handles)
                print(
                    f"{kind} snapshot: {dt:.1f} s, {len(result.keyed_handles)} handles, {size / 2**30:.2f} GB; "
                    f"{_phase(memory)}",
                    flush=True,
                )
                if kind == kinds[-1]:
                    b.dispose()  # (its store's disk; what remains restores from the snapshot)
                r = RocksDBKeyedStateBackend(128, KeyGroupRange(0, 63), local_dir=root, memory=memory)
                _reset_peak()
                t = time.perf_counter()
                count = r.restore(result.keyed_handles, make_reader())
                dt = time.perf_counter() - t
                print(
                    f"restore of half the key groups from the {kind} snapshot: {count} entries in {dt:.1f} s; "
                    f"{_phase(memory)}",
                    flush=True,
                )
                r.dispose()
                shutil.rmtree(target, ignore_errors=True)
        print(f"load average after {os.getloadavg()[0]:.2f}; the run's peak RSS {max(_peaks):.0f} MB")
    finally:
        b.dispose()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
