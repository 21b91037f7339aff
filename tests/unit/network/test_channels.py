"""Local and remote channels: ordering, events, multi-channel gates, late registration."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from yarnflink.network import (
    BufferOrEvent,
    CancelledTransfer,
    InputChannelSpec,
    InputGate,
    PartitionException,
    ShuffleEnvironment,
)

from .netutil import Runner, make_batch, net_threads, wait_until

pytestmark = pytest.mark.timeout(60)
EnvFactory = Callable[..., ShuffleEnvironment]


@dataclass(frozen=True)
class Marker:
    """A user event (checkpoint barriers will be events like this one)."""

    seq: int


def produce(partition, n: int, sub: int = 0, event_every: int = 5, start: int = 0) -> None:
    for i in range(n):
        partition.emit(sub, make_batch(start + i * 100, 100))
        if i % event_every == event_every - 1:
            partition.emit_event(Marker(i), sub)
    partition.finish()


def drain(gate: InputGate, timeout: float = 20) -> list[BufferOrEvent]:
    out = []
    while (boe := gate.next(timeout=timeout)) is not None:
        out.append(boe)
    return out


def check_stream(items: list[BufferOrEvent], n: int, event_every: int = 5, start: int = 0) -> None:
    """Exactly the produced sequence of batches with events interleaved at their positions."""
    expected: list[object] = []
    for i in range(n):
        expected.append(make_batch(start + i * 100, 100))
        if i % event_every == event_every - 1:
            expected.append(Marker(i))
    assert len(items) == len(expected)
    for got, exp in zip(items, expected):
        if isinstance(exp, Marker):
            assert got.batch is None and got.event == exp
        else:
            assert got.event is None and got.batch.equals(exp)


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_single_channel_in_order_with_events(make_env: EnvFactory, remote: bool) -> None:
    prod = make_env()
    cons = make_env() if remote else prod
    partition = prod.create_result_partition("p1", 1)
    gate = cons.create_input_gate([InputChannelSpec("p1", 0, prod.address)])
    producer = Runner(produce, partition, 60)
    items = drain(gate)
    producer.join()
    assert producer.error is None
    check_stream(items, 60)
    assert {boe.channel for boe in items} == {0}
    assert gate.next(timeout=1) is None  # stays ended
    gate.close()


def test_local_channel_passes_batches_by_reference(make_env: EnvFactory) -> None:
    env = make_env()
    partition = env.create_result_partition("p", 1)
    batch = make_batch(0)
    partition.emit(0, batch)
    partition.finish()
    gate = env.create_input_gate([InputChannelSpec("p", 0, env.address)])
    assert gate.next(timeout=5).batch is batch
    assert gate.next(timeout=5) is None


def test_subpartitions_are_separate_and_broadcast_reaches_all(make_env: EnvFactory) -> None:
    prod, cons = make_env(), make_env()
    partition = prod.create_result_partition("p", 3)
    partition.emit(1, make_batch(1000))
    partition.broadcast(make_batch(0))
    partition.emit_event("all")
    partition.finish()
    gates = [cons.create_input_gate([InputChannelSpec("p", i, prod.address)]) for i in range(3)]
    results = [drain(g) for g in gates]
    for i, items in enumerate(results):
        batches = [b.batch for b in items if b.batch is not None]
        expected = ([make_batch(1000)] if i == 1 else []) + [make_batch(0)]
        assert len(batches) == len(expected) and all(a.equals(b) for a, b in zip(batches, expected))
        assert [b.event for b in items if b.batch is None] == ["all"]
    # every subpartition consumed: the pipelined partition disposed of itself
    wait_until(lambda: prod.partition("p") is None, what="partition disposal")


def test_gate_ends_only_after_all_channels_end(make_env: EnvFactory) -> None:
    prod, cons = make_env(), make_env()
    local_part = cons.create_result_partition("local", 1)
    remote_parts = [prod.create_result_partition(f"r{i}", 1) for i in range(2)]
    specs = [InputChannelSpec("local", 0, cons.address)] + [
        InputChannelSpec(f"r{i}", 0, prod.address) for i in range(2)
    ]
    gate = cons.create_input_gate(specs)
    assert gate.num_channels == 3
    producers = [Runner(produce, local_part, 10, 0, 5, 0), Runner(produce, remote_parts[0], 20, 0, 5, 10_000)]
    for i in range(5):  # r1 stays open (5 batches fit into its queue)
        remote_parts[1].emit(0, make_batch(20_000 + i * 100, 100))

    got: dict[int, list[BufferOrEvent]] = {0: [], 1: [], 2: []}
    while sum(len(v) for v in got.values()) < 12 + 24 + 5:
        boe = gate.next(timeout=20)
        assert boe is not None, "gate ended while a channel was still open"
        got[boe.channel].append(boe)
    with pytest.raises(TimeoutError):
        gate.next(timeout=0.3)  # channel 2 has not ended
    remote_parts[1].finish()
    assert gate.next(timeout=20) is None
    for producer in producers:
        producer.join()
    check_stream(got[0], 10, start=0)
    check_stream(got[1], 20, start=10_000)
    assert [b.batch.equals(make_batch(20_000 + i * 100, 100)) for i, b in enumerate(got[2])] == [True] * 5
    gate.close()


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_request_before_registration(make_env: EnvFactory, remote: bool) -> None:
    prod = make_env(partition_request_timeout=30)
    cons = make_env() if remote else prod
    gate = cons.create_input_gate([InputChannelSpec("late", 0, prod.address)])
    with pytest.raises(TimeoutError):
        gate.next(timeout=0.3)  # the request is waiting for the partition
    partition = prod.create_result_partition("late", 1)
    producer = Runner(produce, partition, 10)
    check_stream(drain(gate), 10)
    producer.join()
    gate.close()


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_request_times_out_when_never_registered(make_env: EnvFactory, remote: bool) -> None:
    prod = make_env(partition_request_timeout=0.5)
    cons = make_env(partition_request_timeout=0.5) if remote else prod
    gate = cons.create_input_gate([InputChannelSpec("never", 0, prod.address)])
    start = time.monotonic()
    with pytest.raises(PartitionException, match="never.*not found") as info:
        gate.next(timeout=20)
    elapsed = time.monotonic() - start
    assert 0.4 < elapsed < 10
    assert info.value.partition_id == "never" and info.value.address == prod.address
    with pytest.raises(PartitionException):  # sticky
        gate.next(timeout=1)
    gate.close()


def test_bad_subpartition_index_fails_channel(make_env: EnvFactory) -> None:
    prod, cons = make_env(), make_env()
    prod.create_result_partition("p", 2)
    gate = cons.create_input_gate([InputChannelSpec("p", 5, prod.address)])
    with pytest.raises(PartitionException, match="out of range"):
        gate.next(timeout=20)


def test_second_reader_of_a_subpartition_is_refused(make_env: EnvFactory) -> None:
    prod = make_env()
    prod.create_result_partition("p", 1)
    g1 = prod.create_input_gate([InputChannelSpec("p", 0, prod.address)])
    with pytest.raises(TimeoutError):
        g1.next(timeout=0.1)  # claims the subpartition
    g2 = prod.create_input_gate([InputChannelSpec("p", 0, prod.address)])
    with pytest.raises(PartitionException, match="already being consumed"):
        g2.next(timeout=5)


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_gate_close_unblocks_next_and_joins_threads(make_env: EnvFactory, remote: bool) -> None:
    prod = make_env()
    cons = make_env() if remote else prod
    prod.create_result_partition("p", 1)
    gate = cons.create_input_gate([InputChannelSpec("p", 0, prod.address)])
    waiter = Runner(gate.next)
    waiter.thread.join(0.2)
    assert waiter.thread.is_alive()
    gate.close()
    waiter.join()
    assert isinstance(waiter.error, CancelledTransfer)
    with pytest.raises(CancelledTransfer):
        gate.next(timeout=1)


def test_env_close_joins_all_network_threads() -> None:
    before = set(net_threads())
    prod, cons = ShuffleEnvironment(), ShuffleEnvironment()
    prod.start()
    cons.start()
    partition = prod.create_result_partition("p", 2)
    gates = [cons.create_input_gate([InputChannelSpec("p", i, prod.address)]) for i in range(2)]
    cons.create_input_gate([InputChannelSpec("missing", 0, prod.address)])
    partition.emit(0, make_batch(0))
    assert gates[0].next(timeout=20).batch.equals(make_batch(0))
    assert len(set(net_threads()) - before) >= 5  # 2 accept, 3 readers (+ server senders)
    prod.close()
    cons.close()
    wait_until(lambda: not (set(net_threads()) - before), timeout=10, what="threads to exit")
    with pytest.raises(CancelledTransfer):
        gates[1].next(timeout=1)
