"""API vocabulary shared by the environment and the streams: runtime mode, slot sharing groups,
job results and the executor protocol (what ``yarnflink run`` plugs in)."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Union, runtime_checkable

if TYPE_CHECKING:
    from yarnflink.jobgraph.jobgraph import JobGraph


class RuntimeExecutionMode(enum.Enum):
    """PyFlink's RuntimeExecutionMode. AUTOMATIC picks BATCH when all sources are bounded
    (every yarnflink source is), else STREAMING."""

    STREAMING = "STREAMING"
    BATCH = "BATCH"
    AUTOMATIC = "AUTOMATIC"


@dataclass(frozen=True)
class SlotSharingGroup:
    """A named slot sharing group with optional resource requirements: the JobGraph carries them
    and the JobMaster declares them as the group's ResourceProfile; the ResourceManager fits slots
    to them with ``cluster.fine-grained-resource-management.enabled`` and ignores them otherwise.

    ``SlotSharingGroup("heavy", cpu_cores=2.0, task_heap_memory_mb=512)`` or PyFlink's
    ``SlotSharingGroup.builder("heavy").set_cpu_cores(2.0).build()``."""

    name: str
    cpu_cores: float | None = None
    task_heap_memory_mb: int | None = None
    task_off_heap_memory_mb: int | None = None
    managed_memory_mb: int | None = None
    external_resources: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"slot sharing group name must be a non-empty string, got {self.name!r}")
        for attr in ("cpu_cores", "task_heap_memory_mb", "task_off_heap_memory_mb", "managed_memory_mb"):
            v = getattr(self, attr)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0):
                raise ValueError(f"slot sharing group {self.name!r}: {attr} must be a number >= 0, got {v!r}")

    def get_name(self) -> str:
        return self.name

    def __hash__(self) -> int:
        return hash(self.name)

    @staticmethod
    def builder(name: str) -> SlotSharingGroupBuilder:
        return SlotSharingGroupBuilder(name)


class SlotSharingGroupBuilder:
    def __init__(self, name: str):
        self._name = name
        self._kw: dict[str, Any] = {"external_resources": {}}

    def set_cpu_cores(self, cores: float) -> SlotSharingGroupBuilder:
        self._kw["cpu_cores"] = cores
        return self

    def set_task_heap_memory_mb(self, mb: int) -> SlotSharingGroupBuilder:
        self._kw["task_heap_memory_mb"] = mb
        return self

    def set_task_off_heap_memory_mb(self, mb: int) -> SlotSharingGroupBuilder:
        self._kw["task_off_heap_memory_mb"] = mb
        return self

    def set_managed_memory_mb(self, mb: int) -> SlotSharingGroupBuilder:
        self._kw["managed_memory_mb"] = mb
        return self

    def set_external_resource(self, name: str, value: float) -> SlotSharingGroupBuilder:
        self._kw["external_resources"][name] = value
        return self

    def build(self) -> SlotSharingGroup:
        return SlotSharingGroup(self._name, **self._kw)


@dataclass
class JobExecutionResult:
    """What ``env.execute()`` returns (PyFlink's JobExecutionResult)."""

    job_id: str
    job_name: str | None = None
    net_runtime_ms: int = 0
    accumulators: dict[str, Any] = field(default_factory=dict)
    #: True when the job was submitted detached (execution.attached = false): no runtime/results.
    detached: bool = False

    def get_job_id(self) -> str:
        return self.job_id

    def get_net_runtime(self) -> int:
        """Job runtime in milliseconds."""
        if self.detached:
            raise RuntimeError("the job was submitted detached: its runtime is not known")
        return self.net_runtime_ms

    def get_accumulator_result(self, name: str) -> Any:
        return self.accumulators.get(name)

    def get_all_accumulator_results(self) -> dict[str, Any]:
        return dict(self.accumulators)

    def is_job_execution_result(self) -> bool:
        return not self.detached

    def get_job_execution_result(self) -> JobExecutionResult:
        return self


@runtime_checkable
class JobClient(Protocol):
    """Handle of a submitted job (``env.execute_async()``); implemented by the executor."""

    def get_job_id(self) -> str: ...

    def get_job_status(self) -> Any: ...

    def cancel(self) -> Any: ...

    def get_job_execution_result(self) -> Any: ...


@runtime_checkable
class PipelineExecutor(Protocol):
    """What runs a JobGraph; ``yarnflink run`` installs one with
    ``yarnflink.api.environment.set_default_executor``.

    An executor may also have a ``configuration`` attribute (a ``Configuration`` or a
    ``dict[str, str]``): environments created while it is the default start from it (so e.g.
    ``parallelism.default`` from the cluster's ``yarnflink.yaml`` / ``-D`` applies)."""

    def execute(self, job_graph: JobGraph, attached: bool) -> JobExecutionResult: ...

    def execute_async(self, job_graph: JobGraph) -> JobClient: ...

    def execute_and_collect(self, job_graph: JobGraph) -> Iterator[Any]: ...


class ExecutorNotConfiguredError(RuntimeError):
    """``execute()`` was called but no executor is set (the script was not started by
    ``yarnflink run``)."""


class UnsupportedFeatureError(NotImplementedError):
    """A PyFlink call yarnflink cannot do (a Java connector, the Table API, a JAR dependency):
    raised at the call, with what to use instead."""

    def __init__(self, call: str, reason: str, instead: str):
        super().__init__(f"{call} is not supported by yarnflink: {reason}. Instead: {instead}")
        self.call = call


JAR_ALTERNATIVE = (
    "a Python library installed in the cluster's Python environment, or a Spark step "
    "(ds.transform_spark(fn) / ds.spark_sql(query)) whose Spark session loads the JARs (spark.jars)"
)


class ProgramAbortException(BaseException):
    """Raised by ``PlanCaptureExecutor`` after it captured the job graph, to stop the user's
    program (a BaseException so that ``except Exception`` in user code does not swallow it)."""


ModeLike = Union[RuntimeExecutionMode, str]
