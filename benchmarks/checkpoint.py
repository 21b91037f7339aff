"""Checkpoint benchmark (issue 5 item 10): the duration of a checkpoint of keyed state and the
longest processing stall it causes, to a local directory and to S3 (moto's server on loopback),
and the throughput of a keyed task with a 1-second checkpoint interval against none.

The task is modelled in process, as the Task thread runs it: one thread updates ``ValueState`` of
random keys in batches (``--batch`` updates per batch) on a ``hashmap`` backend
(``HeapKeyedStateBackend``, all 128 key groups) and, when a checkpoint is due, takes the
synchronous part of the snapshot itself (``snapshot_chain`` of a one-operator chain, as
``Task._checkpoint`` does) while the asynchronous part serializes and writes the state in the
background (``FsCheckpointStorage``'s stream factory). The stall is the longest time between the
ends of two consecutive batches while a checkpoint is in progress (its synchronous part
included), next to the longest one without a checkpoint. Where Linux tells (``schedstat``), the
longest stall is split into the task thread's own CPU time, its wait for a core (run queue) and
the rest (waiting for the GIL, or blocked), and the host's steal time of the run is given; a
witness process (``MemoryWitness``) tells whether the machine's memory was slow for everyone
during that stall. The throughput run also reports the
task thread's CPU time per update with and without checkpoints (what they cost the task itself)
and the snapshot thread's CPU per second (what they take from the machine). The storage is
initialized first and keeps one checkpoint, as a job's does.

Full against incremental checkpoints (``--kinds full,incremental``; issue 21): with
``--hot-fraction 0.01`` the updates of each second go to a window of 1% of the keys (a new window
every second), so that a 1-second interval changes 1% of the keys per checkpoint at the task's
full speed. Each row then gives what the checkpoints wrote (``checkpointed_mb``: the whole state
for a full one, the new delta or base for an incremental one) and the time to restore the last
one into a fresh backend (``restore_s``: reading its files and loading them).

    scripts/bench --suite checkpoint [--sizes-mb 100,1000] [--targets local,s3] [--value-bytes 1024]
                  [--kinds full,incremental] [--hot-fraction 0.01] [--throughput-seconds 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from yarnflink.common.keygroups import key_group_of
from yarnflink.state.descriptors import ValueStateDescriptor
from yarnflink.state.heap import HeapKeyedStateBackend
from yarnflink.state.task_state import LazyStreamFactory, snapshot_operators

MAX_PARALLELISM = 128
BUCKET = "yarnflink-bench"


class _CpuTimedExecutor(ThreadPoolExecutor):
    """The snapshot thread, recording the CPU time (``time.thread_time``) of each snapshot: a
    measure of its cost that does not depend on how loaded the machine is. The changelogs that
    the task hands over between checkpoints are applied on the same thread; their CPU time is
    kept apart (``apply_cpu_s``)."""

    def __init__(self) -> None:
        super().__init__(1, thread_name_prefix="bench-snapshot")
        self.cpu_s: list[float] = []
        self.apply_cpu_s: list[float] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future:  # type: ignore[override]
        into = self.apply_cpu_s if getattr(fn, "__name__", "") == "apply" else self.cpu_s

        def timed() -> Any:
            t = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                into.append(time.thread_time() - t)

        return super().submit(timed)


class _KeyedOperator:
    """The stateful operator of the modelled task: one ``ValueState`` of bytes per key."""

    def __init__(self, snapshot_mode: str = "thread", incremental: bool = False) -> None:
        self.executor = _CpuTimedExecutor()
        self.incremental = incremental
        self.backend = HeapKeyedStateBackend(
            MAX_PARALLELISM,
            range(0, MAX_PARALLELISM),
            name="bench",
            snapshot_mode=snapshot_mode,
            executor=self.executor,
            incremental=incremental,
        )
        self.state = self.backend.get_partitioned_state(ValueStateDescriptor("v", "bytes"))

    def snapshot_state(self, checkpoint_id: int, timestamp: int, factory: Any = None) -> list:
        return [self.backend.snapshot(checkpoint_id, timestamp, factory)]


def _schedstat() -> tuple[float, float]:
    """The calling thread's (CPU time on a core, time waiting for one) in seconds (0, 0 where
    Linux's ``schedstat`` is not there)."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
            on_cpu, waiting = f.read().split()[:2]
        return int(on_cpu) / 1e9, int(waiting) / 1e9
    except (OSError, ValueError):
        return 0.0, 0.0


