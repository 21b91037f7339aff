"""Hand-built JobGraphs and a driver for the pure scheduler (no servers)."""

from __future__ import annotations

from yarnflink.executiongraph.executiongraph import ExecutionGraph, ExecutionState, ExecutionVertex, Failure
from yarnflink.jobgraph.jobgraph import IntermediateDataSet, JobEdge, JobGraph, JobVertex, OperatorDescriptor
from yarnflink.scheduler.scheduler import Action, CancelTask, DeclareResources, DefaultScheduler, DeployTask


def vid(name: str) -> str:
    return (name.encode().hex() + "0" * 32)[:32]


def graph(
    vertices: list[tuple[str, int]],
    edges: list[tuple[str, str, str, str]],
    mode: str = "STREAMING",
    groups: dict[str, str] | None = None,
) -> JobGraph:
    """vertices: (name, parallelism); edges: (source, target, partitioning, "P" pipelined | "B" blocking)."""
    datasets, jedges, outs = [], [], {}
    for i, (src, dst, part, kind) in enumerate(edges):
        ds = f"{i + 1:032x}"
        datasets.append(IntermediateDataSet(ds, vid(src), "BLOCKING" if kind == "B" else "PIPELINED_BOUNDED"))
        jedges.append(JobEdge(ds, vid(dst), part, b"ks" if part == "hash" else None))
        outs.setdefault(src, []).append(ds)
    jvs = [
        JobVertex(
            vid(name),
            name,
            p,
            128,
            [OperatorDescriptor(n, name, "map", b"spec", output_datasets=outs.get(name, []))],
            (groups or {}).get(name, "default"),
        )
        for n, (name, p) in enumerate(vertices)
    ]
    return JobGraph("f" * 32, "test", jvs, datasets, jedges, runtime_mode=mode)


def ev(eg: ExecutionGraph, name: str, i: int) -> ExecutionVertex:
    return eg.vertex(vid(name)).task_vertices[i]


def names(vertices) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(v.task_name_with_subtask for v in vertices)


class Driver:
    """Plays the JobMaster and the TaskExecutors for a DefaultScheduler: hands out slots from
    fake TaskExecutors and reports task states, recording what the scheduler asked for."""

    def __init__(self, scheduler: DefaultScheduler, task_managers: int = 2, slots_each: int = 2) -> None:
        self.s = scheduler
        self.now = 0.0
        self.actions: list[Action] = []
        self.deployed: list[ExecutionVertex] = []
        self.free: list[tuple[str, str, int]] = []  # (resource id, allocation id, slot index)
        self.declared = 0
        self.max_declared = 0
        for t in range(task_managers):
            scheduler.pool.register_task_manager(f"te{t}", f"te{t}:rpc", f"te{t}:data", 0.0)
            self.free.extend((f"te{t}", f"a{t}-{i}", i) for i in range(slots_each))

    def run(self, actions: list[Action]) -> list[Action]:
        self.actions.extend(actions)
        for a in actions:
            if isinstance(a, DeployTask):
                self.deployed.append(a.execution.vertex)
            elif isinstance(a, DeclareResources):
                self.declared = a.slots
                self.max_declared = max(self.max_declared, a.slots)
        return actions

    def start(self) -> None:
        self.run(self.s.start(self.now))
        self.offer()

    def offer(self) -> None:
        """The ResourceManager hands out free slots until the declared requirement is met."""
        while self.declared > len(self.s.pool.slots) and self.free:
            rid, alloc, index = self.free.pop(0)
            accepted, actions = self.s.slots_offered(rid, [(alloc, index)], self.now)
            if not accepted:
                self.free.insert(0, (rid, alloc, index))
                return
            self.run(actions)

    def report(self, v: ExecutionVertex, state: ExecutionState, failure: Failure | None = None) -> None:
        self.run(self.s.task_state_changed(v.current.attempt_id, state, failure, self.now))
        self.offer()

    def run_all(self, state: ExecutionState = ExecutionState.RUNNING) -> None:
        for v in list(self.s.eg.all_vertices()):
            if v.current.state == ExecutionState.DEPLOYING:
                self.report(v, state)

    def finish(self, v: ExecutionVertex) -> None:
        if v.current.state == ExecutionState.DEPLOYING:
            self.report(v, ExecutionState.RUNNING)
        self.report(v, ExecutionState.FINISHED)

    def cancels(self) -> list[ExecutionVertex]:
        return [a.execution.vertex for a in self.actions if isinstance(a, CancelTask)]

    def confirm_cancels(self) -> None:
        for v in list(self.s.eg.all_vertices()):
            if v.current.state == ExecutionState.CANCELING:
                self.report(v, ExecutionState.CANCELED)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.run(self.s.on_timer(self.now))
        self.offer()

    def take(self) -> list[Action]:
        out, self.actions = self.actions, []
        return out


def fail(v: ExecutionVertex, message: str = "boom", partition_id: str = "") -> Failure:
    return Failure("RuntimeError", message, "", 1, v.task_name_with_subtask, partition_id=partition_id)
