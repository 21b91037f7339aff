"""The non-blocking side of an InputGate, as a task's mailbox loop uses it: ``poll_next`` never
waits, and ``notify_when_available`` calls back once input (or an end, a failure, a close) is
there, so the task thread can wait in its mailbox instead of in the gate."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from yarnflink.network import InputChannelSpec, PartitionException, ShuffleEnvironment

from .netutil import make_batch, wait_until

pytestmark = pytest.mark.timeout(60)
EnvFactory = Callable[..., ShuffleEnvironment]


class Calls:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> None:
        self.n += 1


def test_poll_next_returns_none_at_once_and_the_callback_fires_once_on_data(make_env: EnvFactory) -> None:
    env = make_env()
    partition = env.create_result_partition("p", 1)
    gate = env.create_input_gate([InputChannelSpec("p", 0, env.address)])
    assert gate.poll_next() is None and not gate.is_finished
    calls = Calls()
    gate.notify_when_available(calls)
    assert calls.n == 0
    partition.emit(0, make_batch(0))  # a local channel: the listener runs on this thread
    assert calls.n == 1
    partition.emit(0, make_batch(100))
    assert calls.n == 1  # once per registration
    first, second = gate.poll_next(), gate.poll_next()
    assert first is not None and first.batch is not None and first.batch.equals(make_batch(0))
    assert second is not None and second.batch is not None and second.batch.equals(make_batch(100))
    assert gate.poll_next() is None


def test_the_callback_fires_at_once_when_input_is_already_there(make_env: EnvFactory) -> None:
    env = make_env()
    partition = env.create_result_partition("p", 1)
    gate = env.create_input_gate([InputChannelSpec("p", 0, env.address)])
    partition.emit(0, make_batch(0))
    calls = Calls()
    gate.notify_when_available(calls)
    assert calls.n == 1


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_the_callback_fires_for_the_end_of_input(make_env: EnvFactory, remote: bool) -> None:
    producer = make_env()
    consumer = make_env() if remote else producer
    partition = producer.create_result_partition("p", 1)
    gate = consumer.create_input_gate([InputChannelSpec("p", 0, producer.address)])
    calls = Calls()
    gate.notify_when_available(calls)
    partition.finish()
    wait_until(lambda: calls.n == 1, what="the end of input signalled")
    wait_until(lambda: gate.poll_next() is None and gate.is_finished, what="the gate finished")


def test_the_callback_fires_when_the_gate_is_closed(make_env: EnvFactory) -> None:
    env = make_env()
    env.create_result_partition("p", 1)
    gate = env.create_input_gate([InputChannelSpec("p", 0, env.address)])
    calls = Calls()
    gate.notify_when_available(calls)
    gate.close()
    assert calls.n == 1


def test_a_missing_partition_fails_at_its_request_deadline(make_env: EnvFactory) -> None:
    env = make_env(partition_request_timeout=0.2)
    gate = env.create_input_gate([InputChannelSpec("nowhere", 0, env.address)])
    deadline = gate.pending_deadline()
    assert deadline is not None and deadline > time.monotonic()
    assert gate.poll_next() is None
    wait_until(lambda: time.monotonic() >= deadline, what="the request deadline")
    with pytest.raises(PartitionException, match="not found"):
        gate.poll_next()
