"""Options of the schedulers and of failure recovery (Flink's ``RestartStrategyOptions``,
``JobManagerOptions.SCHEDULER`` and friends, ``BatchExecutionOptions``, ``SlowTaskDetectorOptions``).
"""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["RestartStrategyOptions", "SchedulerOptions", "BatchExecutionOptions", "SlowTaskDetectorOptions"]


class RestartStrategyOptions:
    """Whether and when a failed job restarts."""

    RESTART_STRATEGY = ConfigOption(
        "restart-strategy.type",
        "enum",
        None,
        "Restart strategy of jobs: none (also off, disable), fixed-delay (fixeddelay), failure-rate "
        "(failurerate) or exponential-delay (exponentialdelay). If unset: none, or exponential-delay "
        "when checkpointing is enabled.",
        choices=(
            "none",
            "off",
            "disable",
            "fixed-delay",
            "fixeddelay",
            "failure-rate",
            "failurerate",
            "exponential-delay",
            "exponentialdelay",
        ),
    )
    FIXED_DELAY_ATTEMPTS = ConfigOption(
        "restart-strategy.fixed-delay.attempts",
        "int",
        1,
        "Restarts before the job is declared failed (fixed-delay).",
        min_value=0,
    )
    FIXED_DELAY_DELAY = ConfigOption(
        "restart-strategy.fixed-delay.delay",
        "duration",
        "1 s",
        "Delay between a failure and the restart (fixed-delay).",
    )
    FAILURE_RATE_MAX_FAILURES_PER_INTERVAL = ConfigOption(
        "restart-strategy.failure-rate.max-failures-per-interval",
        "int",
        1,
        "Most failures within one failure-rate-interval before the job is declared failed (failure-rate).",
        min_value=1,
    )
    FAILURE_RATE_INTERVAL = ConfigOption(
        "restart-strategy.failure-rate.failure-rate-interval",
        "duration",
        "1 min",
        "Time window in which failures are counted (failure-rate).",
    )
    FAILURE_RATE_DELAY = ConfigOption(
        "restart-strategy.failure-rate.delay",
        "duration",
        "1 s",
        "Delay between a failure and the restart (failure-rate).",
    )
    EXPONENTIAL_DELAY_INITIAL_BACKOFF = ConfigOption(
        "restart-strategy.exponential-delay.initial-backoff",
        "duration",
        "1 s",
        "First delay between a failure and the restart (exponential-delay).",
    )
    EXPONENTIAL_DELAY_MAX_BACKOFF = ConfigOption(
        "restart-strategy.exponential-delay.max-backoff",
        "duration",
        "1 min",
        "Longest delay between a failure and the restart (exponential-delay).",
    )
    EXPONENTIAL_DELAY_BACKOFF_MULTIPLIER = ConfigOption(
        "restart-strategy.exponential-delay.backoff-multiplier",
        "float",
        1.5,
        "Factor by which the delay grows with each restart (exponential-delay; must be > 1).",
    )
    EXPONENTIAL_DELAY_RESET_BACKOFF_THRESHOLD = ConfigOption(
        "restart-strategy.exponential-delay.reset-backoff-threshold",
        "duration",
        "1 h",
        "After this long without a failure the delay and the attempt count start over (exponential-delay).",
    )
    EXPONENTIAL_DELAY_JITTER_FACTOR = ConfigOption(
        "restart-strategy.exponential-delay.jitter-factor",
        "float",
        0.1,
        "Random part of each delay, as a fraction of it, added or subtracted (exponential-delay; 0 to 1).",
        min_value=0,
        max_value=1,
    )
    EXPONENTIAL_DELAY_ATTEMPTS = ConfigOption(
        "restart-strategy.exponential-delay.attempts-before-reset-backoff",
        "int",
        2**31 - 1,
        "Restarts before the job is declared failed, counted since the last reset of the delay (exponential-delay).",
        min_value=1,
    )