def _steal_s() -> float:
    """The host's steal time so far, all CPUs (seconds; 0 where /proc/stat has none)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK") if len(fields) > 8 else 0.0
    except (OSError, ValueError):
        return 0.0


def _memory_mb(field: str) -> float:
    """This process's ``VmRSS`` (now) or ``VmHWM`` (peak) in MB (Linux), NaN elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def fill(op: _KeyedOperator, num_keys: int, value_bytes: int) -> array[int]:
    """``num_keys`` keys with a random (incompressible) value each; returns their key groups
    (an ``array``, not a list: every full garbage collection would walk a list of a million
    ints, ~70 ms instead of ~25 ms at 1 GB, a cost of the benchmark, not of the modelled job)."""
    kgs = array("i", (key_group_of(k, MAX_PARALLELISM) for k in range(num_keys)))
    b, st = op.backend, op.state
    for start in range(0, num_keys, 4096):
        pool = os.urandom(value_bytes * 4096)
        for i, k in enumerate(range(start, min(start + 4096, num_keys))):
            b.set_current_key(k, kgs[k])
            st.update(pool[i * value_bytes : (i + 1) * value_bytes])
    return kgs


class Storage:
    """A checkpoint directory: ``file://`` under a temporary directory, or ``s3://`` on moto."""

    def __init__(self, target: str, workdir: Path) -> None:
        from yarnflink.checkpoint.storage import FsCheckpointStorage

        self.target = target
        self._proc: subprocess.Popen | None = None
        workdir.mkdir(parents=True, exist_ok=True)
        if target == "local":
            directory, options = f"file://{workdir / 'checkpoints'}", {}
        elif target == "s3":
            endpoint = self._start_moto(workdir)
            directory = f"s3://{BUCKET}/checkpoints"
            options = {
                "endpoint_url": endpoint,
                "key": "testing",
                "secret": "testing",
                "client_kwargs": {"region_name": "us-east-1"},
            }
        else:
            raise SystemExit(f"unknown target {target!r} (local, s3)")
        self.storage = FsCheckpointStorage(directory, "bench" + "0" * 27, storage_options=options)
        self.storage.initialize()  # as the JobMaster does at the start (on S3: the client, its service model)

    def _start_moto(self, workdir: Path) -> str:
        server = Path(sys.executable).parent / "moto_server"
        if not server.exists():
            raise SystemExit("moto_server is not installed (pip install 'moto[server]')")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        log = open(workdir / "moto.log", "wb")
        self._proc = subprocess.Popen(
            [str(server), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT
        )
        endpoint = f"http://127.0.0.1:{port}"
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                client.create_bucket(Bucket=BUCKET)
                return endpoint
            except Exception:  # noqa: BLE001 - not up yet
                if time.monotonic() > deadline or self._proc.poll() is not None:
                    raise
                time.sleep(0.2)

    def close(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=30)


_WITNESS = """
import random, sys, time
buf = bytearray(int(sys.argv[2]) << 20)
for i in range(0, len(buf), 4096):
    buf[i] = 1
pages, rng, out = len(buf) // 4096, random.Random(7), open(sys.argv[1], "w", buffering=1)
while True:
    idx = [rng.randrange(pages) << 12 for _ in range(64)]
    t0, c0 = time.monotonic(), time.thread_time()
    s = sum(buf[i] for i in idx)
    out.write(f"{t0:.4f} {(time.thread_time() - c0) * 1e6:.0f}\\n")
    time.sleep(0.005)
"""


class MemoryWitness:
    """Another process reading 64 random pages of its own memory every 5 ms and logging the CPU
    time each round took (~1 % of a core). The machine's memory slows down for everyone at times
    (seen on this VM: rounds 50-100x their usual time, on a core, with no page fault); its slowdown
    during the task's longest stall tells whether that stall was the machine's or the process's."""

    def __init__(self, workdir: Path, mb: int = 256) -> None:
        self.path = workdir / "witness.log"
        self.proc = subprocess.Popen([sys.executable, "-c", _WITNESS, str(self.path), str(mb)])

    def slowdown(self, start: float, end: float) -> float | None:
        """The slowest round within ``[start, end]`` against the median round (None: no data)."""
        try:
            rounds = [
                (float(t), float(us))
                for t, us in (line.split() for line in self.path.read_text().splitlines() if line.count(" ") == 1)
            ]
        except (OSError, ValueError):
            return None
        inside = [us for t, us in rounds if start <= t <= end]
        if not inside or len(rounds) < 10:
            return None
        return round(max(inside) / max(1.0, _median([us for _, us in rounds])), 1)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


class TaskLoop:
    """The modelled task thread: batches of state updates, checkpoints when due."""

    def __init__(
        self,
        op: _KeyedOperator,
        kgs: Sequence[int],
        value_bytes: int,
        batch: int,
        storage: Any,
        hot_fraction: float = 0.0,
    ) -> None:
        self.op, self.kgs, self.batch, self.storage = op, kgs, batch, storage
        #: > 0: each second's updates go to a window of this fraction of the keys
        self.hot = max(1, int(hot_fraction * len(kgs))) if hot_fraction > 0 else 0
        self._window = (-1, 0)  # (second, first key of its window)
        self.last_snapshot: Any = None
        self._notified = 0
        self.value_bytes = value_bytes
        self.rng = random.Random(1)
        self.updates = 0
        self.cpu_s = 0.0  # the task thread's CPU time in the last run
        self.checkpoint_id = 0
        self.in_flight: Future | None = None
        self.durations: list[dict[str, float]] = []
        self.stall_in_checkpoint = 0.0
        #: the longest stall's (task CPU, run-queue wait, the rest) in ms
        self.stall_split_ms: tuple[float, float, float] = (0.0, 0.0, 0.0)
        self.stall_window = (0.0, 0.0)  # its start and end (time.monotonic)
        self.stall_outside = 0.0
        self.gaps_in_checkpoint: list[float] = []
        self.gaps_outside: list[float] = []
        self.window_stalls: list[float] = []

    def _batch(self) -> None:
        b, st, kgs, rng, vb = self.op.backend, self.op.state, self.kgs, self.rng, self.value_bytes
        n = len(kgs)
        pool = os.urandom(vb * self.batch)  # every update writes new, incompressible bytes
        hot = self.hot
        if hot:
            second = int(time.monotonic())
            if self._window[0] != second:
                self._window = (second, rng.randrange(n))
            first = self._window[1]
        for i in range(self.batch):
            k = (first + rng.randrange(hot)) % n if hot else rng.randrange(n)
            b.set_current_key(k, kgs[k])
            st.update(pool[i * vb : (i + 1) * vb])
        self.updates += self.batch

    def _checkpoint(self) -> None:
        self.checkpoint_id += 1
        cid = self.checkpoint_id
        started = time.monotonic()
        cpu0 = time.thread_time()
        storage = self.storage
        factory = (
            LazyStreamFactory(
                lambda: storage.stream_factory(cid), shared_state=True, shared_prefix=storage.shared_url + "/"
            )
            if storage is not None
            else None
        )
        future = snapshot_operators([("bench", self.op)], cid, int(time.time() * 1000), factory)
        sync_s = time.monotonic() - started
        rec: dict[str, float] = {"id": cid, "sync_ms": sync_s * 1000, "sync_cpu_ms": (time.thread_time() - cpu0) * 1000}

        def done(f: Future) -> None:
            rec["total_ms"] = (time.monotonic() - started) * 1000
            try:
                snapshot = f.result()
                self.last_snapshot = snapshot
                rec["state_size"] = snapshot.state_size
                rec["checkpointed_size"] = sum(
                    getattr(h, "checkpointed_size", h.state_size)
                    for st in snapshot.subtask_states.values()
                    for h in st.managed_keyed_state
                )
                if storage is not None and cid > 1:  # one retained checkpoint (num-retained: 1)
                    storage.discard_incomplete(cid - 1)
            except BaseException as e:  # noqa: BLE001 - reported
                rec["error"] = str(e)  # type: ignore[assignment]

        future.add_done_callback(done)
        self.in_flight = future
        self.durations.append(rec)

    def run(self, seconds: float, interval_s: float | None, first_at: float = 0.0, until_checkpoints: int = 0) -> float:
        """Run for ``seconds`` (or until ``until_checkpoints`` have completed); updates per second."""
        start = last = time.monotonic()
        last_sched = _schedstat()
        cpu0 = time.thread_time()
        next_cp = start + first_at if interval_s is not None else None
        self.updates = 0
        while True:
            now = time.monotonic()
            if until_checkpoints:
                if sum(1 for d in self.durations if "total_ms" in d) >= until_checkpoints and (
                    self.in_flight is None or self.in_flight.done()
                ):
                    break
            elif now - start >= seconds:
                break
            checkpointing = self.in_flight is not None and not self.in_flight.done()
            if not checkpointing and self.checkpoint_id > self._notified:  # (the task thread is notified)
                self._notified = self.checkpoint_id
                self.op.backend.notify_checkpoint_complete(self.checkpoint_id)
            if next_cp is not None and now >= next_cp and not checkpointing:
                self._checkpoint()
                next_cp = now + (interval_s or 0)
                checkpointing = True
            self._batch()
            end = time.monotonic()
            gap = end - last
            last = end
            sched = _schedstat()
            on_cpu, run_queue = sched[0] - last_sched[0], sched[1] - last_sched[1]
            last_sched = sched
            if checkpointing or (self.in_flight is not None and not self.in_flight.done()):
                if gap > self.stall_in_checkpoint:  # where the longest stall went
                    self.stall_window = (end - gap, end)
                    self.stall_split_ms = (
                        round(on_cpu * 1000, 1),
                        round(run_queue * 1000, 1),
                        round(max(0.0, gap - on_cpu - run_queue) * 1000, 1),
                    )
                self.stall_in_checkpoint = max(self.stall_in_checkpoint, gap)
                self.gaps_in_checkpoint.append(gap)
                rec = self.durations[-1]
                rec["stall_ms"] = max(rec.get("stall_ms", 0.0), gap * 1000)
            else:
                window = int((end - start) // 1.0)  # the longest gap of every second without a checkpoint
                if window >= len(self.window_stalls):
                    self.window_stalls.extend([0.0] * (window + 1 - len(self.window_stalls)))
                self.window_stalls[window] = max(self.window_stalls[window], gap * 1000)
                self.stall_outside = max(self.stall_outside, gap)
                self.gaps_outside.append(gap)
        if self.in_flight is not None:
            self.in_flight.result()
        self.cpu_s = time.thread_time() - cpu0
        return self.updates / (time.monotonic() - start)

    def cpu_us_per_update(self) -> float:
        """The task thread's CPU time per update in the last run: what checkpoints cost the task
        itself (changelog writes, copies of shared mutable values, GIL hand-overs), apart from the CPU they take from the machine."""
        return 1e6 * self.cpu_s / max(1, self.updates)


def _median(xs: list[float]) -> float:
    return _pct(xs, 0.5)


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def restore_seconds(loop: TaskLoop, storage: Any) -> float:
    """Seconds to restore the last checkpoint into a fresh backend (its files read, loaded)."""
    from yarnflink.checkpoint.storage import make_reader

    snapshot = loop.last_snapshot
    handles = [h for st in snapshot.subtask_states.values() for h in st.managed_keyed_state]
    t = time.monotonic()
    fresh = HeapKeyedStateBackend(MAX_PARALLELISM, range(0, MAX_PARALLELISM), name="restored")
    fresh.restore(handles, make_reader(storage.storage_options))
    took = time.monotonic() - t
    fresh.dispose()
    return took


def bench_size(
    size_mb: int,
    targets: list[str],
    value_bytes: int,
    batch: int,
    checkpoints: int,
    workdir: Path,
    mode: str,
    kind: str = "full",
    hot_fraction: float = 0.0,
) -> list[dict[str, Any]]:
    num_keys = size_mb * 1024 * 1024 // value_bytes
    op = _KeyedOperator(mode, incremental=kind == "incremental")
    t0 = time.monotonic()
    kgs = fill(op, num_keys, value_bytes)
    rss_filled = _memory_mb("VmRSS")
    print(
        f"  {size_mb} MB: {num_keys} keys x {value_bytes} B filled in {time.monotonic() - t0:.1f}s "
        f"(RSS {rss_filled:.0f} MB)",
        flush=True,
    )
    rows = []
    for target in targets:
        storage = Storage(target, workdir / f"{target}-{size_mb}-{mode}-{kind}")
        witness = MemoryWitness(workdir / f"{target}-{size_mb}-{mode}-{kind}")
        try:
            loop = TaskLoop(op, kgs, value_bytes, batch, storage.storage, hot_fraction)
            loop.run(3.0, None)  # the stalls without checkpoints (longest gap per second)
            steal0, t_run = _steal_s(), time.monotonic()
            loop.run(0, 1.0, first_at=0.2, until_checkpoints=checkpoints)
            steal_s, t_run = _steal_s() - steal0, time.monotonic() - t_run
            done = [d for d in loop.durations if "total_ms" in d]
            row = {
                "size_mb": size_mb,
                "target": target,
                "mode": mode,
                "kind": kind,
                "hot_fraction": hot_fraction,
                "keys": num_keys,
                "checkpoints": len(done),
                "state_size_mb": round(_median([d.get("state_size", 0) for d in done]) / 2**20, 1),
                # what each checkpoint wrote (the first one, a base, aside): median and largest
                "checkpointed_mb_median": round(_median([d.get("checkpointed_size", 0) for d in done[1:]]) / 2**20, 1),
                "checkpointed_mb_max": round(max([d.get("checkpointed_size", 0) for d in done[1:]] or [0]) / 2**20, 1),
                "duration_ms_each": [round(d["total_ms"]) for d in done],
                "restore_s": round(restore_seconds(loop, storage.storage), 2),
                "sync_ms_max": round(max(d["sync_ms"] for d in done), 2),
                "sync_cpu_ms_median": round(_median([d["sync_cpu_ms"] for d in done]), 2),
                "snapshot_thread_cpu_ms_median": round(_median(op.executor.cpu_s[-len(done) :]) * 1000),
                "duration_ms_median": round(_median([d["total_ms"] for d in done])),
                "stall_ms_checkpointing": round(loop.stall_in_checkpoint * 1000, 1),
                "stall_ms_median_per_checkpoint": round(_median([d.get("stall_ms", 0.0) for d in done]), 1),
                # the longest stall: the task thread on a core / waiting for one / neither
                # (the GIL, or blocked); and the host's steal time over the run, all CPUs
                "stall_split_ms_cpu_runqueue_other": list(loop.stall_split_ms),
                # another process's memory reads during that stall, against their median
                "witness_slowdown_x": witness.slowdown(*loop.stall_window),
                "steal_ms_per_s": round(1000 * steal_s / max(t_run, 1e-9), 1),
                "stall_ms_without": round(loop.stall_outside * 1000, 1),
                "stall_ms_median_per_second_without": round(_median([w for w in loop.window_stalls if w]), 1),
                "batch_ms_p99_checkpointing": round(_pct(loop.gaps_in_checkpoint, 0.99) * 1000, 1),
                "batch_ms_p99_without": round(_pct(loop.gaps_outside, 0.99) * 1000, 1),
                "batch_ms_median": round(_median(loop.gaps_outside) * 1000, 1),
                # the memory checkpoints add: the snapshot side's copy of the dicts (the
                # values are shared), the changelogs, the buffers being written
                "rss_mb_filled": round(rss_filled),
                "rss_mb_now": round(_memory_mb("VmRSS")),
                "rss_mb_peak": round(_memory_mb("VmHWM")),
                "errors": [d["error"] for d in done if "error" in d],
            }
            rows.append(row)
            print("  " + json.dumps(row), flush=True)
        finally:
            witness.close()
            storage.close()
    op.backend.dispose()
    op.executor.shutdown()
    return rows


def bench_throughput(
    size_mb: int,
    value_bytes: int,
    batch: int,
    seconds: float,
    workdir: Path,
    mode: str,
    kind: str = "full",
    hot_fraction: float = 0.0,
) -> dict[str, Any]:
    num_keys = size_mb * 1024 * 1024 // value_bytes
    op = _KeyedOperator(mode, incremental=kind == "incremental")
    kgs = fill(op, num_keys, value_bytes)
    storage = Storage("local", workdir / f"throughput-{size_mb}-{mode}-{kind}")
    try:
        base = TaskLoop(op, kgs, value_bytes, batch, storage.storage, hot_fraction)
        base.run(1.0, None)
        none = base.run(seconds, None)
        cpu_none = base.cpu_us_per_update()
        cp = TaskLoop(op, kgs, value_bytes, batch, storage.storage, hot_fraction)
        if kind == "incremental":  # the first checkpoint writes the base: the run measures the deltas after it
            cp.run(0, 1.0, first_at=0.0, until_checkpoints=1)
            cp.durations.clear()
            cp.stall_in_checkpoint = 0.0
        with_cp = cp.run(seconds, 1.0, first_at=1.0)
        none2 = base.run(seconds, None)  # again, to see the noise of a shared machine
        cpu_none = (cpu_none + base.cpu_us_per_update()) / 2
    finally:
        storage.close()
        op.backend.dispose()
    baseline = (none + none2) / 2
    row = {
        "size_mb": size_mb,
        "mode": mode,
        "kind": kind,
        "hot_fraction": hot_fraction,
        "updates_per_s_without": round(baseline),
        "updates_per_s_with_1s_interval": round(with_cp),
        "loss_percent": round(100 * (1 - with_cp / baseline), 1),
        "task_cpu_us_per_update_without": round(cpu_none, 2),
        "task_cpu_us_per_update_with_1s_interval": round(cp.cpu_us_per_update(), 2),
        "snapshot_cpu_s_per_s": round((sum(op.executor.cpu_s) + sum(op.executor.apply_cpu_s)) / seconds, 2),
        "checkpoints": sum(1 for d in cp.durations if "total_ms" in d),
        "stall_ms_checkpointing": round(cp.stall_in_checkpoint * 1000, 1),
        "stall_ms_median_per_checkpoint": round(_median([d.get("stall_ms", 0.0) for d in cp.durations]), 1),
    }
    print("  " + json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="scripts/bench --suite checkpoint", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes-mb", default="100", help="keyed state sizes in MB, comma-separated (e.g. 100,1000)")
    p.add_argument("--targets", default="local,s3", help="local, s3 or both")
    p.add_argument("--value-bytes", type=int, default=1024, help="bytes per state value")
    p.add_argument("--batch", type=int, default=1000, help="state updates per batch of the modelled task")
    p.add_argument("--checkpoints", type=int, default=3, help="checkpoints per size and target")
    p.add_argument("--throughput-seconds", type=float, default=10.0, help="0 skips the throughput run")
    p.add_argument("--throughput-size-mb", type=int, default=100)
    p.add_argument(
        "--snapshot-modes",
        default="fork,thread",
        help="state.backend.hashmap.snapshot-mode values to compare (fork, thread)",
    )
    p.add_argument("--kinds", default="full", help="checkpoint kinds to compare: full, incremental or both")
    p.add_argument(
        "--hot-fraction",
        type=float,
        default=0.0,
        help="> 0: each second's updates go to a window of this fraction of the keys (0.01: 1%% per second)",
    )
    p.add_argument("--json", action="store_true", help="print the results as one JSON document at the end")
    a = p.parse_args(argv)
    kinds = [k.strip() for k in a.kinds.split(",") if k.strip()]
    sizes = [int(s) for s in a.sizes_mb.split(",") if s.strip()]
    targets = [t.strip() for t in a.targets.split(",") if t.strip()]
    print(
        f"checkpoint benchmark: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    workdir = Path(tempfile.mkdtemp(prefix="yarnflink-bench-checkpoint-"))
    results: dict[str, Any] = {"checkpoints": [], "throughput": None}
    try:
        modes = [m.strip() for m in a.snapshot_modes.split(",") if m.strip()]
        for size in sizes:
            for mode in modes:
                for kind in kinds:
                    results["checkpoints"] += bench_size(
                        size, targets, a.value_bytes, a.batch, a.checkpoints, workdir, mode, kind, a.hot_fraction
                    )
        if a.throughput_seconds > 0:
            print("throughput (local directory, 1 s interval vs none):", flush=True)
            results["throughput"] = [
                bench_throughput(
                    a.throughput_size_mb,
                    a.value_bytes,
                    a.batch,
                    a.throughput_seconds,
                    workdir,
                    mode,
                    kind,
                    a.hot_fraction,
                )
                for mode in modes
                for kind in kinds
            ]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if a.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
