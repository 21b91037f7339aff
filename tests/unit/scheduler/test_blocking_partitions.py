"""Blocking result partitions of batch jobs: spilled to disk as Arrow IPC, readable after the
producer finished, re-readable (local and remote) until released."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest

from yarnflink.network import BlockingResultPartition, InputChannelSpec, PartitionException, ShuffleEnvironment


@pytest.fixture
def envs(tmp_path) -> Iterator[list[ShuffleEnvironment]]:  # type: ignore[no-untyped-def]
    out = [ShuffleEnvironment("127.0.0.1", 0, spill_dir=str(tmp_path), partition_request_timeout=1.0) for _ in range(2)]
    for e in out:
        e.start()
    yield out
    for e in out:
        e.close()


def batch(start: int, rows: int = 1000) -> pa.RecordBatch:
    return pa.record_batch({"v": pa.array(np.arange(start, start + rows, dtype=np.int64))})


def read_all(env: ShuffleEnvironment, spec: InputChannelSpec) -> list[int]:
    gate = env.create_input_gate([spec])
    out: list[int] = []
    try:
        while (item := gate.next(10.0)) is not None:
            if item.batch is not None:
                out.extend(item.batch.column(0).to_pylist())
    finally:
        gate.close()
    return out


def test_a_finished_blocking_partition_is_read_again_by_every_consumer(envs) -> None:  # type: ignore[no-untyped-def]
    producer_env, consumer_env = envs
    p = producer_env.create_result_partition("ds-0-attempt", 2, blocking=True)
    assert isinstance(p, BlockingResultPartition)
    p.emit(0, batch(0))
    p.emit(1, batch(1000))
    p.emit(0, pa.record_batch({"v": pa.array(["a schema change"])}).slice(0, 0))
    p.emit(0, batch(2000, 5))
    p.finish()
    files = sorted(os.listdir(p.directory))
    assert files == ["0-0.arrow", "0-1.arrow", "0-2.arrow", "1-0.arrow"]  # a segment per schema run
    local = InputChannelSpec(p.partition_id, 0, producer_env.address)
    expected = list(range(1000)) + list(range(2000, 2005))
    assert read_all(producer_env, local) == expected
    assert read_all(producer_env, local) == expected  # a restarted consumer reads it again
    assert read_all(consumer_env, InputChannelSpec(p.partition_id, 1, producer_env.address)) == list(range(1000, 2000))
    assert read_all(consumer_env, local) == expected  # remote (from the other environment), again
    p.release()
    assert not os.path.exists(p.directory) and producer_env.partition(p.partition_id) is None
    with pytest.raises(PartitionException):
        read_all(consumer_env, local)


def test_a_consumer_waits_until_the_producer_finishes_and_sees_a_producer_failure(envs) -> None:  # type: ignore[no-untyped-def]
    producer_env, consumer_env = envs
    p = producer_env.create_result_partition("ds-1-attempt", 1, blocking=True)
    p.emit(0, batch(0, 10))
    gate = consumer_env.create_input_gate([InputChannelSpec(p.partition_id, 0, producer_env.address)])
    with pytest.raises(TimeoutError):
        gate.next(0.3)  # nothing before finish()
    p.finish()
    item = gate.next(10.0)
    assert item is not None and item.batch is not None and item.batch.num_rows == 10
    assert gate.next(10.0) is None
    gate.close()
    failing = producer_env.create_result_partition("ds-2-attempt", 1, blocking=True)
    gate = consumer_env.create_input_gate([InputChannelSpec(failing.partition_id, 0, producer_env.address)])
    failing.fail(RuntimeError("producer broke"))
    with pytest.raises(PartitionException, match="producer broke"):
        gate.next(10.0)
    gate.close()


def test_close_removes_the_spill_directory(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = ShuffleEnvironment("127.0.0.1", 0, spill_dir=str(tmp_path))
    env.start()
    p = env.create_result_partition("ds-3-attempt", 1, blocking=True)
    p.emit(0, batch(0))
    spill = env.spill_dir
    assert os.listdir(spill)
    env.close()
    assert not os.path.exists(spill)
