"""StreamExecutionEnvironment and the executor context.

``yarnflink run job.py`` calls ``set_default_executor(executor)`` before running the script;
``StreamExecutionEnvironment.get_execution_environment()`` then returns an environment bound to
that executor (and starting from its configuration), and ``execute()`` hands the JobGraph to it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from yarnflink.api.checkpoint_config import CheckpointConfig, state_backend_value
from yarnflink.api.common import (
    JAR_ALTERNATIVE,
    ExecutorNotConfiguredError,
    JobClient,
    JobExecutionResult,
    ModeLike,
    PipelineExecutor,
    ProgramAbortException,
    RuntimeExecutionMode,
    UnsupportedFeatureError,
)
from yarnflink.api.connectors import FileSource, Source
from yarnflink.api.datastream import DataStream, check_max_parallelism, check_parallelism
from yarnflink.api.options import DeploymentOptions
from yarnflink.api.transformations import Input, Transformation, generate_stream_graph
from yarnflink.checkpoint.options import CheckpointingOptions
from yarnflink.common.config import Configuration
from yarnflink.common.typeinfo import RowTypeInfo, check_type_info, needs_conversion
from yarnflink.jobgraph.jobgraph import JobGraph
from yarnflink.jobgraph.options import CoreOptions, ExecutionOptions, PipelineOptions
from yarnflink.operators.specs import CollectionSourceSpec, SequenceSourceSpec
from yarnflink.operators.watermarks import WatermarkStrategy
from yarnflink.state.options import StateBackendOptions
from yarnflink.streaming.describe import job_graph_summary_json
from yarnflink.streaming.graph import StreamGraph
from yarnflink.streaming.jobgraph_generator import create_job_graph

DEFAULT_JOB_NAME = "yarnflink Streaming Job"

# ----------------------------------------------------------------------------- executor context
_default_executor: PipelineExecutor | None = None


def set_default_executor(executor: PipelineExecutor | None) -> PipelineExecutor | None:
    """Install the executor that environments created from now on submit to (None removes it).
    Returns the previous one, so callers can restore it."""
    global _default_executor
    previous, _default_executor = _default_executor, executor
    return previous


def get_default_executor() -> PipelineExecutor | None:
    return _default_executor


#: Makes the executor of a script that nothing installed one for (``python job.py``); set by
#: ``yarnflink.deployment.local.embedded.use_embedded_cluster`` (the ``pyflink`` namespace does).
_fallback_factory: Callable[[], PipelineExecutor] | None = None


def set_fallback_executor_factory(factory: Callable[[], PipelineExecutor] | None) -> None:
    global _fallback_factory
    _fallback_factory = factory


def _context_executor() -> PipelineExecutor | None:
    """The default executor, made by the fallback factory (and kept as the default) if none is set."""
    global _default_executor
    if _default_executor is None and _fallback_factory is not None:
        _default_executor = _fallback_factory()
    return _default_executor


def _executor_configuration(executor: Any) -> Configuration:
    conf = getattr(executor, "configuration", None) if executor is not None else None
    if conf is None:
        return Configuration()
    if isinstance(conf, Configuration):
        return conf.copy()
    if isinstance(conf, Mapping):
        return Configuration.from_dict(conf, source="executor configuration")
    raise TypeError(f"executor.configuration must be a Configuration or a dict, got {type(conf).__name__}")


class PlanCaptureExecutor:
    """An executor that records the JobGraph instead of running it and then stops the program
    with ``ProgramAbortException`` (for ``yarnflink info job.py``, like Flink's plan preview)."""

    def __init__(self, configuration: Configuration | Mapping[str, Any] | None = None):
        self.configuration = configuration
        self.job_graph: JobGraph | None = None

    def _capture(self, job_graph: JobGraph) -> Any:
        self.job_graph = job_graph
        raise ProgramAbortException(f"job graph of '{job_graph.job_name}' captured")

    def execute(self, job_graph: JobGraph, attached: bool) -> JobExecutionResult:
        return self._capture(job_graph)

    def execute_async(self, job_graph: JobGraph) -> JobClient:
        return self._capture(job_graph)

    def execute_and_collect(self, job_graph: JobGraph) -> Iterator[Any]:
        return self._capture(job_graph)


# ----------------------------------------------------------------------------- environment
class StreamExecutionEnvironment:
    """Where a DataStream program is defined and executed (PyFlink's
    StreamExecutionEnvironment)."""

    def __init__(
        self,
        configuration: Configuration | Mapping[str, Any] | None = None,
        executor: PipelineExecutor | None = None,
    ):
        self._executor = executor
        self._config = _executor_configuration(executor)
        if configuration is not None:
            self.configure(configuration)
        self._parallelism: int | None = None  # set_parallelism(); else parallelism.default
        self._transformations: list[Transformation] = []
        self._next_id = 1

    @staticmethod
    def get_execution_environment(
        configuration: Configuration | Mapping[str, Any] | None = None,
    ) -> StreamExecutionEnvironment:
        """A new environment bound to the context's executor (set by ``yarnflink run``) and
        starting from its configuration, overridden by ``configuration``."""
        return StreamExecutionEnvironment(configuration, executor=_context_executor())

    # ------------------------------------------------------------------ configuration
    def get_config(self) -> Configuration:
        """The job configuration (live): ``env.get_config().set("pipeline.max-parallelism", 256)``."""
        return self._config

    def configure(self, configuration: Configuration | Mapping[str, Any]) -> StreamExecutionEnvironment:
        """Apply configuration entries (validated; unknown keys raise ConfigError)."""
        if isinstance(configuration, Configuration):
            self._config.update(configuration)
        elif isinstance(configuration, Mapping):
            self._config.update(configuration, source="configure()")
        else:
            raise TypeError(f"configure() needs a Configuration or a dict, got {type(configuration).__name__}")
        return self

    def set_parallelism(self, parallelism: int) -> StreamExecutionEnvironment:
        """Default parallelism of operators created from now on (as Flink: operators created
        before keep the configured default)."""
        self._parallelism = check_parallelism(parallelism, "set_parallelism()")
        return self

    def get_parallelism(self) -> int:
        if self._parallelism is not None:
            return self._parallelism
        return int(self._config.get(CoreOptions.DEFAULT_PARALLELISM))

    def set_max_parallelism(self, max_parallelism: int) -> StreamExecutionEnvironment:
        """Default max parallelism (key groups) of all operators that set none."""
        check_max_parallelism(max_parallelism, "set_max_parallelism()")
        self._config.set(PipelineOptions.MAX_PARALLELISM, max_parallelism)
        return self

    def get_max_parallelism(self) -> int:
        """The configured default max parallelism, -1 if derived per operator."""
        return int(self._config.get(PipelineOptions.MAX_PARALLELISM))

    def set_runtime_mode(self, mode: ModeLike) -> StreamExecutionEnvironment:
        if isinstance(mode, RuntimeExecutionMode):
            mode = mode.value
        if not isinstance(mode, str):
            raise TypeError(f"set_runtime_mode() needs a RuntimeExecutionMode, got {type(mode).__name__}")
        self._config.set(ExecutionOptions.RUNTIME_MODE, mode, source="set_runtime_mode()")
        return self

    def get_runtime_mode(self) -> RuntimeExecutionMode:
        """The configured mode (may be AUTOMATIC); see ``resolved_runtime_mode``."""
        return RuntimeExecutionMode(self._config.get(ExecutionOptions.RUNTIME_MODE))

    def resolved_runtime_mode(self) -> str:
        """STREAMING or BATCH: AUTOMATIC is BATCH since every yarnflink source is bounded."""
        mode = self._config.get(ExecutionOptions.RUNTIME_MODE)
        return "BATCH" if mode == "AUTOMATIC" else mode

    def set_buffer_timeout(self, timeout_millis: int) -> StreamExecutionEnvironment:
        if isinstance(timeout_millis, bool) or not isinstance(timeout_millis, int) or timeout_millis < 0:
            raise ValueError(f"set_buffer_timeout(): expected milliseconds >= 0, got {timeout_millis!r}")
        self._config.set(ExecutionOptions.BUFFER_TIMEOUT, f"{timeout_millis} ms")
        return self

    def get_buffer_timeout(self) -> int:
        return int(self._config.get(ExecutionOptions.BUFFER_TIMEOUT).total_seconds() * 1000)

    def disable_operator_chaining(self) -> StreamExecutionEnvironment:
        self._config.set(PipelineOptions.OPERATOR_CHAINING, False)
        return self

    def is_chaining_enabled(self) -> bool:
        return bool(self._config.get(PipelineOptions.OPERATOR_CHAINING))

    # ------------------------------------------------------------------ checkpointing
    def enable_checkpointing(self, interval: int, mode: Any = None) -> StreamExecutionEnvironment:
        """Checkpoint every ``interval`` milliseconds (``execution.checkpointing.interval``);
        ``mode``: a CheckpointingMode or "EXACTLY_ONCE" / "AT_LEAST_ONCE"."""
        if isinstance(interval, bool) or not isinstance(interval, int) or interval <= 0:
            raise ValueError(f"enable_checkpointing(): the interval must be positive milliseconds, got {interval!r}")
        self._config.set(CheckpointingOptions.INTERVAL, f"{interval} ms", source="enable_checkpointing()")
        if mode is not None:
            name = getattr(mode, "name", mode)
            self._config.set(CheckpointingOptions.CHECKPOINTING_MODE, str(name), source="enable_checkpointing()")
        return self

    def get_checkpoint_interval(self) -> int:
        """Milliseconds between checkpoints; -1 when checkpointing is off (as PyFlink)."""
        value = self._config.get(CheckpointingOptions.INTERVAL)
        return -1 if value is None else int(value.total_seconds() * 1000)

    def get_checkpoint_config(self) -> CheckpointConfig:
        """PyFlink's CheckpointConfig: its setters write this environment's ``execution.checkpointing.*`` keys."""
        return CheckpointConfig(self._config)

    def set_state_backend(self, state_backend: Any) -> StreamExecutionEnvironment:
        """``HashMapStateBackend()`` (``state.backend.type: hashmap``) or ``EmbeddedRocksDBStateBackend()``
        (``state.backend.type: rocksdb``)."""
        self._config.set(StateBackendOptions.STATE_BACKEND, state_backend_value(state_backend))
        return self

    def set_default_savepoint_directory(self, directory: str) -> StreamExecutionEnvironment:
        self._config.set(
            CheckpointingOptions.SAVEPOINT_DIRECTORY, directory, source="set_default_savepoint_directory()"
        )
        return self

    # ------------------------------------------------------------------ PyFlink's dependency management
    def add_jars(self, *jars_path: str) -> None:
        raise UnsupportedFeatureError(
            "StreamExecutionEnvironment.add_jars()", "yarnflink runs no JVM, so JARs cannot be loaded", JAR_ALTERNATIVE
        )

    def add_classpaths(self, *classpaths: str) -> None:
        raise UnsupportedFeatureError(
            "StreamExecutionEnvironment.add_classpaths()",
            "yarnflink runs no JVM, so there is no Java class path",
            JAR_ALTERNATIVE,
        )

    def add_python_file(self, file_path: str) -> None:
        """Accepted: the cluster's processes run in this machine's Python environment, and
        functions travel pickled with what they reference (``cloudpickle``)."""

    def add_python_archive(self, archive_path: str, target_dir: str | None = None) -> None:
        """Accepted, as ``add_python_file``."""

    def set_python_requirements(self, requirements_file_path: str, requirements_cache_dir: str | None = None) -> None:
        """Accepted, as ``add_python_file``: install the requirements where the cluster runs."""

    def set_python_executable(self, python_exec: str) -> None:
        """Accepted: the cluster's processes run the interpreter that started them."""

    def register_slot_sharing_group(self, slot_sharing_group: Any) -> StreamExecutionEnvironment:
        """Accepted: a slot sharing group's resources are given where it is used (``slot_sharing_group()``)."""
        return self

    def add_source(self, source_func: Any, source_name: str = "Custom Source", type_info: Any = None) -> Any:
        raise UnsupportedFeatureError(
            "StreamExecutionEnvironment.add_source()",
            "it takes a Java SourceFunction",
            "env.from_source(source, watermark_strategy, name) with a FileSource, a NumberSequenceSource or "
            "any object whose to_spec() returns a yarnflink source spec; env.from_collection() for in-memory data",
        )

    def create_input(self, input_format: Any, type_info: Any = None) -> Any:
        raise UnsupportedFeatureError(
            "StreamExecutionEnvironment.create_input()",
            "it takes a Java InputFormat",
            "env.from_source(FileSource...) for files",
        )

    def close(self) -> None:
        """Nothing to release (PyFlink closes its Java gateway here)."""

    # ------------------------------------------------------------------ sources
    def _add_transformation(self, name: str, spec: Any, role: str, inputs: list[Input]) -> Transformation:
        t = Transformation(
            id=self._next_id, name=name, spec=spec, role=role, inputs=inputs, parallelism=self._parallelism
        )
        self._next_id += 1
        self._transformations.append(t)
        return t

    def from_collection(self, collection: Any, type_info: Any = None) -> DataStream:
        """A bounded source of the given records (subtask i emits items[i::parallelism])."""
        if isinstance(collection, (str, bytes, Mapping)) or not hasattr(collection, "__iter__"):
            raise TypeError(
                f"from_collection() needs a list (or other iterable) of records, got {type(collection).__name__}"
            )
        type_info = check_type_info(type_info, "from_collection()")
        items = list(collection)
        if type_info is not None and needs_conversion(type_info):
            items = [type_info.from_python(item) for item in items]  # e.g. tuples -> named Rows
        t = self._add_transformation("Collection", CollectionSourceSpec(items=items), "source", [])
        t.output_type = type_info
        return DataStream(self, t)

    def from_sequence(self, start: int, end: int) -> DataStream:
        """The integers start..end, both included."""
        for what, v in (("start", start), ("end", end)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"from_sequence(): {what} must be an integer, got {type(v).__name__} {v!r}")
        if start > end:
            raise ValueError(f"from_sequence(): start ({start}) must not be larger than end ({end})")
        return DataStream(
            self, self._add_transformation("Sequence", SequenceSourceSpec(start=start, end=end), "source", [])
        )

    def from_source(
        self,
        source: Source,
        watermark_strategy: Any = None,
        source_name: str | None = None,
        type_info: Any = None,
        *,
        name: str | None = None,
    ) -> DataStream:
        """``from_source(FileSource(path, format=...), name="orders")`` or PyFlink's
        ``from_source(source, watermark_strategy, source_name)``. ``source``: a ``FileSource``, a
        ``NumberSequenceSource`` or any ``Source`` (``to_spec()`` gives a source spec). A
        watermark strategy with a timestamp assigner gives the records their timestamps and
        watermarks right after the source (a chained operator, as ``assign_timestamps_and_watermarks``);
        one without (e.g. ``for_monotonous_timestamps()`` alone) leaves them without timestamps, as
        Flink's file sources do."""
        if isinstance(watermark_strategy, str) and source_name is None and name is None:
            name, watermark_strategy = watermark_strategy, None  # from_source(src, "name")
        to_spec = getattr(source, "to_spec", None)
        if isinstance(source, type) or not callable(to_spec):
            raise TypeError(
                "from_source() needs a source: a FileSource, a NumberSequenceSource or an object with to_spec() "
                f"returning a source spec, got {type(source).__name__} {source!r}"
            )
        spec = to_spec()
        if getattr(spec, "kind", None) != "source":
            raise TypeError(f"from_source(): {type(source).__name__}.to_spec() must return a source spec, got {spec!r}")
        if watermark_strategy is not None and not isinstance(watermark_strategy, WatermarkStrategy):
            raise TypeError(
                f"from_source() needs a WatermarkStrategy (or None), got {type(watermark_strategy).__name__}"
            )
        label = name if name is not None else source_name
        if label is not None and (not isinstance(label, str) or not label.strip()):
            raise TypeError(f"from_source(): the name must be a non-empty string, got {label!r}")
        default = "File Source" if isinstance(source, FileSource) else type(source).__name__
        t = self._add_transformation(label or default, spec, "source", [])
        out = check_type_info(type_info, "from_source()") or getattr(source, "output_type", None)
        t.output_type = out
        ds = DataStream(self, t)
        if isinstance(out, RowTypeInfo):  # a bulk format with a row type: dicts -> named Rows
            ds = ds.map(out.from_python, output_type=out)
        if watermark_strategy is not None and watermark_strategy.timestamp_assigner is not None:
            ds = ds.assign_timestamps_and_watermarks(watermark_strategy)
        return ds

    # ------------------------------------------------------------------ graphs
    def _job_name(self, job_name: str | None) -> str:
        if job_name is not None:
            if not isinstance(job_name, str) or not job_name.strip():
                raise TypeError(f"the job name must be a non-empty string, got {job_name!r}")
            return job_name
        return self._config.get(PipelineOptions.NAME) or DEFAULT_JOB_NAME

    def get_stream_graph(self, job_name: str | None = None, clear_transformations: bool = False) -> StreamGraph:
        """The StreamGraph of every operator defined so far."""
        if not self._transformations:
            raise RuntimeError("no operators defined in streaming topology; cannot execute")
        graph = generate_stream_graph(
            self._transformations,
            job_name=self._job_name(job_name),
            default_parallelism=int(self._config.get(CoreOptions.DEFAULT_PARALLELISM)),
            max_parallelism=int(self._config.get(PipelineOptions.MAX_PARALLELISM)),
            runtime_mode=self.resolved_runtime_mode(),
            chaining_enabled=self.is_chaining_enabled(),
            config=self._config.to_dict(),
        )
        if clear_transformations:
            self._transformations = []
        return graph

    def get_job_graph(
        self, job_name: str | None = None, clear_transformations: bool = False, job_id: str | None = None
    ) -> JobGraph:
        """The JobGraph (chained) of every operator defined so far; used by ``yarnflink info``."""
        graph = self.get_stream_graph(job_name)
        jg = create_job_graph(graph, job_id=job_id)
        if clear_transformations:
            self._transformations = []
        return jg

    def get_execution_plan(self) -> str:
        """JSON plan (Flink's ``/jobs/:id/plan`` shape) of the operators defined so far."""
        return json.dumps(job_graph_summary_json(self.get_job_graph()), indent=2)

    # ------------------------------------------------------------------ execution
    def _require_executor(self) -> PipelineExecutor:
        executor = self._executor if self._executor is not None else _context_executor()
        if executor is None:
            raise ExecutorNotConfiguredError(
                "no executor is configured to run this job: run the script with `yarnflink run job.py` "
                "(or install one with yarnflink.api.environment.set_default_executor)"
            )
        return executor

    def execute(self, job_name: str | None = None) -> JobExecutionResult:
        """Build the JobGraph of every operator defined so far and run it (waits for the end
        unless ``execution.attached`` is false); the operators are then cleared, as in Flink."""
        executor = self._require_executor()
        jg = self.get_job_graph(job_name, clear_transformations=True)
        return executor.execute(jg, bool(self._config.get(DeploymentOptions.ATTACHED)))

    def execute_async(self, job_name: str | None = None) -> JobClient:
        """Submit the job and return a JobClient without waiting."""
        executor = self._require_executor()
        jg = self.get_job_graph(job_name, clear_transformations=True)
        return executor.execute_async(jg)

    def _execute_and_collect(self, job_name: str | None, limit: int | None) -> Any:
        try:
            executor = self._require_executor()
        except ExecutorNotConfiguredError:
            self._transformations.pop()  # the collect sink just added
            raise
        jg = self.get_job_graph(job_name, clear_transformations=True)
        it = executor.execute_and_collect(jg)
        if limit is None:
            return it
        out: list[Any] = []
        try:
            if limit > 0:
                for record in it:
                    out.append(record)
                    if len(out) >= limit:
                        break
        finally:
            close = getattr(it, "close", None)
            if callable(close):
                close()
        return out
