"""Failures: producer fail(), producer death, connection problems, release and cancellation."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from yarnflink.network import (
    CancelledTransfer,
    InputChannelSpec,
    PartitionException,
    ShuffleEnvironment,
)
from yarnflink.network.protocol import HEADER, FrameType

from .netutil import Runner, make_batch, wait_until

pytestmark = pytest.mark.timeout(60)
EnvFactory = Callable[..., ShuffleEnvironment]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def expect_partition_exception(gate, within: float, match: str | None = None) -> PartitionException:
    """Drain the gate until it raises; it must raise within ``within`` seconds."""
    deadline = time.monotonic() + within
    with pytest.raises(PartitionException, match=match) as info:
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "no PartitionException in time"
            gate.next(timeout=remaining)
    return info.value


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_producer_fail_surfaces_on_consumer(make_env: EnvFactory, remote: bool) -> None:
    prod = make_env()
    cons = make_env() if remote else prod
    partition = prod.create_result_partition("p", 1)
    gate = cons.create_input_gate([InputChannelSpec("p", 0, prod.address)])
    partition.emit(0, make_batch(0))
    assert gate.next(timeout=20).batch.equals(make_batch(0))
    partition.emit(0, make_batch(100))
    partition.fail(ValueError("boom in user code"))
    err = expect_partition_exception(gate, 10, match="ValueError: boom in user code")
    assert err.partition_id == "p" and err.address == prod.address
    with pytest.raises(CancelledTransfer):
        partition.emit(0, make_batch(0))


def test_late_consumer_of_failed_partition_sees_failure(make_env: EnvFactory) -> None:
    prod, cons = make_env(), make_env()
    partition = prod.create_result_partition("p", 1)
    partition.fail(RuntimeError("early death"))
    gate = cons.create_input_gate([InputChannelSpec("p", 0, prod.address)])
    expect_partition_exception(gate, 10, match="early death")


def test_producer_env_closed_while_consumer_waits(make_env: EnvFactory) -> None:
    prod, cons = make_env(), make_env()
    partition = prod.create_result_partition("p", 1)
    gate = cons.create_input_gate([InputChannelSpec("p", 0, prod.address)])
    partition.emit(0, make_batch(0))
    assert gate.next(timeout=20) is not None
    waiter = Runner(expect_partition_exception, gate, 5)
    waiter.thread.join(0.2)
    assert waiter.thread.is_alive()  # blocked: nothing to read
    prod.close()
    waiter.join()
    assert waiter.error is None, waiter.error


PRODUCER_SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[1])
    import numpy as np, pyarrow as pa
    from yarnflink.network import ShuffleEnvironment
    env = ShuffleEnvironment("127.0.0.1", 0)
    env.start()
    part = env.create_result_partition("p", 1)
    print(env.address, flush=True)
    batch = pa.record_batch({"x": pa.array(np.arange(10000, dtype=np.int64))})
    while True:
        part.emit(0, batch)
    """
)


