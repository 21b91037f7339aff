"""ExecutionGraph: the JobGraph expanded by parallelism (seed 000, figure 6).

ExecutionJobVertex per JobVertex, ExecutionVertex per subtask, an Execution per attempt, an
IntermediateResultPartition per (data set, producer subtask). Pure bookkeeping: the JobMaster
drives it with events and reads back what to do; no I/O here.
"""

from __future__ import annotations

import enum
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from yarnflink.jobgraph.jobgraph import JobEdge, JobGraph, JobVertex

#: Partitionings where producer subtask i feeds only consumer subtask i (Flink's POINTWISE).
POINTWISE = frozenset({"forward"})


class ExecutionState(str, enum.Enum):
    CREATED = "CREATED"
    SCHEDULED = "SCHEDULED"
    DEPLOYING = "DEPLOYING"
    INITIALIZING = "INITIALIZING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    CANCELING = "CANCELING"
    CANCELED = "CANCELED"
    FAILED = "FAILED"

    @property
    def terminal(self) -> bool:
        return self in (ExecutionState.FINISHED, ExecutionState.CANCELED, ExecutionState.FAILED)


class JobStatus(str, enum.Enum):
    INITIALIZING = "INITIALIZING"
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    FAILING = "FAILING"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"
    RESTARTING = "RESTARTING"
    SUSPENDED = "SUSPENDED"

    @property
    def globally_terminal(self) -> bool:
        return self in (JobStatus.FAILED, JobStatus.CANCELED, JobStatus.FINISHED)


# Allowed transitions reported by TaskExecutors (Flink's Execution state machine).
_ALLOWED: dict[ExecutionState, frozenset[ExecutionState]] = {
    ExecutionState.CREATED: frozenset({ExecutionState.SCHEDULED, ExecutionState.CANCELED, ExecutionState.FAILED}),
    ExecutionState.SCHEDULED: frozenset({ExecutionState.DEPLOYING, ExecutionState.CANCELED, ExecutionState.FAILED}),
    ExecutionState.DEPLOYING: frozenset(
        {
            ExecutionState.INITIALIZING,
            ExecutionState.RUNNING,
            ExecutionState.FINISHED,
            ExecutionState.CANCELING,
            ExecutionState.CANCELED,
            ExecutionState.FAILED,
        }
    ),
    ExecutionState.INITIALIZING: frozenset(
        {
            ExecutionState.RUNNING,
            ExecutionState.FINISHED,
            ExecutionState.CANCELING,
            ExecutionState.CANCELED,
            ExecutionState.FAILED,
        }
    ),
    ExecutionState.RUNNING: frozenset(
        {ExecutionState.FINISHED, ExecutionState.CANCELING, ExecutionState.CANCELED, ExecutionState.FAILED}
    ),
    ExecutionState.CANCELING: frozenset({ExecutionState.CANCELED, ExecutionState.FAILED, ExecutionState.FINISHED}),
}


@dataclass
class Failure:
    exception_class: str
    message: str
    traceback: str
    timestamp_ms: int
    task_name: str = ""
    endpoint: str = ""
    task_manager_id: str = ""
    #: Failover: the tasks this failure restarted ("name (i/n)"), failures that came with it
    #: (e.g. the other tasks of a lost TaskExecutor), and the lost upstream partition if any.
    restarted_tasks: list[str] = field(default_factory=list)
    concurrent: list[Failure] = field(default_factory=list)
    partition_id: str = ""


@dataclass
class LogicalSlot:
    allocation_id: str
    resource_id: str
    rpc_address: str
    data_address: str
    slot_index: int


@dataclass
class Execution:
    vertex: ExecutionVertex
    attempt_number: int
    attempt_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    state: ExecutionState = ExecutionState.CREATED
    slot: LogicalSlot | None = None
    failure: Failure | None = None
    timestamps: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.timestamps[ExecutionState.CREATED.value] = now_ms()

    def transition(self, new: ExecutionState) -> bool:
        """Applies a state reported from outside; returns False (and changes nothing) if the
        transition is not allowed, e.g. a late RUNNING after CANCELED."""
        if new == self.state:
            return False
        if new not in _ALLOWED.get(self.state, frozenset()):
            return False
        self.state = new
        self.timestamps[new.value] = now_ms()
        return True


