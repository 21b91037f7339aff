"""Bounded memory and backpressure: a slow consumer must stall the producer, not buffer data."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pytest

from yarnflink.network import InputChannelSpec, ShuffleEnvironment

from .netutil import Runner, wait_until

pytestmark = pytest.mark.timeout(60)
EnvFactory = Callable[..., ShuffleEnvironment]

MIB = 1024 * 1024
ROWS = MIB // 8  # one int64 column of 1 MiB per batch


def batch_no(i: int) -> pa.RecordBatch:
    col = np.full(ROWS, i, dtype=np.int64)
    return pa.record_batch({"x": pa.array(col)})


class Sampler:
    """Samples memory_in_use() of some environments in a background thread."""

    def __init__(self, *envs: ShuffleEnvironment) -> None:
        self.envs = envs
        self.max = [0] * len(envs)
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for i, env in enumerate(self.envs):
                self.max[i] = max(self.max[i], env.memory_in_use())
            self.samples += 1
            time.sleep(0.0005)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_slow_consumer_keeps_memory_bounded(make_env: EnvFactory, remote: bool) -> None:
    bound = 4 * MIB
    n = 200  # 200 MiB in total
    prod = make_env(max_buffers_per_channel=8, max_bytes_per_channel=bound)
    cons = make_env(max_buffers_per_channel=8, max_bytes_per_channel=bound) if remote else prod
    partition = prod.create_result_partition("p", 1)
    gate = cons.create_input_gate([InputChannelSpec("p", 0, prod.address)])
    sampler = Sampler(prod, cons)
    emitted = [0]

    def produce() -> None:
        for i in range(n):
            partition.emit(0, batch_no(i))
            emitted[0] += 1
        partition.finish()

    producer = Runner(produce)
    # The consumer does not read at all yet: every queue on the way fills up, then the producer
    # must stall (the kernel's socket buffers hold a few MiB more on the remote path).
    wait_until(lambda: partition.buffered_bytes() >= bound - MIB, what="producer queue full")
    if remote:
        wait_until(lambda: cons.memory_in_use() >= bound - 2 * MIB, what="consumer queue full")

    def stalled() -> bool:
        before = emitted[0]
        producer.thread.join(0.3)
        return emitted[0] == before

    wait_until(stalled, what="producer to stall")
    assert emitted[0] < n // 4, "producer kept going although nobody reads"
    assert stalled()

    received = 0
    while (boe := gate.next(timeout=30)) is not None:
        assert boe.batch.column(0)[0].as_py() == received  # in order
        received += 1
        if received % 2 == 0:
            time.sleep(0.002)  # a slow consumer
    producer.join()
    sampler.stop()
    assert producer.error is None and received == n
    assert sampler.samples > 100
    prod_max, cons_max = sampler.max
    assert 0 < prod_max <= bound
    assert 0 < cons_max <= bound
    if remote:
        assert prod_max + cons_max <= 2 * bound
    assert partition.backpressure_ns > 0.1 * 1e9  # at least the 0.3 s stall above
    wait_until(lambda: prod.memory_in_use() == 0 and cons.memory_in_use() == 0, what="memory 0")


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_count_bound_with_small_batches(make_env: EnvFactory, remote: bool) -> None:
    prod = make_env(max_buffers_per_channel=3)
    cons = make_env(max_buffers_per_channel=3) if remote else prod
    partition = prod.create_result_partition("p", 1)
    gate = cons.create_input_gate([InputChannelSpec("p", 0, prod.address)])
    small = pa.record_batch({"x": pa.array([1, 2, 3])})
    emitter = Runner(lambda: [partition.emit(0, small) for _ in range(10_000)])
    wait_until(lambda: len(partition._queues[0]) == 3, what="producer queue full")
    if remote:
        wait_until(lambda: len(gate.channels[0]._queue) == 3, what="channel queue full")
    emitter.thread.join(0.2)
    assert emitter.thread.is_alive()
    assert len(partition._queues[0]) <= 3
    count = 0
    while count < 10_000:
        assert gate.next(timeout=20).batch.equals(small)
        count += 1
    emitter.join()
    partition.finish()
    assert gate.next(timeout=20) is None


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_oversized_batch_still_passes(make_env: EnvFactory, remote: bool) -> None:
    prod = make_env(max_bytes_per_channel=MIB)
    cons = make_env(max_bytes_per_channel=MIB) if remote else prod
    partition = prod.create_result_partition("p", 1)
    gate = cons.create_input_gate([InputChannelSpec("p", 0, prod.address)])
    big = pa.record_batch({"x": pa.array(np.arange(3 * ROWS, dtype=np.int64))})  # 3 MiB
    producer = Runner(lambda: ([partition.emit(0, big) for _ in range(3)], partition.finish()))
    got = []
    while (boe := gate.next(timeout=20)) is not None:
        got.append(boe.batch)
    producer.join()
    assert producer.error is None
    assert len(got) == 3 and all(b.equals(big) for b in got)