class SchedulerOptions:
    """Which scheduler runs a job, what a failure restarts, and the adaptive scheduler's waits."""

    SCHEDULER = ConfigOption(
        "jobmanager.scheduler",
        "enum",
        None,
        "The job's scheduler: Default; Adaptive (STREAMING jobs: start with the slots available and "
        "rescale when TaskManagers come and go); AdaptiveBatch (BATCH jobs: decide the parallelism of "
        "vertices that set none from the size of their inputs). Unset: Default for STREAMING jobs, "
        "AdaptiveBatch for BATCH jobs, as in Flink.",
        choices=("Default", "Adaptive", "AdaptiveBatch"),
    )
    EXECUTION_FAILOVER_STRATEGY = ConfigOption(
        "jobmanager.execution.failover-strategy",
        "enum",
        "region",
        "What a task failure restarts: 'full' (every task), 'region' (the failed task's pipelined region, "
        "the producer regions of results it could not read, and consumer regions that depend on restarted "
        "results) or 'individual' (the failed task alone; only for jobs whose tasks exchange no data).",
        choices=("full", "region", "individual"),
    )
    RESOURCE_WAIT_TIMEOUT = ConfigOption(
        "jobmanager.adaptive-scheduler.resource-wait-timeout",
        "duration",
        "5 min",
        "Adaptive scheduler: how long a job waits for its minimum resources (one slot per slot sharing "
        "group) before it fails; a negative value waits forever.",
    )
    RESOURCE_STABILIZATION_TIMEOUT = ConfigOption(
        "jobmanager.adaptive-scheduler.resource-stabilization-timeout",
        "duration",
        "10 s",
        "Adaptive scheduler: once the minimum resources are there, how long the set of available slots "
        "must stay unchanged before the job starts or rescales with fewer slots than it could use.",
    )
    MIN_PARALLELISM_INCREASE = ConfigOption(
        "jobmanager.adaptive-scheduler.min-parallelism-increase",
        "int",
        1,
        "Adaptive scheduler: a running job scales up only if some vertex would gain at least this many subtasks.",
        min_value=1,
    )


class BatchExecutionOptions:
    """BATCH jobs: decided parallelism and speculative execution."""

    ADAPTIVE_AUTO_PARALLELISM_ENABLED = ConfigOption(
        "execution.batch.adaptive.auto-parallelism.enabled",
        "bool",
        True,
        "AdaptiveBatch scheduler: decide the parallelism of vertices that set none from the size of "
        "their inputs; false keeps the parallelism the JobGraph says.",
    )
    ADAPTIVE_AUTO_PARALLELISM_MIN_PARALLELISM = ConfigOption(
        "execution.batch.adaptive.auto-parallelism.min-parallelism",
        "int",
        1,
        "AdaptiveBatch scheduler: the lower bound of a decided parallelism.",
        min_value=1,
    )
    ADAPTIVE_AUTO_PARALLELISM_MAX_PARALLELISM = ConfigOption(
        "execution.batch.adaptive.auto-parallelism.max-parallelism",
        "int",
        128,
        "AdaptiveBatch scheduler: the upper bound of a decided parallelism (also bounded by the "
        "vertex's max parallelism). Producers write this many subpartitions for such a consumer.",
        min_value=1,
        max_value=32768,
    )
    ADAPTIVE_AUTO_PARALLELISM_AVG_DATA_VOLUME_PER_TASK = ConfigOption(
        "execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task",
        "memory",
        "16 mb",
        "AdaptiveBatch scheduler: the amount of input one subtask of a vertex whose parallelism is "
        "decided should read (the bytes its producers wrote, divided by this, rounded up).",
    )
    SPECULATIVE_ENABLED = ConfigOption(
        "execution.batch.speculative.enabled",
        "bool",
        False,
        "BATCH jobs: start a speculative attempt of a subtask much slower than its finished peers on "
        "another TaskManager; the first attempt to finish wins and the other is cancelled.",
    )
    SPECULATIVE_MAX_CONCURRENT_EXECUTIONS = ConfigOption(
        "execution.batch.speculative.max-concurrent-executions",
        "int",
        2,
        "Speculative execution: attempts of one subtask that may run at the same time.",
        min_value=2,
    )


class SlowTaskDetectorOptions:
    """Speculative execution: which subtasks are slow."""

    CHECK_INTERVAL = ConfigOption(
        "slow-task-detector.check-interval",
        "duration",
        "1 s",
        "Speculative execution: how often running subtasks are checked for slowness.",
    )
    EXECUTION_TIME_BASELINE_RATIO = ConfigOption(
        "slow-task-detector.execution-time.baseline-ratio",
        "float",
        0.75,
        "Speculative execution: the share of a vertex's subtasks that must have finished before the "
        "median of their execution times is a baseline.",
        min_value=0.0,
        max_value=1.0,
    )
    EXECUTION_TIME_BASELINE_MULTIPLIER = ConfigOption(
        "slow-task-detector.execution-time.baseline-multiplier",
        "float",
        1.5,
        "Speculative execution: a subtask running longer than this times the baseline is slow.",
        min_value=1.0,
    )
    EXECUTION_TIME_BASELINE_LOWER_BOUND = ConfigOption(
        "slow-task-detector.execution-time.baseline-lower-bound",
        "duration",
        "1 min",
        "Speculative execution: the smallest baseline (short subtasks are never slow).",
    )