@dataclass(eq=False)
class IntermediateResultPartition:
    """The result of one producer subtask for one data set. Its id names the producer's current
    attempt, so every attempt writes (and consumers read) a partition of its own."""

    dataset_id: str
    producer: ExecutionVertex
    result_type: str = "PIPELINED_BOUNDED"
    partitioning: str = "forward"

    @property
    def partition_id(self) -> str:
        return self.partition_id_of(self.producer.current)

    def partition_id_of(self, execution: Execution) -> str:
        return f"{self.dataset_id}-{self.producer.subtask_index}-{execution.attempt_id}"

    @property
    def blocking(self) -> bool:
        return self.result_type == "BLOCKING"


class ExecutionVertex:
    def __init__(self, job_vertex: ExecutionJobVertex, subtask_index: int) -> None:
        self.job_vertex = job_vertex
        self.subtask_index = subtask_index
        self.current = Execution(self, 0)
        self.prior: list[Execution] = []
        self.produced: dict[str, IntermediateResultPartition] = {}
        #: speculative execution: attempts running beside ``current`` (a winner becomes current),
        #: and the attempts that ran beside the current one and lost (kept in ``prior`` too)
        self.speculative: list[Execution] = []
        self.concurrent: list[Execution] = []

    @property
    def task_name_with_subtask(self) -> str:
        jv = self.job_vertex.job_vertex
        return f"{jv.name} ({self.subtask_index + 1}/{jv.parallelism})"

    def new_attempt(self) -> Execution:
        self.prior.append(self.current)
        self.prior.extend(self.speculative)
        self.speculative = []
        self.concurrent = []
        number = max(e.attempt_number for e in (self.current, *self.prior)) + 1
        self.current = Execution(self, number)
        return self.current

    def last_slot(self) -> LogicalSlot | None:
        """The slot of the newest attempt that had one (sticky redeployment prefers it)."""
        for e in (self.current, *reversed(self.prior)):
            if e.slot is not None:
                return e.slot
        return None


class ExecutionJobVertex:
    def __init__(self, job_vertex: JobVertex) -> None:
        self.job_vertex = job_vertex
        self.task_vertices = [ExecutionVertex(self, i) for i in range(job_vertex.parallelism)]
        #: AdaptiveBatch: the upper bound of a parallelism decided at run time (None: fixed), and
        #: whether it has been decided (``ExecutionGraph.set_parallelism``)
        self.adaptive_upper_bound: int | None = None
        self.parallelism_decided = False

    @property
    def awaiting_parallelism(self) -> bool:
        return self.adaptive_upper_bound is not None and not self.parallelism_decided

    @property
    def id(self) -> str:
        return self.job_vertex.id

    def aggregate_state(self) -> ExecutionState:
        """Flink's ExecutionJobVertex.getAggregateExecutionState."""
        states = [v.current.state for v in self.task_vertices]
        for s in (
            ExecutionState.FAILED,
            ExecutionState.CANCELING,
            ExecutionState.CANCELED,
            ExecutionState.RUNNING,
            ExecutionState.INITIALIZING,
            ExecutionState.DEPLOYING,
            ExecutionState.SCHEDULED,
        ):
            if s in states:
                return s
        if all(s == ExecutionState.FINISHED for s in states):
            return ExecutionState.FINISHED
        return ExecutionState.CREATED

    def state_counts(self) -> dict[str, int]:
        counts = {s.value: 0 for s in ExecutionState}
        for v in self.task_vertices:
            counts[v.current.state.value] += 1
        return counts


def now_ms() -> int:
    return int(time.time() * 1000)


