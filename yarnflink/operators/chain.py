"""OperatorChain: the operators of one JobVertex, wired together inside one Task.

Batches are passed between chained operators by reference (like Flink with object reuse enabled:
an operator must not mutate the records it receives; a user function that mutates its input in
place is visible to the sibling branches of a fan-out).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import cloudpickle

from yarnflink.common.records import Batch
from yarnflink.operators.base import OperatorContext, Output, SourceOperator, StreamOperator
from yarnflink.operators.factory import create_operator


class OperatorDescriptorLike(Protocol):
    """An operator of a chain as deployed (read only: a TaskDeploymentDescriptor's are frozen)."""

    @property
    def node_id(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def spec(self) -> Any: ...  # cloudpickled bytes of a spec (or the spec object itself, for tests)
    @property
    def chained_outputs(self) -> Sequence[int]: ...
    @property
    def output_datasets(self) -> Sequence[str]: ...


class _ChainOutput:
    """An operator's Output inside a chain: fan-out to chained successors and network outputs.
    ``end_input`` is a no-op: the chain ends every operator itself, in topological order."""

    __slots__ = ("targets", "networks", "_single")

    def __init__(self, targets: list[StreamOperator], networks: list[Output]):
        self.targets = targets
        self.networks = networks
        self._single: Callable[[Batch], None] | None
        if len(targets) == 1 and not networks:
            self._single = targets[0].process_batch
        elif len(networks) == 1 and not targets:
            self._single = networks[0].emit
        else:
            self._single = None

    def emit(self, batch: Batch) -> None:
        single = self._single
        if single is not None:
            single(batch)
            return
        for t in self.targets:
            t.process_batch(batch)
        for n in self.networks:
            n.emit(batch)

    def emit_watermark(self, watermark: Any) -> None:
        for t in self.targets:
            t.process_watermark(watermark)
        for n in self.networks:
            f = getattr(n, "emit_watermark", None)
            if f is not None:
                f(watermark)

    def end_input(self) -> None:
        pass


def operator_id_of(node_id: int, uid: str = "") -> str:
    """The id under which an operator's state is checkpointed: its uid, else its StreamGraph node id
    (the JobMaster's CheckpointCoordinator names operators the same way)."""
    return uid or f"node-{node_id}"


class ChainError(ValueError):
    """The descriptors do not form a valid chain."""


class OperatorChain:
    def __init__(
        self,
        descriptors: Sequence[OperatorDescriptorLike],
        network_outputs: Mapping[str, Output],
        ctx_factory: Callable[[str], OperatorContext],
    ):
        if not descriptors:
            raise ChainError("an operator chain needs at least one operator")
        self.descriptors = list(descriptors)
        self.ctx_factory = ctx_factory
        by_id = {}
        for d in self.descriptors:
            if d.node_id in by_id:
                raise ChainError(f"duplicate node id {d.node_id} in chain")
            by_id[d.node_id] = d
        self.operators: dict[int, StreamOperator] = {}
        for d in self.descriptors:
            spec = d.spec
            if isinstance(spec, (bytes, bytearray, memoryview)):
                spec = cloudpickle.loads(spec)
            self.operators[d.node_id] = create_operator(spec)
        # topological order (head first)
        indeg = {nid: 0 for nid in by_id}
        for d in self.descriptors:
            for c in d.chained_outputs:
                if c not in by_id:
                    raise ChainError(f"operator {d.name!r} chains to unknown node {c}")
                indeg[c] += 1
        head = self.descriptors[0]
        if indeg[head.node_id] != 0:
            raise ChainError(f"the head operator {head.name!r} has a chained input")
        order: list[int] = []
        ready = [d.node_id for d in self.descriptors if indeg[d.node_id] == 0]
        while ready:
            nid = ready.pop(0)
            order.append(nid)
            for c in by_id[nid].chained_outputs:
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready.append(c)
        if len(order) != len(by_id):
            raise ChainError("the chained operators contain a cycle")
        unreachable = [
            by_id[n].name for n in order if n != head.node_id and not any(n in by_id[m].chained_outputs for m in order)
        ]
        if unreachable:
            raise ChainError(f"operators {unreachable} are not reachable from the head")
        self.order = order
        self.names = {nid: by_id[nid].name for nid in order}
        # wiring
        self.network_outputs: list[Output] = []
        seen: set[int] = set()
        for d in self.descriptors:
            nets = []
            for ds in d.output_datasets:
                if ds not in network_outputs:
                    raise ChainError(f"operator {d.name!r}: no network output for data set {ds}")
                net = network_outputs[ds]
                nets.append(net)
                if id(net) not in seen:
                    seen.add(id(net))
                    self.network_outputs.append(net)
            self.operators[d.node_id].output = _ChainOutput([self.operators[c] for c in d.chained_outputs], nets)
        self.head = self.operators[head.node_id]
        self._opened: list[int] = []
        self._ended = False
        self._closed = False

    # ------------------------------------------------------------------ lifecycle
    @property
    def is_source(self) -> bool:
        return isinstance(self.head, SourceOperator)

    def open(self) -> None:
        """Open every operator, tail first (so downstream is ready before upstream emits)."""
        uids = {d.node_id: (getattr(d, "uid", "") or "") for d in self.descriptors}
        for nid in reversed(self.order):
            ctx = self.ctx_factory(self.names[nid])
            if not getattr(ctx, "operator_id", "x"):
                ctx.operator_id = operator_id_of(nid, uids[nid])  # stable id of its checkpointed state
            self.operators[nid].open(ctx)
            self._opened.append(nid)

    def source_batches(self) -> Iterator[Batch]:
        head = self.head
        if not isinstance(head, SourceOperator):
            raise TypeError(f"the chain head {type(head).__name__} is not a source")
        return head.batches()

    def push(self, batch: Batch) -> None:
        self.head.process_batch(batch)

    def process_watermark(self, watermark: Any) -> None:
        """A watermark from the task's input (the combined one of its channels, see
        ``yarnflink.operators.watermarks.StatusWatermarkValve``) enters at the head."""
        self.head.process_watermark(watermark)

    # ------------------------------------------------------------------ processing time
    def _processing_time_operators(self) -> list[Any]:
        ops = self.__dict__.get("_pt_ops")
        if ops is None:
            ops = self._pt_ops = [
                self.operators[n]
                for n in self.order
                if hasattr(self.operators[n], "on_processing_time")
                and hasattr(self.operators[n], "next_processing_time")
            ]
        return ops

    def next_processing_time(self) -> int | None:
        """Earliest wall-clock time (ms) at which an operator wants ``on_processing_time``
        (processing-time timers, periodic watermarks and idleness checks), or None."""
        earliest = None  # a loop, not min() over a list: the Task asks after every batch
        for op in self._processing_time_operators():
            t = op.next_processing_time()
            if t is not None and (earliest is None or t < earliest):
                earliest = t
        return earliest

    def on_processing_time(self, now_ms: int) -> None:
        """The Task's timer: every operator whose processing time is due at ``now_ms`` runs it,
        in topological order (so a watermark or idle status it emits reaches its successors)."""
        for op in self._processing_time_operators():
            t = op.next_processing_time()
            if t is not None and t <= now_ms:
                op.on_processing_time(now_ms)

    def end_input(self) -> None:
        """End every operator once, in topological order, then the network outputs."""
        if self._ended:
            return
        self._ended = True
        for nid in self.order:
            self.operators[nid].end_input()
        for net in self.network_outputs:
            net.end_input()

    def close(self) -> None:
        """Close every opened operator (head first) even if some fail; re-raise the first error."""
        if self._closed:
            return
        self._closed = True
        first: BaseException | None = None
        opened = set(self._opened)
        for nid in self.order:
            if nid in opened:
                try:
                    self.operators[nid].close()
                except BaseException as e:  # noqa: BLE001 - re-raised below
                    if first is None:
                        first = e
        if first is not None:
            raise first

    # ------------------------------------------------------------------ network buffers
    def flush(self) -> None:
        """Flush every network output's buffers now."""
        for net in self.network_outputs:
            f = getattr(net, "flush", None)
            if f is not None:
                f()

    def _timed_operators(self) -> list[Any]:
        """Operators that buffer input until a deadline (``next_flush_deadline`` /
        ``flush_if_due``, e.g. a Spark step's micro-batch), in topological order."""
        ops = self.__dict__.get("_timed")
        if ops is None:
            ops = self._timed = [self.operators[n] for n in self.order if hasattr(self.operators[n], "flush_if_due")]
        return ops

    def flush_if_due(self) -> None:
        """Run the operators whose buffered input is due, then flush the network outputs whose
        buffer timeout has expired."""
        for op in self._timed_operators():
            op.flush_if_due()
        for net in self.network_outputs:
            f = getattr(net, "flush_if_due", None)
            if f is not None:
                f()

    def next_flush_deadline(self) -> float | None:
        """Earliest ``time.monotonic()`` at which an operator or a network output has rows due, or None."""
        fns = self.__dict__.get("_deadline_fns")
        if fns is None:
            nets = [*self._timed_operators(), *self.network_outputs]
            fns = self._deadline_fns = [f for net in nets if (f := getattr(net, "next_flush_deadline", None))]
        earliest = None  # a loop, not min() over a list: the Task asks after every batch
        for f in fns:
            d = f()
            if d is not None and (earliest is None or d < earliest):
                earliest = d
        return earliest