@pytest.fixture
def producer_process() -> Iterator[tuple[subprocess.Popen, str]]:
    proc = subprocess.Popen([sys.executable, "-c", PRODUCER_SCRIPT, ROOT], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().strip()
        assert address.startswith("127.0.0.1:"), address
        yield proc, address
    finally:
        proc.kill()
        proc.wait(10)


def test_killed_producer_process_surfaces_promptly(
    make_env: EnvFactory, producer_process: tuple[subprocess.Popen, str]
) -> None:
    proc, address = producer_process
    cons = make_env()
    gate = cons.create_input_gate([InputChannelSpec("p", 0, address)])
    for _ in range(20):
        assert gate.next(timeout=20).batch.num_rows == 10000
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    start = time.monotonic()
    err = expect_partition_exception(gate, 10, match="lost")
    assert time.monotonic() - start < 5
    assert err.address == address


def test_connection_refused(make_env: EnvFactory) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    address = "127.0.0.1:%d" % probe.getsockname()[1]
    probe.close()  # nothing listens there any more
    cons = make_env()
    gate = cons.create_input_gate([InputChannelSpec("p", 0, address)])
    expect_partition_exception(gate, 5, match="lost|refused")


class FakeServer:
    """A raw TCP server that answers a partition request with whatever bytes a test wants."""

    def __init__(self, reply: bytes, abort: bool = False) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.address = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.reply, self.abort = reply, abort
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        conn.recv(4096)  # the request
        conn.sendall(self.reply)
        if self.abort:  # RST instead of FIN
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        conn.close()

    def close(self) -> None:
        self.sock.close()
        self.thread.join(5)


@pytest.mark.parametrize(
    "reply, abort, match",
    [
        (b"", False, "lost"),  # EOF without END_OF_PARTITION
        (b"", True, "lost"),  # connection reset
        (HEADER.pack(FrameType.DATA, 0, 0, 1000) + b"x" * 10, False, "lost"),  # truncated
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", False, "protocol error"),
        (HEADER.pack(FrameType.DATA, 1, 0, 16) + b"\xff" * 16, False, "protocol error"),
        (HEADER.pack(FrameType.EVENT, 0, 0, 4) + b"junk", False, "protocol error"),
        (HEADER.pack(FrameType.REQUEST, 0, 0, 0), False, "protocol error"),
        (HEADER.pack(FrameType.ERROR, 0, 0, 5) + b"nope!", False, "nope!"),
    ],
    ids=["eof", "reset", "truncated", "http", "bad-ipc", "bad-pickle", "wrong-type", "error"],
)
def test_bad_server_replies_become_partition_exceptions(
    make_env: EnvFactory, reply: bytes, abort: bool, match: str
) -> None:
    server = FakeServer(reply, abort)
    cons = make_env()
    gate = cons.create_input_gate([InputChannelSpec("p", 0, server.address)])
    expect_partition_exception(gate, 10, match=match)
    server.close()


def blocked_emitter(partition, n: int) -> Runner:
    """Emit ``n`` batches in a thread; returns once the thread is blocked on a full queue."""
    runner = Runner(lambda: [partition.emit(0, make_batch(i * 100)) for i in range(n)])
    wait_until(lambda: len(partition._queues[0]) == 2, what="full queue")
    runner.thread.join(0.1)
    assert runner.thread.is_alive(), "emit should be blocked"
    return runner


def test_release_unblocks_blocked_emit(make_env: EnvFactory) -> None:
    env = make_env(max_buffers_per_channel=2)
    partition = env.create_result_partition("p", 1)
    emitter = blocked_emitter(partition, 10)
    assert env.memory_in_use() > 0
    env.release_partition("p")
    emitter.join()
    assert isinstance(emitter.error, CancelledTransfer)
    assert env.memory_in_use() == 0
    assert env.partition("p") is None
    with pytest.raises(CancelledTransfer):
        partition.emit(0, make_batch(0))


def test_released_partition_fails_its_consumer(make_env: EnvFactory) -> None:
    prod, cons = make_env(), make_env()
    partition = prod.create_result_partition("p", 1)
    gate = cons.create_input_gate([InputChannelSpec("p", 0, prod.address)])
    partition.emit(0, make_batch(0))
    assert gate.next(timeout=20) is not None
    partition.release()
    expect_partition_exception(gate, 10, match="released")


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_consumer_going_away_cancels_blocked_emit(make_env: EnvFactory, remote: bool) -> None:
    prod = make_env(max_buffers_per_channel=2)
    cons = make_env(max_buffers_per_channel=2) if remote else prod
    partition = prod.create_result_partition("p", 1)
    gate = cons.create_input_gate([InputChannelSpec("p", 0, prod.address)])
    big = make_batch(0, rows=200_000, cols=4)  # 6.4 MB: TCP buffers fill quickly
    emitter = Runner(lambda: [partition.emit(0, big) for _ in range(1000)])
    if remote:  # a put completed after blocking: TCP and the consumer's queue are full
        wait_until(lambda: partition.backpressure_ns > 0, what="backpressure")
    else:  # the queue holds one 6.4 MB batch of its 8 MB; the next put blocks
        wait_until(lambda: partition.buffered_bytes() >= big.nbytes, what="full subpartition")
    gate.close()
    emitter.join()
    assert isinstance(emitter.error, CancelledTransfer)
    assert "went away" in str(emitter.error)
    wait_until(lambda: prod.memory_in_use() == 0 and cons.memory_in_use() == 0, what="memory freed")


def test_finish_is_idempotent_and_closes_writing(make_env: EnvFactory) -> None:
    env = make_env()
    partition = env.create_result_partition("p", 1)
    partition.finish()
    partition.finish()
    with pytest.raises(RuntimeError, match="finished"):
        partition.emit(0, make_batch(0))
    with pytest.raises(ValueError, match="out of range"):
        env.create_result_partition("q", 2).emit(2, make_batch(0))
    with pytest.raises(ValueError, match="already exists"):
        env.create_result_partition("p", 1)


def test_unpicklable_event_fails_remote_channel(make_env: EnvFactory) -> None:
    prod, cons = make_env(), make_env()
    partition = prod.create_result_partition("p", 1)
    gate = cons.create_input_gate([InputChannelSpec("p", 0, prod.address)])
    partition.emit_event(threading.Lock())
    expect_partition_exception(gate, 10, match="cannot serialize event")
