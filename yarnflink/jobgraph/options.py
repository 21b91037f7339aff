"""Options of a job: set on the environment or the command line, carried in the JobGraph's
configuration and read by the graph generators and the runtime (Flink's ``CoreOptions``,
``PipelineOptions`` and ``ExecutionOptions``).
"""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["CoreOptions", "PipelineOptions", "ExecutionOptions"]


class CoreOptions:
    """Job-level defaults every program inherits."""

    DEFAULT_PARALLELISM = ConfigOption(
        "parallelism.default",
        "int",
        1,
        "Default parallelism of operators that set none (StreamExecutionEnvironment.set_parallelism overrides it).",
        min_value=1,
    )


class PipelineOptions:
    """How a program becomes a JobGraph."""

    MAX_PARALLELISM = ConfigOption(
        "pipeline.max-parallelism",
        "int",
        -1,
        "Default max parallelism (number of key groups) of operators that set none; -1 derives it from "
        "the parallelism as Flink does (roundUpToPowerOfTwo(p + p/2), between 128 and 32768).",
        min_value=-1,
        max_value=32768,
    )
    OPERATOR_CHAINING = ConfigOption(
        "pipeline.operator-chaining.enabled",
        "bool",
        True,
        "Chain operators connected by forward edges of equal parallelism into one task.",
    )
    NAME = ConfigOption(
        "pipeline.name",
        "str",
        None,
        "Job name used when execute() is called without one.",
    )
    AUTO_WATERMARK_INTERVAL = ConfigOption(
        "pipeline.auto-watermark-interval",
        "duration",
        "200 ms",
        "Interval of periodic watermark emission; 0 disables periodic watermarks.",
    )


class ExecutionOptions:
    """How a job's records and exchanges run."""

    RUNTIME_MODE = ConfigOption(
        "execution.runtime-mode",
        "enum",
        "STREAMING",
        "STREAMING, BATCH, or AUTOMATIC (BATCH if every source is bounded, which all yarnflink sources are).",
        choices=("STREAMING", "BATCH", "AUTOMATIC"),
    )
    BUFFER_TIMEOUT = ConfigOption(
        "execution.buffer-timeout",
        "duration",
        "100 ms",
        "Longest time an output buffer waits to fill before it is flushed downstream (0 flushes every record).",
    )
    BATCH_SHUFFLE_MODE = ConfigOption(
        "execution.batch-shuffle-mode",
        "enum",
        "ALL_EXCHANGES_BLOCKING",
        "Exchanges of BATCH jobs: ALL_EXCHANGES_BLOCKING (results are written to the producer's local "
        "disk and read by the next region, which starts when they are complete) or ALL_EXCHANGES_PIPELINED.",
        choices=("ALL_EXCHANGES_BLOCKING", "ALL_EXCHANGES_PIPELINED"),
    )
