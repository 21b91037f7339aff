"""ShuffleEnvironment: the per-TaskExecutor entry point of the network stack
(Flink's NettyShuffleEnvironment).

It owns the partition registry, the data server that serves its partitions to other
TaskExecutors, the gates created for its tasks, and the memory account of all their queues.
A channel whose spec address equals this environment's own address is local (in-memory);
every other channel is remote (TCP, Arrow IPC).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading

from yarnflink.network.blocking import BlockingResultPartition
from yarnflink.network.common import InputChannelSpec
from yarnflink.network.errors import CancelledTransfer
from yarnflink.network.gate import InputGate
from yarnflink.network.partition import PartitionRegistry, ResultPartition
from yarnflink.network.queues import MemoryAccount
from yarnflink.network.transport import PartitionServer


def _remove_orphaned_spill_dirs(parent: str) -> None:
    """Deletes ``yarnflink-shuffle-<pid>-*`` directories whose process is gone."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        parts = name.split("-")
        if len(parts) < 4 or not name.startswith("yarnflink-shuffle-") or not parts[2].isdigit():
            continue
        try:
            os.kill(int(parts[2]), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
        except OSError:
            pass


class ShuffleEnvironment:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        max_buffers_per_channel: int = 8,
        max_bytes_per_channel: int = 8 * 1024 * 1024,
        partition_request_timeout: float = 30.0,
        spill_dir: str | None = None,
    ) -> None:
        if max_buffers_per_channel < 1 or max_bytes_per_channel < 1:
            raise ValueError("channel bounds must be positive")
        self._max_buffers = max_buffers_per_channel
        self._max_bytes = max_bytes_per_channel
        self._request_timeout = partition_request_timeout
        self._account = MemoryAccount()
        self._registry = PartitionRegistry()
        self._server = PartitionServer(host, port, self._registry, partition_request_timeout=partition_request_timeout)
        self._lock = threading.Lock()
        self._gates: set[InputGate] = set()
        self._started = False
        self._closed = False
        self._spill_parent = spill_dir
        self._spill_dir: str | None = None  # created on the first blocking partition

    def start(self) -> None:
        """Bind the data server and start its accept thread (daemon)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("shuffle environment is closed")
            if self._started:
                return
            self._started = True
        self._server.start()

    @property
    def address(self) -> str:
        """``host:port`` actually bound; what producers put into consumers' InputChannelSpecs."""
        if not self._server.address:
            raise RuntimeError("shuffle environment not started")
        return self._server.address

    @property
    def spill_dir(self) -> str:
        """This environment's directory for blocking partitions (removed on close; the ones of
        processes that were killed are removed by the next environment that spills there)."""
        with self._lock:
            if self._spill_dir is None:
                parent = self._spill_parent or tempfile.gettempdir()
                _remove_orphaned_spill_dirs(parent)
                self._spill_dir = tempfile.mkdtemp(prefix=f"yarnflink-shuffle-{os.getpid()}-", dir=parent)
            return self._spill_dir

    def create_result_partition(
        self, partition_id: str, num_subpartitions: int, *, blocking: bool = False
    ) -> ResultPartition | BlockingResultPartition:
        """Create and register a partition; waiting consumers are woken up. ``blocking``: spilled
        to local disk, readable after it is finished, re-readable until released."""
        if blocking:
            blocking_partition = BlockingResultPartition(
                partition_id,
                num_subpartitions,
                self.spill_dir,
                on_dispose=self._registry.unregister,  # type: ignore[arg-type]
            )
            self._registry.register(blocking_partition)  # type: ignore[arg-type]
            return blocking_partition
        partition = ResultPartition(
            partition_id,
            num_subpartitions,
            max_buffers=self._max_buffers,
            max_bytes=self._max_bytes,
            account=self._account,
            on_dispose=self._registry.unregister,
        )
        self._registry.register(partition)
        return partition

    def create_input_gate(self, channels: list[InputChannelSpec]) -> InputGate:
        """Create a gate and start its channels (remote ones connect in background threads)."""
        if not channels:
            raise ValueError("an input gate needs at least one channel")
        gate = InputGate(
            channels,
            local_address=self.address,
            registry=self._registry,
            account=self._account,
            max_buffers=self._max_buffers,
            max_bytes=self._max_bytes,
            request_timeout=self._request_timeout,
            on_close=self._gate_closed,
        )
        with self._lock:
            if self._closed:
                raise CancelledTransfer("shuffle environment is closed")
            self._gates.add(gate)
        gate.start()
        return gate

    def _gate_closed(self, gate: InputGate) -> None:
        with self._lock:
            self._gates.discard(gate)

    def release_partition(self, partition_id: str) -> None:
        """Cancel/failover path: drop the partition's data; no-op if unknown or already gone."""
        partition = self._registry.lookup(partition_id)
        if partition is not None:
            partition.release()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the server, release all partitions, close all gates, join threads."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            gates = list(self._gates)
        for partition in self._registry.close():
            partition.release()
        self._server.close(timeout)
        for gate in gates:
            gate.close()
        if self._spill_dir is not None:
            shutil.rmtree(self._spill_dir, ignore_errors=True)

    def memory_in_use(self) -> int:
        """Bytes buffered right now in all subpartition and remote-channel queues."""
        return self._account.bytes

    def partition(self, partition_id: str) -> ResultPartition | None:
        """The registered partition with this id (for tests/metrics)."""
        return self._registry.lookup(partition_id)

    def __enter__(self) -> ShuffleEnvironment:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