class ExecutionGraph:
    def __init__(self, job_graph: JobGraph) -> None:
        self.job_graph = job_graph
        self.job_vertices = [ExecutionJobVertex(v) for v in job_graph.vertices]
        self._by_id = {ejv.id: ejv for ejv in self.job_vertices}
        self.status = JobStatus.CREATED
        self.timestamps: dict[str, int] = {JobStatus.INITIALIZING.value: now_ms(), JobStatus.CREATED.value: now_ms()}
        self.failures: list[Failure] = []
        self.num_restarts = 0
        self.exception_history_size = 16  # web.exception-history-size
        self._edge_of: dict[str, JobEdge] = {e.source: e for e in job_graph.edges}
        for d in job_graph.datasets:
            edge = self._edge_of.get(d.id)
            for ev in self._by_id[d.producer].task_vertices:
                ev.produced[d.id] = IntermediateResultPartition(
                    d.id, ev, d.result_type, edge.partitioning if edge else "forward"
                )

    @property
    def job_id(self) -> str:
        return self.job_graph.job_id

    def vertex(self, vertex_id: str) -> ExecutionJobVertex:
        return self._by_id[vertex_id]

    # ------------------------------------------------------------------ AdaptiveBatch
    def num_subpartitions(self, edge: JobEdge) -> int:
        """Subpartitions a producer writes for ``edge``: 1 for forward, the consumer's parallelism,
        or -- for a consumer whose parallelism is decided at run time -- a fixed count the decided
        subtasks split among them (one per key group for hash, else the consumer's upper bound)."""
        if edge.partitioning in POINTWISE:
            return 1
        consumer = self._by_id[edge.target]
        if consumer.adaptive_upper_bound is None:
            return consumer.job_vertex.parallelism
        if edge.partitioning == "hash":
            return self.job_graph.vertex(self.job_graph.dataset(edge.source).producer).max_parallelism
        return consumer.adaptive_upper_bound

    def consumed_subpartitions(self, edge: JobEdge, ev: ExecutionVertex) -> range:
        """The subpartitions of each producer's partition that consumer subtask ``ev`` reads."""
        if edge.partitioning in POINTWISE:
            return range(0, 1)
        if ev.job_vertex.adaptive_upper_bound is None:
            return range(ev.subtask_index, ev.subtask_index + 1)
        n = self.num_subpartitions(edge)
        p = ev.job_vertex.job_vertex.parallelism
        if edge.partitioning == "broadcast":  # every subpartition holds everything
            return range(ev.subtask_index % n, ev.subtask_index % n + 1)
        start = (ev.subtask_index * n + p - 1) // p
        return range(start, ((ev.subtask_index + 1) * n - 1) // p + 1)

    def rescale(self, parallelisms: dict[str, int]) -> None:
        """Adaptive scheduler: every vertex gets new subtasks at its new parallelism (the job
        restarts as a whole), each with an attempt number above any before it."""
        for ejv in self.job_vertices:
            old = [
                e
                for v in ejv.task_vertices
                for e in (v.current, *v.prior, *v.speculative)
                if e.state != ExecutionState.CREATED
            ]  # attempts that were scheduled at all
            number = max((e.attempt_number for e in old), default=-1) + 1
            ejv.job_vertex.parallelism = max(
                1, min(parallelisms.get(ejv.id, ejv.job_vertex.parallelism), ejv.job_vertex.max_parallelism)
            )
            ejv.task_vertices = [ExecutionVertex(ejv, i) for i in range(ejv.job_vertex.parallelism)]
            for ev in ejv.task_vertices:
                ev.current = Execution(ev, number)
            for d in self.job_graph.datasets:
                if d.producer == ejv.id:
                    edge = self._edge_of.get(d.id)
                    for ev in ejv.task_vertices:
                        ev.produced[d.id] = IntermediateResultPartition(
                            d.id, ev, d.result_type, edge.partitioning if edge else "forward"
                        )

    def set_parallelism(self, vertex_id: str, parallelism: int) -> ExecutionJobVertex:
        """Decides the parallelism of a vertex that awaits one: its subtasks are created anew
        (none has been scheduled yet). Bounded by the subpartitions its producers wrote."""
        ejv = self._by_id[vertex_id]
        if not ejv.awaiting_parallelism:
            raise ValueError(f"the parallelism of vertex {vertex_id} is not awaiting a decision")
        assert all(v.current.state == ExecutionState.CREATED for v in ejv.task_vertices)
        bound = min(
            [ejv.adaptive_upper_bound or 1] + [self.num_subpartitions(e) for e in self.job_graph.inputs_of(vertex_id)]
        )
        parallelism = max(1, min(parallelism, bound))
        ejv.job_vertex.parallelism = parallelism
        ejv.parallelism_decided = True
        ejv.task_vertices = [ExecutionVertex(ejv, i) for i in range(parallelism)]
        for d in self.job_graph.datasets:
            if d.producer == vertex_id:
                edge = self._edge_of.get(d.id)
                for ev in ejv.task_vertices:
                    ev.produced[d.id] = IntermediateResultPartition(
                        d.id, ev, d.result_type, edge.partitioning if edge else "forward"
                    )
        return ejv

    def all_vertices(self) -> Iterator[ExecutionVertex]:
        for ejv in self.job_vertices:
            yield from ejv.task_vertices

    # ------------------------------------------------------------------ topology
    def consumers_of(self, partition: IntermediateResultPartition) -> list[ExecutionVertex]:
        """The subtasks reading ``partition`` (one for forward, every consumer subtask otherwise)."""
        edge = self._edge_of.get(partition.dataset_id)
        if edge is None:
            return []
        consumer = self._by_id[edge.target]
        if edge.partitioning in POINTWISE:
            return [consumer.task_vertices[partition.producer.subtask_index]]
        return list(consumer.task_vertices)

    def consumed_partitions(self, ev: ExecutionVertex) -> list[IntermediateResultPartition]:
        """The partitions ``ev`` reads, input by input (as its deployment descriptor lists them)."""
        out: list[IntermediateResultPartition] = []
        jg = self.job_graph
        for edge in jg.inputs_of(ev.job_vertex.id):
            producer = self._by_id[jg.dataset(edge.source).producer]
            if edge.partitioning in POINTWISE:
                out.append(producer.task_vertices[ev.subtask_index].produced[edge.source])
            else:
                out.extend(p.produced[edge.source] for p in producer.task_vertices)
        return out

    def find_partition(self, partition_id: str) -> tuple[IntermediateResultPartition, Execution] | None:
        """The partition an id names and the producer attempt that wrote it (None if unknown)."""
        dataset_id, _, rest = partition_id.partition("-")
        subtask_s, _, attempt_id = rest.partition("-")
        d = next((d for d in self.job_graph.datasets if d.id == dataset_id), None)
        if d is None or not subtask_s.isdigit():
            return None
        vertices = self._by_id[d.producer].task_vertices
        if int(subtask_s) >= len(vertices):
            return None
        ev = vertices[int(subtask_s)]
        for e in (ev.current, *ev.prior):
            if e.attempt_id == attempt_id:
                return ev.produced[dataset_id], e
        return None

    def executions(self) -> Iterator[Execution]:
        for ejv in self.job_vertices:
            for ev in ejv.task_vertices:
                yield ev.current

    def find_execution(self, attempt_id: str) -> Execution | None:
        for ejv in self.job_vertices:
            for ev in ejv.task_vertices:
                if ev.current.attempt_id == attempt_id:
                    return ev.current
                for old in (*ev.prior, *ev.speculative):
                    if old.attempt_id == attempt_id:
                        return old
        return None

    def transition_to(self, status: JobStatus) -> None:
        if self.status != status:
            self.status = status
            self.timestamps[status.value] = now_ms()

    def all_finished(self) -> bool:
        return all(e.state == ExecutionState.FINISHED for e in self.executions())

    def all_terminal(self) -> bool:
        return all(e.state.terminal for e in self.executions())

    @property
    def start_time(self) -> int:
        return self.timestamps.get(JobStatus.INITIALIZING.value, -1)

    @property
    def end_time(self) -> int:
        if not self.status.globally_terminal:
            return -1
        return self.timestamps.get(self.status.value, -1)
