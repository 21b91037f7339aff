"""The contract between a Task and the operators of its chain.

A Task (``yarnflink.taskexecutor.task``) builds an ``OperatorChain`` from the vertex's
``OperatorDescriptor``s and drives it:

* a source chain: ``for batch in chain.source_batches(): chain.push(batch)`` then
  ``chain.end_input()``;
* any other chain: ``chain.push(batch)`` for each batch from the input gate, then
  ``chain.end_input()`` when every input channel has ended.

Between chained operators a ``Batch`` is passed by reference; it is converted between Python
records and Arrow only when an operator asks for the other form. At the chain's end, batches go
to ``NetworkOutput``s that partition them and write them to result partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from yarnflink.common.records import Batch


class TaskCancelled(Exception):
    """The task was cancelled: raised on the task thread where it notices (between two records
    of a batch, between two units of input)."""


class Cancellation:
    """A task's cancellation as a plain attribute: set once by ``Task.cancel`` (any thread) and
    read by the per-record loops of the operators between two records, so a cancelled task stops
    inside a large batch. A slotted attribute read costs a few nanoseconds per record (measured
    in docs/ARCHITECTURE.md, "Task cancellation"); a method call or ``threading.Event.is_set``
    would cost several times that."""

    __slots__ = ("cancelled", "task_name")

    def __init__(self, task_name: str = "") -> None:
        self.cancelled = False
        self.task_name = task_name

    def check(self) -> None:
        """Raises TaskCancelled once cancelled."""
        if self.cancelled:
            raise TaskCancelled(self.task_name)


@dataclass
class OperatorContext:
    """What an operator may know about where it runs (Flink's RuntimeContext)."""

    task_name: str
    operator_name: str
    subtask_index: int
    parallelism: int
    max_parallelism: int
    attempt_number: int = 0
    job_id: str = ""
    runtime_mode: str = "STREAMING"
    config: dict[str, str] = field(default_factory=dict)
    #: Sends a payload to the JobMaster (collect sink results). Blocking; may raise.
    send_to_coordinator: Callable[[str, bytes], None] = lambda kind, payload: None
    #: Asynchronous form, where the task offers one (None: only the blocking form): schedules a
    #: send and returns a ``concurrent.futures.Future`` at once. The payloads are made by the
    #: given function, called when the send's turn comes: after every send scheduled before it
    #: (of this task) has finished, so sends keep their order and what piles up meanwhile can
    #: go out together.
    send_to_coordinator_later: Callable[[str, Callable[[], list[bytes]]], Future] | None = None
    #: True while the task should keep running (false after cancel).
    is_running: Callable[[], bool] = lambda: True
    #: The task's cancellation: per-record loops stop between two records once it is set.
    cancellation: Cancellation = field(default_factory=Cancellation)
    #: Stable id of the operator in the job (for checkpointed state; the node hash or uid).
    operator_id: str = ""
    #: The task's ``yarnflink.state.task_state.TaskStateManager`` (restored state, checkpoint
    #: streams); None: operators start with empty state.
    state: Any | None = None


class Output(Protocol):
    def emit(self, batch: Batch) -> None: ...

    def end_input(self) -> None: ...


class StreamOperator:
    """One operator. ``process_batch`` gets a Batch and emits zero or more Batches to
    ``self.output``; ``end_input`` is called once after the last batch (bounded input)."""

    output: Output
    #: the task's cancellation (``open`` takes the context's; never set before)
    cancellation: Cancellation = Cancellation()

    def open(self, ctx: OperatorContext) -> None:
        self.ctx = ctx
        self.cancellation = ctx.cancellation

    def process_batch(self, batch: Batch) -> None:
        raise NotImplementedError

    def end_input(self) -> None:
        self.output.end_input()

    def process_watermark(self, watermark: Any) -> None:
        """An event-time watermark (``yarnflink.operators.watermarks.Watermark``) arrived: by
        default it is forwarded; event-time operators fire timers first."""
        emit = getattr(self.output, "emit_watermark", None)
        if emit is not None:
            emit(watermark)

    def close(self) -> None:
        pass


class SourceOperator(StreamOperator):
    """A source yields Batches; the task pushes them into the chain one at a time, so it can
    check for cancellation (and later inject barriers) between batches."""

    def batches(self) -> Iterator[Batch]:
        raise NotImplementedError

    def process_batch(self, batch: Batch) -> None:
        self.output.emit(batch)
