"""Throughput micro-benchmark of the shuffle stack (not a test).

    scripts/bench --suite network [--rows 65536] [--cols 4] [--seconds 3] [--tls DIR]

Prints MB/s and rows/s for: a local channel, a remote channel with producer and consumer in this
process (they share one GIL), and a remote channel whose producer is a separate process (the
deployment case: one TaskExecutor per process).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from yarnflink.network import InputChannelSpec, ShuffleEnvironment
from yarnflink.security import install_directory_material

#: ``--tls DIR`` for the producer process too (mutual TLS as in a cluster, material in DIR)
_TLS_ARGS: list[str] = []


def make_batch(rows: int, cols: int) -> pa.RecordBatch:
    data = np.arange(rows, dtype=np.int64)
    return pa.record_batch({f"c{i}": pa.array(data + i) for i in range(cols)})


def produce(env: ShuffleEnvironment, pid: str, batch: pa.RecordBatch, seconds: float) -> None:
    part = env.create_result_partition(pid, 1)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        part.emit(0, batch)
    part.finish()


def consume(env: ShuffleEnvironment, spec: InputChannelSpec) -> tuple[int, int, float]:
    gate = env.create_input_gate([spec])
    rows = nbytes = 0
    start = None
    while True:
        boe = gate.next(timeout=60)
        if boe is None:
            break
        if start is None:
            start = time.perf_counter()  # exclude connection setup
            continue
        if boe.batch is None:  # an event
            continue
        rows += boe.batch.num_rows
        nbytes += boe.batch.nbytes
    gate.close()
    return rows, nbytes, time.perf_counter() - (start or time.perf_counter())


def report(name: str, rows: int, nbytes: int, secs: float) -> None:
    print(f"{name:28s} {nbytes / secs / 1e6:9.1f} MB/s {rows / secs / 1e6:7.2f} M rows/s")


def bench_in_process(remote: bool, batch: pa.RecordBatch, seconds: float) -> None:
    prod = ShuffleEnvironment()
    prod.start()
    cons = prod
    if remote:
        cons = ShuffleEnvironment()
        cons.start()
    t = threading.Thread(target=produce, args=(prod, "p", batch, seconds))
    t.start()
    rows, nbytes, secs = consume(cons, InputChannelSpec("p", 0, prod.address))
    t.join()
    report("remote (same process)" if remote else "local", rows, nbytes, secs)
    prod.close()
    if remote:
        cons.close()


def producer_process(rows: int, cols: int, seconds: float) -> None:
    env = ShuffleEnvironment()
    env.start()
    print(env.address, flush=True)
    sys.stdin.readline()
    produce(env, "p", make_batch(rows, cols), seconds)
    sys.stdin.readline()  # keep serving until the parent is done
    env.close()


def bench_cross_process(rows: int, cols: int, seconds: float) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.network",
            "--producer",
            "--rows",
            str(rows),
            "--cols",
            str(cols),
            "--seconds",
            str(seconds),
            *_TLS_ARGS,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],  # the repository, where ``benchmarks`` is importable
    )
    assert proc.stdin and proc.stdout
    address = proc.stdout.readline().strip()
    env = ShuffleEnvironment()
    env.start()
    proc.stdin.write("go\n")
    proc.stdin.flush()
    result = consume(env, InputChannelSpec("p", 0, address))
    proc.stdin.write("done\n")
    proc.stdin.flush()
    proc.wait(30)
    env.close()
    report("remote (producer process)", *result)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=65536)
    ap.add_argument("--cols", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--producer", action="store_true")
    ap.add_argument("--tls", metavar="DIR", help="mutual TLS on the data sockets, with a cluster's material in DIR")
    args = ap.parse_args()
    if args.tls:
        install_directory_material(Path(args.tls))
        _TLS_ARGS[:] = ["--tls", args.tls]
    if args.producer:
        producer_process(args.rows, args.cols, args.seconds)
        return
    batch = make_batch(args.rows, args.cols)
    print(f"batch: {args.rows} rows x {args.cols} int64 columns = {batch.nbytes / 1e6:.2f} MB")
    bench_in_process(False, batch, args.seconds)
    bench_in_process(True, batch, args.seconds)
    bench_cross_process(args.rows, args.cols, args.seconds)


if __name__ == "__main__":
    main()
