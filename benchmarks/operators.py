"""In-process throughput of operator chains (a script, not a test).

    scripts/bench --suite operators [rows] [keys] [--tune-malloc]

``--tune-malloc`` first calls ``yarnflink.operators.memory.tune_allocator()``.

Measures rows/s of
  1. sequence -> map_batches(key = x % keys, value = x)            (chain of 2)
  2. sequence -> map_batches -> keyed sum(1) by field 0, STREAMING  (chain of 3; no exchange)
  3. as 2 in BATCH mode
  4. sequence -> map_batches -> hash NetworkOutput (4 channels) whose writer pushes each batch
     into a keyed-sum chain (the exchange without the network)
  5. sequence -> map (per record tuples) -> keyed sum (per-record fallback path)
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import cloudpickle
import pyarrow as pa
import pyarrow.compute as pc

from yarnflink.common.keygroups import default_max_parallelism
from yarnflink.common.records import Batch
from yarnflink.operators import specs as S
from yarnflink.operators.base import OperatorContext
from yarnflink.operators.chain import OperatorChain
from yarnflink.operators.partitioners import NetworkOutput


@dataclass
class Desc:
    node_id: int
    name: str
    kind: str
    spec: bytes
    chained_outputs: list = field(default_factory=list)
    output_datasets: list = field(default_factory=list)


class Counter:
    def __init__(self):
        self.rows = 0
        self.batches = []

    def emit(self, batch):
        self.rows += len(batch)

    def end_input(self):
        pass


class PipeWriter:
    """Feeds every partitioned batch (any channel) into a downstream chain."""

    def __init__(self, chain):
        self.chain = chain

    def emit(self, channel, rb):
        self.chain.push(Batch.from_arrow(rb))

    def broadcast(self, rb):
        self.chain.push(Batch.from_arrow(rb))

    def finish(self):
        pass


def ctx_factory(name):
    return OperatorContext(task_name="bench", operator_name=name, subtask_index=0, parallelism=1, max_parallelism=128)


def chain_of(specs, sink=None):
    descs = []
    for i, sp in enumerate(specs):
        descs.append(
            Desc(
                i,
                type(sp).__name__,
                sp.kind,
                cloudpickle.dumps(sp),
                [i + 1] if i + 1 < len(specs) else [],
                ["out"] if i + 1 == len(specs) else [],
            )
        )
    sink = sink or Counter()
    ch = OperatorChain(descs, {"out": sink}, ctx_factory)
    return ch, sink


def run_source_chain(ch):
    ch.open()
    t = time.perf_counter()
    for b in ch.source_batches():
        ch.push(b)
    ch.end_input()
    dt = time.perf_counter() - t
    ch.close()
    return dt


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--tune-malloc" in sys.argv:
        from yarnflink.operators.memory import tune_allocator

        print("tune_allocator():", tune_allocator())
    n = int(args[0]) if len(args) > 0 else 10_000_000
    keys = int(args[1]) if len(args) > 1 else 10_000

    def kv(rb):
        x = rb.column(0)
        return pa.record_batch([pc.remainder(x, keys), x], names=["f0", "f1"])

    seq = S.SequenceSourceSpec(1, n)
    ks = S.KeySelectorSpec(field=0)
    results = []

    ch, sink = chain_of([seq, S.MapBatchesSpec(kv)])
    dt = run_source_chain(ch)
    assert sink.rows == n
    results.append(("sequence -> map_batches", dt))

    for mode in ("STREAMING", "BATCH"):
        ch, sink = chain_of([seq, S.MapBatchesSpec(kv), S.AggregateSpec("sum", 1, ks, mode)])
        dt = run_source_chain(ch)
        assert sink.rows == (n if mode == "STREAMING" else min(keys, n))
        results.append((f"sequence -> map_batches -> key_by(0).sum(1) [{mode}]", dt))

    # with the hash exchange: 4 channels, each received batch pushed into a keyed-sum chain
    ch2, sink2 = chain_of([S.AggregateSpec("sum", 1, ks, "STREAMING")])
    ch2.open()
    w = PipeWriter(ch2)
    net = NetworkOutput(w, "hash", 4, ks, default_max_parallelism(4), 0, buffer_timeout_s=-1)
    ch, _ = chain_of([seq, S.MapBatchesSpec(kv)], sink=net)
    dt = run_source_chain(ch)
    ch2.end_input()
    assert sink2.rows == n
    results.append(("sequence -> map_batches -> hash(4 ch) -> key_by(0).sum(1)", dt))

    m = min(n, 2_000_000)
    ch, sink = chain_of(
        [S.SequenceSourceSpec(1, m), S.MapSpec(lambda x: (x % keys, x)), S.AggregateSpec("sum", 1, ks, "STREAMING")]
    )
    dt = run_source_chain(ch)
    results.append((f"sequence -> map(tuple) -> key_by(0).sum(1) per-record ({m} rows)", dt))

    for name, dt in results:
        rows = m if "per-record" in name else n
        print(f"{name:70s} {rows / dt / 1e6:8.2f} M rows/s  ({dt:.2f} s)")


if __name__ == "__main__":
    main()
