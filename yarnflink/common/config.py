"""Configuration with Flink's keys.

Every option yarnflink knows is declared once, in this module (``OPTIONS``), with its type,
default and description; the REST ``/config`` endpoint and the docs list them from here. Keys
under ``PASSTHROUGH_PREFIXES`` are accepted without validation.

A ``Configuration`` stores strings (``key -> str``, as written by the user or canonicalised from
a typed value) and parses on ``get``:

* ``duration``: ``"10 s"``, ``"100ms"``, ``"5 min"``, ``"1 h"``; a plain number is milliseconds;
  ``get`` returns a ``datetime.timedelta``.
* ``memory``: ``"1728m"``, ``"1 gb"``, ``"64 kb"`` (binary units, as Flink: 1m = 1 MiB); a plain
  number is bytes; ``get`` returns an ``int`` number of bytes.
* ``enum``: case-insensitive, ``get`` returns the canonical choice.

``load_configuration`` reads ``yarnflink.yaml`` (flat ``key: value`` lines and/or nested maps, which
are flattened with dots as in Flink 1.19+'s ``config.yaml``) and then applies ``-D key=value``
overrides.
"""

from __future__ import annotations

import datetime
import difflib
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

__all__ = [
    "ConfigError",
    "ConfigOption",
    "Configuration",
    "OPTIONS",
    "PASSTHROUGH_PREFIXES",
    "CONF_FILE_NAME",
    "CONF_DIR_ENV",
    "load_configuration",
    "parse_duration",
    "parse_memory",
    "format_duration",
    "format_memory",
    "option",
    "is_known_key",
]

CONF_FILE_NAME = "yarnflink.yaml"
CONF_DIR_ENV = "YARNFLINK_CONF_DIR"
DEFAULT_CONF_DIR = "conf"

#: Keys starting with one of these are stored as given, never validated.
PASSTHROUGH_PREFIXES: tuple[str, ...] = ("spark.", "env.java.", "metrics.", "yarnflink.test.")

OPTION_TYPES = ("int", "float", "bool", "str", "duration", "memory", "enum")
_PY_TYPES = {int: "int", float: "float", bool: "bool", str: "str"}


class ConfigError(ValueError):
    """A configuration key or value is invalid; the message says which and where it came from."""


# ----------------------------------------------------------------------------- parsing
_NUMBER_UNIT = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([^\s0-9.]*)\s*$")

_DURATION_UNITS_NS: dict[str, int] = {}
for _names, _ns in (
    (("ns", "nano", "nanos", "nanosecond", "nanoseconds"), 1),
    (("us", "µs", "micro", "micros", "microsecond", "microseconds"), 1_000),
    (("ms", "milli", "millis", "millisecond", "milliseconds"), 1_000_000),
    (("s", "sec", "secs", "second", "seconds"), 1_000_000_000),
    (("m", "min", "mins", "minute", "minutes"), 60 * 1_000_000_000),
    (("h", "hour", "hours"), 3600 * 1_000_000_000),
    (("d", "day", "days"), 86400 * 1_000_000_000),
):
    for _n in _names:
        _DURATION_UNITS_NS[_n] = _ns

_MEMORY_UNITS: dict[str, int] = {}
for _names, _mult in (
    (("", "b", "bytes"), 1),
    (("k", "kb", "kib", "kibibytes"), 1 << 10),
    (("m", "mb", "mib", "mebibytes"), 1 << 20),
    (("g", "gb", "gib", "gibibytes"), 1 << 30),
    (("t", "tb", "tib", "tebibytes"), 1 << 40),
):
    for _n in _names:
        _MEMORY_UNITS[_n] = _mult


def parse_duration(text: str | int | float | datetime.timedelta) -> datetime.timedelta:
    """``"10 s"``, ``"100ms"``, ``"5 min"``; a plain number (or an int) is milliseconds."""
    if isinstance(text, datetime.timedelta):
        return text
    if isinstance(text, bool):
        raise ValueError("not a duration")
    if isinstance(text, (int, float)):
        if text < 0 or not math.isfinite(text):
            raise ValueError("negative duration")
        return datetime.timedelta(milliseconds=text)
    m = _NUMBER_UNIT.match(str(text))
    if not m:
        raise ValueError(f"not a duration: {text!r}")
    amount, unit = float(m.group(1)), m.group(2).lower()
    if unit == "":
        unit = "ms"
    if unit not in _DURATION_UNITS_NS:
        raise ValueError(f"unknown time unit {m.group(2)!r}")
    return datetime.timedelta(microseconds=amount * _DURATION_UNITS_NS[unit] / 1000)


def parse_memory(text: str | int) -> int:
    """``"1728m"``, ``"1 gb"``, ``"64 kb"`` (binary units); a plain number is bytes. Returns bytes."""
    if isinstance(text, bool):
        raise ValueError("not a memory size")
    if isinstance(text, int):
        if text < 0:
            raise ValueError("negative memory size")
        return text
    m = _NUMBER_UNIT.match(str(text))
    if not m:
        raise ValueError(f"not a memory size: {text!r}")
    amount, unit = float(m.group(1)), m.group(2).lower()
    if unit not in _MEMORY_UNITS:
        raise ValueError(f"unknown memory unit {m.group(2)!r}")
    return int(round(amount * _MEMORY_UNITS[unit]))


def format_duration(value: datetime.timedelta) -> str:
    """Shortest exact form: ``"100 ms"``, ``"10 s"``, ``"5 min"``."""
    ns = (value // datetime.timedelta(microseconds=1)) * 1000
    for unit, size in (
        ("d", 86400 * 10**9),
        ("h", 3600 * 10**9),
        ("min", 60 * 10**9),
        ("s", 10**9),
        ("ms", 10**6),
        ("us", 10**3),
    ):
        if ns and ns % size == 0:
            return f"{ns // size} {unit}"
    return f"{ns} ns" if ns else "0 ms"


def format_memory(num_bytes: int) -> str:
    """Shortest exact form: ``"1728m"`` style, e.g. ``"1728 mb"``, ``"1 gb"``, ``"100 bytes"``."""
    for unit, size in (("tb", 1 << 40), ("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10)):
        if num_bytes and num_bytes % size == 0:
            return f"{num_bytes // size} {unit}"
    return f"{num_bytes} bytes"


_TRUE = {"true"}
_FALSE = {"false"}


# ----------------------------------------------------------------------------- options
@dataclass(frozen=True)
class ConfigOption:
    """One configuration key: its type, default and description.

    ``type`` is one of ``int, float, bool, str, duration, memory, enum`` (the Python types
    ``int/float/bool/str`` are accepted too). ``default`` may be given typed or as a string
    (``"100 ms"``); it is stored typed. ``choices`` (enum) are canonical spellings, matched
    case-insensitively.
    """

    key: str
    type: Any
    default: Any
    description: str
    choices: tuple[str, ...] | None = None
    min_value: float | None = None
    max_value: float | None = None
    deprecated_keys: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        t = _PY_TYPES.get(self.type, self.type)
        if t not in OPTION_TYPES:
            raise TypeError(f"ConfigOption {self.key!r}: unknown type {self.type!r}")
        object.__setattr__(self, "type", t)
        if t == "enum":
            if not self.choices:
                raise TypeError(f"ConfigOption {self.key!r}: enum needs choices")
            object.__setattr__(self, "choices", tuple(self.choices))
        if self.default is not None:
            object.__setattr__(self, "default", self.parse(self.default))

    # typed value <- string (or typed) value; raises ConfigError
    def parse(self, raw: Any, source: str | None = None) -> Any:
        try:
            value = self._parse(raw)
        except (ValueError, TypeError, OverflowError):
            raise ConfigError(
                f"invalid value {_show(raw)} for {self.key!r}: expected {self.expectation()}" + _from(source)
            ) from None
        if self.min_value is not None and value < self.min_value:
            raise ConfigError(
                f"invalid value {_show(raw)} for {self.key!r}: must be at least {_num(self.min_value)}" + _from(source)
            )
        if self.max_value is not None and value > self.max_value:
            raise ConfigError(
                f"invalid value {_show(raw)} for {self.key!r}: must be at most {_num(self.max_value)}" + _from(source)
            )
        return value

    def _parse(self, raw: Any) -> Any:
        t = self.type
        if t == "int":
            if isinstance(raw, bool):
                raise ValueError
            if isinstance(raw, int):
                return raw
            if isinstance(raw, float):
                if raw.is_integer():
                    return int(raw)
                raise ValueError
            return int(str(raw).strip())
        if t == "float":
            if isinstance(raw, bool):
                raise ValueError
            v = float(raw if isinstance(raw, (int, float)) else str(raw).strip())
            if not math.isfinite(v):
                raise ValueError
            return v
        if t == "bool":
            if isinstance(raw, bool):
                return raw
            s = str(raw).strip().lower()
            if s in _TRUE:
                return True
            if s in _FALSE:
                return False
            raise ValueError
        if t == "str":
            if isinstance(raw, (dict, list, tuple, set)):
                raise ValueError
            return str(raw)
        if t == "duration":
            return parse_duration(raw)
        if t == "memory":
            return parse_memory(raw)
        # enum
        s = str(getattr(raw, "name", raw)).strip()
        for c in self.choices or ():
            if c.lower() == s.lower():
                return c
        raise ValueError

    def to_string(self, value: Any, source: str | None = None) -> str:
        """Canonical string for a typed or string value (validated)."""
        if isinstance(value, str):
            self.parse(value, source)
            return value
        typed = self.parse(value, source)
        if self.type == "bool":
            return "true" if typed else "false"
        if self.type == "duration":
            return format_duration(typed)
        if self.type == "memory":
            return format_memory(typed)
        return str(typed)

    def expectation(self) -> str:
        return {
            "int": "an integer",
            "float": "a number",
            "bool": "true or false",
            "str": "a string",
            "duration": "a duration such as '10 s', '100 ms' or '5 min' (a plain number is milliseconds)",
            "memory": "a memory size such as '1728m', '512 mb' or '1 gb' (a plain number is bytes)",
            "enum": "one of " + ", ".join(self.choices or ()),
        }[self.type]

    def default_string(self) -> str | None:
        """The default as a user would write it (None if no default)."""
        if self.default is None:
            return None
        return self.to_string(self.default)

    def describe(self) -> dict[str, Any]:
        """JSON-friendly description (for REST ``/config`` and docs)."""
        d: dict[str, Any] = {
            "key": self.key,
            "type": self.type,
            "default": self.default_string(),
            "description": self.description,
        }
        if self.choices:
            d["choices"] = list(self.choices)
        return d


def _show(raw: Any) -> str:
    return repr(raw if isinstance(raw, str) else str(raw))


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _from(source: str | None) -> str:
    return f" (from {source})" if source else ""


OPTIONS: dict[str, ConfigOption] = {}


def _opt(*args: Any, **kwargs: Any) -> ConfigOption:
    o = ConfigOption(*args, **kwargs)
    if o.key in OPTIONS:
        raise RuntimeError(f"duplicate option {o.key}")
    OPTIONS[o.key] = o
    return o


# --- pipeline / execution (job level)
PARALLELISM_DEFAULT = _opt(
    "parallelism.default",
    "int",
    1,
    "Default parallelism of operators that set none (StreamExecutionEnvironment.set_parallelism overrides it).",
    min_value=1,
)
PIPELINE_MAX_PARALLELISM = _opt(
    "pipeline.max-parallelism",
    "int",
    -1,
    "Default max parallelism (number of key groups) of operators that set none; -1 derives it from "
    "the parallelism as Flink does (roundUpToPowerOfTwo(p + p/2), between 128 and 32768).",
    min_value=-1,
    max_value=32768,
)
PIPELINE_OPERATOR_CHAINING = _opt(
    "pipeline.operator-chaining.enabled",
    "bool",
    True,
    "Chain operators connected by forward edges of equal parallelism into one task.",
)
PIPELINE_NAME = _opt(
    "pipeline.name",
    "str",
    None,
    "Job name used when execute() is called without one.",
)
RUNTIME_MODE = _opt(
    "execution.runtime-mode",
    "enum",
    "STREAMING",
    "STREAMING, BATCH, or AUTOMATIC (BATCH if every source is bounded, which all yarnflink sources are).",
    choices=("STREAMING", "BATCH", "AUTOMATIC"),
)
BUFFER_TIMEOUT = _opt(
    "execution.buffer-timeout",
    "duration",
    "100 ms",
    "Longest time an output buffer waits to fill before it is flushed downstream (0 flushes every record).",
)
EXECUTION_ATTACHED = _opt(
    "execution.attached",
    "bool",
    True,
    "Whether execute() waits for the job to finish (false: submit and return, as `yarnflink run -d`).",
)
CLIENT_TIMEOUT = _opt(
    "client.timeout",
    "duration",
    "60 s",
    "Timeout of the client's requests to the cluster.",
)

# --- task manager
TM_NUM_SLOTS = _opt(
    "taskmanager.numberOfTaskSlots",
    "int",
    1,
    "Number of task slots each TaskManager offers.",
    min_value=1,
)
TM_PROCESS_MEMORY = _opt(
    "taskmanager.memory.process.size",
    "memory",
    "1728m",
    "Total process memory of a TaskManager.",
)
TM_HOST = _opt(
    "taskmanager.host",
    "str",
    None,
    "Address the TaskManager advertises to the cluster (default: detected).",
)
TM_DATA_PORT = _opt(
    "taskmanager.data.port",
    "int",
    0,
    "Port of the TaskManager's data (shuffle) server; 0 picks a free port.",
    min_value=0,
    max_value=65535,
)
TM_RPC_PORT = _opt(
    "taskmanager.rpc.port",
    "int",
    0,
    "Port of the TaskManager's RPC endpoint; 0 picks a free port.",
    min_value=0,
    max_value=65535,
)
BUFFERS_PER_CHANNEL = _opt(
    "taskmanager.network.memory.buffers-per-channel",
    "int",
    8,
    "Network buffers per outgoing/incoming channel (credits).",
    min_value=1,
)
MAX_BYTES_PER_CHANNEL = _opt(
    "taskmanager.network.memory.max-bytes-per-channel",
    "memory",
    "8 mb",
    "Upper bound of buffered bytes per channel before the writer blocks (backpressure).",
)

# --- job manager / REST
JM_RPC_ADDRESS = _opt(
    "jobmanager.rpc.address",
    "str",
    "localhost",
    "Address of the JobManager's RPC endpoint.",
)
JM_RPC_PORT = _opt(
    "jobmanager.rpc.port",
    "int",
    6123,
    "Port of the JobManager's RPC endpoint.",
    min_value=0,
    max_value=65535,
)
REST_ADDRESS = _opt(
    "rest.address",
    "str",
    "localhost",
    "Address clients use to reach the REST endpoint.",
)
REST_PORT = _opt(
    "rest.port",
    "int",
    8081,
    "Port of the REST endpoint (0 picks a free port).",
    min_value=0,
    max_value=65535,
)
REST_BIND_ADDRESS = _opt(
    "rest.bind-address",
    "str",
    None,
    "Address the REST server binds to (default: rest.address).",
)
REST_AWAIT_LEADER_TIMEOUT = _opt(
    "rest.await-leader-timeout",
    "duration",
    "30000 ms",
    "How long a client of an HA cluster waits for a leading master's REST endpoint (retrying a "
    "standby's 503 or a gone master) before it gives up.",
)
REST_MAX_CONTENT_LENGTH = _opt(
    "rest.server.max-content-length",
    "memory",
    "100 mb",
    "Largest request body the REST server accepts.",
)
HEARTBEAT_INTERVAL = _opt(
    "heartbeat.interval",
    "duration",
    "10 s",
    "Interval between heartbeats (TaskManager <-> ResourceManager / JobMaster).",
)
HEARTBEAT_TIMEOUT = _opt(
    "heartbeat.timeout",
    "duration",
    "50 s",
    "A peer that sent no heartbeat for this long is considered lost.",
)
SLOT_REQUEST_TIMEOUT = _opt(
    "slot.request.timeout",
    "duration",
    "300 s",
    "How long a job waits for the slots it requested before failing.",
)
SLOT_IDLE_TIMEOUT = _opt(
    "slot.idle.timeout",
    "duration",
    "50 s",
    "How long a JobMaster keeps a slot whose tasks have ended (for the next region or a restart) "
    "before giving it back.",
)

# --- failure recovery (yarnflink.scheduler)
RESTART_STRATEGY = _opt(
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
RESTART_FIXED_DELAY_ATTEMPTS = _opt(
    "restart-strategy.fixed-delay.attempts",
    "int",
    1,
    "Restarts before the job is declared failed (fixed-delay).",
    min_value=0,
)
RESTART_FIXED_DELAY_DELAY = _opt(
    "restart-strategy.fixed-delay.delay",
    "duration",
    "1 s",
    "Delay between a failure and the restart (fixed-delay).",
)
RESTART_FAILURE_RATE_MAX = _opt(
    "restart-strategy.failure-rate.max-failures-per-interval",
    "int",
    1,
    "Most failures within one failure-rate-interval before the job is declared failed (failure-rate).",
    min_value=1,
)
RESTART_FAILURE_RATE_INTERVAL = _opt(
    "restart-strategy.failure-rate.failure-rate-interval",
    "duration",
    "1 min",
    "Time window in which failures are counted (failure-rate).",
)
RESTART_FAILURE_RATE_DELAY = _opt(
    "restart-strategy.failure-rate.delay",
    "duration",
    "1 s",
    "Delay between a failure and the restart (failure-rate).",
)
RESTART_EXP_INITIAL_BACKOFF = _opt(
    "restart-strategy.exponential-delay.initial-backoff",
    "duration",
    "1 s",
    "First delay between a failure and the restart (exponential-delay).",
)
RESTART_EXP_MAX_BACKOFF = _opt(
    "restart-strategy.exponential-delay.max-backoff",
    "duration",
    "1 min",
    "Longest delay between a failure and the restart (exponential-delay).",
)
RESTART_EXP_MULTIPLIER = _opt(
    "restart-strategy.exponential-delay.backoff-multiplier",
    "float",
    1.5,
    "Factor by which the delay grows with each restart (exponential-delay; must be > 1).",
)
RESTART_EXP_RESET_THRESHOLD = _opt(
    "restart-strategy.exponential-delay.reset-backoff-threshold",
    "duration",
    "1 h",
    "After this long without a failure the delay and the attempt count start over (exponential-delay).",
)
RESTART_EXP_JITTER = _opt(
    "restart-strategy.exponential-delay.jitter-factor",
    "float",
    0.1,
    "Random part of each delay, as a fraction of it, added or subtracted (exponential-delay; 0 to 1).",
    min_value=0,
    max_value=1,
)
RESTART_EXP_ATTEMPTS = _opt(
    "restart-strategy.exponential-delay.attempts-before-reset-backoff",
    "int",
    2**31 - 1,
    "Restarts before the job is declared failed, counted since the last reset of the delay (exponential-delay).",
    min_value=1,
)
FAILOVER_STRATEGY = _opt(
    "jobmanager.execution.failover-strategy",
    "enum",
    "region",
    "What a task failure restarts: 'full' (every task), 'region' (the failed task's pipelined region, "
    "the producer regions of results it could not read, and consumer regions that depend on restarted "
    "results) or 'individual' (the failed task alone; only for jobs whose tasks exchange no data).",
    choices=("full", "region", "individual"),
)
EXCEPTION_HISTORY_SIZE = _opt(
    "web.exception-history-size",
    "int",
    16,
    "Number of failures a job's exception history keeps (GET /jobs/:jobid/exceptions).",
    min_value=1,
)
BATCH_SHUFFLE_MODE = _opt(
    "execution.batch-shuffle-mode",
    "enum",
    "ALL_EXCHANGES_BLOCKING",
    "Exchanges of BATCH jobs: ALL_EXCHANGES_BLOCKING (results are written to the producer's local "
    "disk and read by the next region, which starts when they are complete) or ALL_EXCHANGES_PIPELINED.",
    choices=("ALL_EXCHANGES_BLOCKING", "ALL_EXCHANGES_PIPELINED"),
)
SCHEDULER_TYPE = _opt(
    "jobmanager.scheduler",
    "enum",
    None,
    "The job's scheduler: Default; Adaptive (STREAMING jobs: start with the slots available and "
    "rescale when TaskManagers come and go); AdaptiveBatch (BATCH jobs: decide the parallelism of "
    "vertices that set none from the size of their inputs). Unset: Default for STREAMING jobs, "
    "AdaptiveBatch for BATCH jobs, as in Flink.",
    choices=("Default", "Adaptive", "AdaptiveBatch"),
)
ADAPTIVE_SCHEDULER_RESOURCE_WAIT_TIMEOUT = _opt(
    "jobmanager.adaptive-scheduler.resource-wait-timeout",
    "duration",
    "5 min",
    "Adaptive scheduler: how long a job waits for its minimum resources (one slot per slot sharing "
    "group) before it fails; a negative value waits forever.",
)
ADAPTIVE_SCHEDULER_RESOURCE_STABILIZATION_TIMEOUT = _opt(
    "jobmanager.adaptive-scheduler.resource-stabilization-timeout",
    "duration",
    "10 s",
    "Adaptive scheduler: once the minimum resources are there, how long the set of available slots "
    "must stay unchanged before the job starts or rescales with fewer slots than it could use.",
)
ADAPTIVE_SCHEDULER_MIN_PARALLELISM_INCREASE = _opt(
    "jobmanager.adaptive-scheduler.min-parallelism-increase",
    "int",
    1,
    "Adaptive scheduler: a running job scales up only if some vertex would gain at least this many subtasks.",
    min_value=1,
)
ADAPTIVE_BATCH_AUTO_PARALLELISM_ENABLED = _opt(
    "execution.batch.adaptive.auto-parallelism.enabled",
    "bool",
    True,
    "AdaptiveBatch scheduler: decide the parallelism of vertices that set none from the size of "
    "their inputs; false keeps the parallelism the JobGraph says.",
)
ADAPTIVE_BATCH_MIN_PARALLELISM = _opt(
    "execution.batch.adaptive.auto-parallelism.min-parallelism",
    "int",
    1,
    "AdaptiveBatch scheduler: the lower bound of a decided parallelism.",
    min_value=1,
)
ADAPTIVE_BATCH_MAX_PARALLELISM = _opt(
    "execution.batch.adaptive.auto-parallelism.max-parallelism",
    "int",
    128,
    "AdaptiveBatch scheduler: the upper bound of a decided parallelism (also bounded by the "
    "vertex's max parallelism). Producers write this many subpartitions for such a consumer.",
    min_value=1,
    max_value=32768,
)
ADAPTIVE_BATCH_AVG_DATA_VOLUME_PER_TASK = _opt(
    "execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task",
    "memory",
    "16 mb",
    "AdaptiveBatch scheduler: the amount of input one subtask of a vertex whose parallelism is "
    "decided should read (the bytes its producers wrote, divided by this, rounded up).",
)
SPECULATIVE_ENABLED = _opt(
    "execution.batch.speculative.enabled",
    "bool",
    False,
    "BATCH jobs: start a speculative attempt of a subtask much slower than its finished peers on "
    "another TaskManager; the first attempt to finish wins and the other is cancelled.",
)
SPECULATIVE_MAX_CONCURRENT_EXECUTIONS = _opt(
    "execution.batch.speculative.max-concurrent-executions",
    "int",
    2,
    "Speculative execution: attempts of one subtask that may run at the same time.",
    min_value=2,
)
SLOW_TASK_DETECTOR_CHECK_INTERVAL = _opt(
    "slow-task-detector.check-interval",
    "duration",
    "1 s",
    "Speculative execution: how often running subtasks are checked for slowness.",
)
SLOW_TASK_DETECTOR_BASELINE_RATIO = _opt(
    "slow-task-detector.execution-time.baseline-ratio",
    "float",
    0.75,
    "Speculative execution: the share of a vertex's subtasks that must have finished before the "
    "median of their execution times is a baseline.",
    min_value=0.0,
    max_value=1.0,
)
SLOW_TASK_DETECTOR_BASELINE_MULTIPLIER = _opt(
    "slow-task-detector.execution-time.baseline-multiplier",
    "float",
    1.5,
    "Speculative execution: a subtask running longer than this times the baseline is slow.",
    min_value=1.0,
)
SLOW_TASK_DETECTOR_BASELINE_LOWER_BOUND = _opt(
    "slow-task-detector.execution-time.baseline-lower-bound",
    "duration",
    "1 min",
    "Speculative execution: the smallest baseline (short subtasks are never slow).",
)
CLUSTER_EVENLY_SPREAD_OUT_SLOTS = _opt(
    "cluster.evenly-spread-out-slots",
    "bool",
    False,
    "Allocate slots from the least used TaskManager instead of filling one TaskManager first.",
)
HEARTBEAT_RPC_FAILURE_THRESHOLD = _opt(
    "heartbeat.rpc-failure-threshold",
    "int",
    2,
    "Number of consecutive heartbeat RPCs that fail because the target is unreachable before the "
    "target is considered lost (detection after about heartbeat.interval times this); -1 disables it.",
    min_value=-1,
)
FINE_GRAINED_RESOURCE_MANAGEMENT = _opt(
    "cluster.fine-grained-resource-management.enabled",
    "bool",
    False,
    "Carve slots out of a TaskManager's total resources to fit each slot sharing group's "
    "ResourceProfile; otherwise all slots are equal and profiles are ignored.",
)
SLOTMANAGER_MAX_SLOTS = _opt(
    "slotmanager.number-of-slots.max",
    "int",
    2**31 - 1,
    "Maximum number of slots the cluster allocates (TaskManagers the ResourceManager starts count with "
    "all their slots). No effect on standalone clusters, whose TaskManagers register by themselves.",
    min_value=1,
)
SLOTMANAGER_MIN_SLOTS = _opt(
    "slotmanager.number-of-slots.min",
    "int",
    0,
    "Minimum number of slots the cluster keeps: TaskManagers for them are started at once and not "
    "released when idle. No effect on standalone clusters. A local session started with -n N "
    "defaults it to N times the slots per TaskManager.",
    min_value=0,
)
RM_TASKMANAGER_TIMEOUT = _opt(
    "resourcemanager.taskmanager-timeout",
    "duration",
    "30 s",
    "A TaskManager the ResourceManager started that has been idle (no allocated slot) this long is "
    "stopped, unless the cluster would drop below slotmanager.number-of-slots.min.",
)
RM_TASKMANAGER_REGISTRATION_TIMEOUT = _opt(
    "resourcemanager.taskmanager-registration.timeout",
    "duration",
    "5 min",
    "A started TaskManager that has not registered within this time is stopped (a failed start) and requested anew.",
)
RM_START_WORKER_MAX_FAILURE_RATE = _opt(
    "resourcemanager.start-worker.max-failure-rate",
    "float",
    10.0,
    "Maximum number of failed TaskManager starts per minute; beyond it, starting TaskManagers pauses "
    "for resourcemanager.start-worker.retry-interval.",
    min_value=0,
)
RM_START_WORKER_RETRY_INTERVAL = _opt(
    "resourcemanager.start-worker.retry-interval",
    "duration",
    "3 s",
    "How long starting TaskManagers pauses once resourcemanager.start-worker.max-failure-rate is exceeded.",
)
TM_CPU_CORES = _opt(
    "taskmanager.cpu.cores",
    "float",
    None,
    "CPU cores a TaskManager offers to its slots (default: its number of slots).",
    min_value=0,
)
TM_TASK_HEAP = _opt(
    "taskmanager.memory.task.heap.size",
    "memory",
    None,
    "Task heap a TaskManager offers to its slots (default: derived from taskmanager.memory.process.size "
    "as Flink does; 384 mb for 1728m).",
)
TM_TASK_OFF_HEAP = _opt(
    "taskmanager.memory.task.off-heap.size",
    "memory",
    "0 bytes",
    "Task off-heap memory a TaskManager offers to its slots.",
)
TM_MANAGED_MEMORY = _opt(
    "taskmanager.memory.managed.size",
    "memory",
    None,
    "Managed memory a TaskManager offers to its slots (default: 0.4 of its Flink memory; 512 mb for 1728m).",
)

# --- high availability (yarnflink.highavailability)
HA_TYPE = _opt(
    "high-availability.type",
    "enum",
    "NONE",
    "NONE: one master, no failover. ZOOKEEPER: masters elect a leader in ZooKeeper; JobGraphs, job "
    "results and checkpoint pointers survive the leader.",
    choices=("NONE", "ZOOKEEPER"),
)
HA_ZOOKEEPER_QUORUM = _opt(
    "high-availability.zookeeper.quorum",
    "str",
    None,
    "ZooKeeper servers as host:port,host:port,... (required with high-availability.type: ZOOKEEPER).",
)
HA_ZOOKEEPER_PATH_ROOT = _opt(
    "high-availability.zookeeper.path.root",
    "str",
    "/yarnflink",
    "ZooKeeper node under which every cluster keeps its HA data.",
)
HA_CLUSTER_ID = _opt(
    "high-availability.cluster-id",
    "str",
    "/default",
    "Identifies the cluster: its HA data lives under path.root/cluster-id in ZooKeeper and under "
    "storageDir/cluster-id on the file system.",
)
# YARN deployment (yarnflink.deployment.yarn; docs/yarn.md)
YARN_APPLICATION_QUEUE = _opt("yarn.application.queue", "str", None, "YARN queue of the application.")
YARN_APPLICATION_NAME = _opt(
    "yarn.application.name", "str", None, "YARN application name (default: 'yarnflink <mode>')."
)
YARN_APPLICATION_ATTEMPTS = _opt(
    "yarn.application-attempts",
    "int",
    1,
    "How often YARN starts the ApplicationMaster (skein max_attempts).",
    min_value=1,
)
YARN_CONTAINERS_VCORES = _opt(
    "yarn.containers.vcores",
    "int",
    None,
    "vcores of a TaskExecutor container (default: taskmanager.numberOfTaskSlots).",
    min_value=1,
)
YARN_SHIP_ARCHIVES = _opt(
    "yarn.ship-archives",
    "str",
    None,
    "Comma-separated packed Python environments (conda-pack/venv-pack .tar.gz) shipped "
    "to every container; the first one's bin/python runs yarnflink.",
)
YARN_PYTHON_EXECUTABLE = _opt(
    "yarn.python.executable",
    "str",
    None,
    "Python interpreter present on every node (default: python3, or the first shipped archive's bin/python).",
)
JM_PROCESS_SIZE = _opt(
    "jobmanager.memory.process.size",
    "memory",
    "1600m",
    "Total process memory of the master (the YARN ApplicationMaster container).",
)
KERBEROS_PRINCIPAL = _opt(
    "security.kerberos.login.principal", "str", None, "Kerberos principal used to submit to YARN (with the keytab)."
)
KERBEROS_KEYTAB = _opt("security.kerberos.login.keytab", "str", None, "Keytab file of the Kerberos principal.")
HA_STORAGE_DIR = _opt(
    "high-availability.storageDir",
    "str",
    None,
    "File system URL (fsspec: hdfs://, s3://, file://) for HA data too big for ZooKeeper: JobGraphs "
    "and the job result store (required with high-availability.type: ZOOKEEPER).",
)
HA_ZOOKEEPER_SESSION_TIMEOUT = _opt(
    "high-availability.zookeeper.client.session-timeout",
    "duration",
    "60000 ms",
    "ZooKeeper session timeout: a master whose session expires has lost its leadership.",
)
HA_ZOOKEEPER_CONNECTION_TIMEOUT = _opt(
    "high-availability.zookeeper.client.connection-timeout",
    "duration",
    "15000 ms",
    "How long to wait for the first connection to ZooKeeper.",
)
HA_ZOOKEEPER_RETRY_WAIT = _opt(
    "high-availability.zookeeper.client.retry-wait",
    "duration",
    "5000 ms",
    "Initial pause before a failed ZooKeeper operation is retried (doubling each time).",
)
HA_ZOOKEEPER_MAX_RETRY_ATTEMPTS = _opt(
    "high-availability.zookeeper.client.max-retry-attempts",
    "int",
    3,
    "How often a failed ZooKeeper operation is retried.",
    min_value=0,
)
HA_ZOOKEEPER_TOLERATE_SUSPENDED = _opt(
    "high-availability.zookeeper.client.tolerate-suspended-connections",
    "bool",
    False,
    "Keep leadership while the ZooKeeper connection is suspended (for a third of the session timeout, "
    "after which the session may expire) instead of giving it up at once.",
)
JOB_RESULT_STORE_STORAGE_PATH = _opt(
    "job-result-store.storage-path",
    "str",
    None,
    "Where the job result store keeps its entries (default: storageDir/job-result-store/cluster-id).",
)
JOB_RESULT_STORE_DELETE_ON_COMMIT = _opt(
    "job-result-store.delete-on-commit",
    "bool",
    True,
    "Delete a job's result entry once its cleanup is done, instead of keeping it marked clean.",
)

# --- local deployment
LOCAL_NUMBER_TASKMANAGER = _opt(
    "local.number-taskmanager",
    "int",
    2,
    "Number of TaskManagers a local cluster starts.",
    min_value=1,
)

# --- state, checkpoints, event time (yarnflink.state, yarnflink.checkpoint)
STATE_BACKEND_TYPE = _opt(
    "state.backend.type",
    "enum",
    "hashmap",
    "Keyed state backend: hashmap (state on the heap, organised by key group).",
    choices=("hashmap",),
)
SNAPSHOT_COMPRESSION = _opt(
    "execution.checkpointing.snapshot-compression",
    "bool",
    False,
    "Compress keyed state snapshots (yarnflink: LZ4 frames in the Arrow IPC files; Flink: Snappy).",
)
STATE_BACKEND_SNAPSHOT_MODE = _opt(
    "state.backend.hashmap.snapshot-mode",
    "enum",
    "thread",
    "yarnflink: where the asynchronous part of a hashmap snapshot serializes the state: thread (a "
    "background thread of the TaskExecutor, sharing the GIL with the task) or fork (a forked child "
    "process with a copy-on-write image of the heap; Linux only). See docs/PERFORMANCE.md.",
    choices=("thread", "fork"),
)
CHECKPOINTING_INTERVAL = _opt(
    "execution.checkpointing.interval",
    "duration",
    None,
    "Interval between periodic checkpoints; unset disables checkpointing.",
)
CHECKPOINTING_TIMEOUT = _opt(
    "execution.checkpointing.timeout",
    "duration",
    "10 min",
    "A checkpoint not completed within this time is aborted (counts as a failed checkpoint).",
)
CHECKPOINTING_MIN_PAUSE = _opt(
    "execution.checkpointing.min-pause",
    "duration",
    "0 ms",
    "Minimal time between the end of one checkpoint and the start of the next.",
)
CHECKPOINTING_MAX_CONCURRENT = _opt(
    "execution.checkpointing.max-concurrent-checkpoints",
    "int",
    1,
    "Largest number of checkpoints in progress at the same time.",
    min_value=1,
)
CHECKPOINTING_MODE = _opt(
    "execution.checkpointing.mode",
    "enum",
    "EXACTLY_ONCE",
    "EXACTLY_ONCE (aligned barriers) or AT_LEAST_ONCE (barriers are not aligned).",
    choices=("EXACTLY_ONCE", "AT_LEAST_ONCE"),
)
CHECKPOINTING_UNALIGNED = _opt(
    "execution.checkpointing.unaligned.enabled",
    "bool",
    False,
    "EXACTLY_ONCE only: a task snapshots on the first barrier of a checkpoint and blocks no input "
    "channel; records still in flight on the other channels are persisted with the checkpoint and "
    "replayed on restore (unaligned checkpoints). Such a checkpoint cannot be rescaled.",
)
CHECKPOINTING_TOLERABLE_FAILURES = _opt(
    "execution.checkpointing.tolerable-failed-checkpoints",
    "int",
    0,
    "Consecutive checkpoint failures tolerated before the job fails.",
    min_value=0,
)
CHECKPOINTING_NUM_RETAINED = _opt(
    "execution.checkpointing.num-retained",
    "int",
    1,
    "Number of completed checkpoints kept; older ones are deleted.",
    min_value=1,
)
CHECKPOINTING_EXTERNALIZED_RETENTION = _opt(
    "execution.checkpointing.externalized-checkpoint-retention",
    "enum",
    "NO_EXTERNALIZED_CHECKPOINTS",
    "What happens to completed checkpoints when the job ends: NO_EXTERNALIZED_CHECKPOINTS (deleted), "
    "DELETE_ON_CANCELLATION (kept if the job fails), RETAIN_ON_CANCELLATION (kept if cancelled or failed).",
    choices=("NO_EXTERNALIZED_CHECKPOINTS", "DELETE_ON_CANCELLATION", "RETAIN_ON_CANCELLATION"),
)
CHECKPOINTING_DIR = _opt(
    "execution.checkpointing.dir",
    "str",
    None,
    "Checkpoint directory: file://, s3:// (s3fs) or hdfs:// (pyarrow); checkpoints go to <dir>/<job-id>/chk-<n>.",
)
CHECKPOINTING_SAVEPOINT_DIR = _opt(
    "execution.checkpointing.savepoint-dir",
    "str",
    None,
    "Default directory of savepoints.",
)
CHECKPOINTING_INLINE_THRESHOLD = _opt(
    "execution.checkpointing.data-inline-threshold",
    "memory",
    "20 kb",
    "State smaller than this is stored inline in the checkpoint's _metadata instead of its own file.",
)
SAVEPOINT_PATH = _opt(
    "execution.savepoint.path",
    "str",
    None,
    "Savepoint or retained checkpoint to restore the job from.",
)
SAVEPOINT_IGNORE_UNCLAIMED_STATE = _opt(
    "execution.savepoint.ignore-unclaimed-state",
    "bool",
    False,
    "Allow restoring a savepoint that has state of operators the job no longer contains.",
)
AUTO_WATERMARK_INTERVAL = _opt(
    "pipeline.auto-watermark-interval",
    "duration",
    "200 ms",
    "Interval of periodic watermark emission; 0 disables periodic watermarks.",
)
S3_ENDPOINT = _opt(
    "s3.endpoint",
    "str",
    None,
    "S3 endpoint URL for s3:// paths (e.g. a MinIO or test server).",
)
S3_ACCESS_KEY = _opt("s3.access-key", "str", None, "S3 access key for s3:// paths.")
S3_SECRET_KEY = _opt("s3.secret-key", "str", None, "S3 secret key for s3:// paths.")
S3_PATH_STYLE_ACCESS = _opt(
    "s3.path.style.access",
    "bool",
    False,
    "Address buckets by path (https://endpoint/bucket) instead of by virtual host.",
)

# --- metrics and web dashboard (yarnflink.metrics, yarnflink.dispatcher)
METRICS_REPORTERS = _opt(
    "metrics.reporters",
    "str",
    None,
    "Comma-separated names of the metric reporters to start; unset starts every reporter that has "
    "metrics.reporter.<name>.* keys set. yarnflink has one reporter: 'prom' (Prometheus).",
)
METRICS_PROM_FACTORY = _opt(
    "metrics.reporter.prom.factory.class",
    "str",
    None,
    "Factory of the 'prom' reporter (accepted for Flink compatibility; setting it enables the Prometheus endpoint).",
)
METRICS_PROM_PORT = _opt(
    "metrics.reporter.prom.port",
    "str",
    "9249",
    "Port of the Prometheus endpoint of the master and of each TaskExecutor: a port, a range "
    "('9250-9260') or a list; each process takes the first free one, 0 takes any free port. "
    "Setting it enables the endpoint.",
)
METRICS_PROM_HOST = _opt(
    "metrics.reporter.prom.host",
    "str",
    "127.0.0.1",
    "Address the Prometheus endpoint binds to (yarnflink: loopback by default; Flink binds every interface).",
)
METRICS_FETCHER_UPDATE_INTERVAL = _opt(
    "metrics.fetcher.update-interval",
    "duration",
    "10 s",
    "How often the REST API and dashboard fetch task and TaskExecutor metrics from the TaskExecutors "
    "(requests in between are answered from the last fetch).",
)
WEB_REFRESH_INTERVAL = _opt(
    "web.refresh-interval",
    "duration",
    "3 s",
    "Refresh interval of the web dashboard.",
)
WEB_CANCEL_ENABLE = _opt(
    "web.cancel.enable",
    "bool",
    True,
    "Whether jobs can be cancelled from the web dashboard.",
)

# --- security (yarnflink.security; Flink's security.ssl.* keys with PEM files instead of keystores)
SECURITY_REST_AUTHENTICATION = _opt(
    "security.rest.authentication",
    "enum",
    "token",
    "How REST clients authenticate: 'token' (a bearer token generated per cluster; every endpoint "
    "but /health requires it) or 'none' (whoever reaches the port may use the API).",
    choices=("token", "none"),
)
SECURITY_REST_TOKEN_FILE = _opt(
    "security.rest.token-file",
    "str",
    None,
    "File holding the REST bearer token (mode 0600). A local cluster generates it in its working directory.",
)
SECURITY_SSL_REST_ENABLED = _opt(
    "security.ssl.rest.enabled",
    "bool",
    False,
    "Serve the REST API over HTTPS.",
)
SECURITY_SSL_REST_CERT = _opt(
    "security.ssl.rest.cert",
    "str",
    None,
    "PEM certificate (chain) of the REST server; a local cluster issues one from its CA if unset.",
)
SECURITY_SSL_REST_KEY = _opt(
    "security.ssl.rest.key",
    "str",
    None,
    "PEM private key of security.ssl.rest.cert.",
)
SECURITY_SSL_REST_CA = _opt(
    "security.ssl.rest.ca",
    "str",
    None,
    "PEM CA certificate(s) REST clients trust (default: the system's trust store).",
)
SECURITY_SSL_INTERNAL_ENABLED = _opt(
    "security.ssl.internal.enabled",
    "bool",
    True,
    "Mutual TLS with the cluster's CA for gRPC between master and TaskExecutors and for the data "
    "transport between TaskExecutors.",
)
SECURITY_SSL_INTERNAL_CERT = _opt(
    "security.ssl.internal.cert",
    "str",
    None,
    "PEM certificate of this process, issued by the cluster's CA (a local cluster generates it).",
)
SECURITY_SSL_INTERNAL_KEY = _opt(
    "security.ssl.internal.key",
    "str",
    None,
    "PEM private key of security.ssl.internal.cert.",
)
SECURITY_SSL_INTERNAL_CA = _opt(
    "security.ssl.internal.ca",
    "str",
    None,
    "PEM certificate of the cluster's CA: peers must present a certificate it issued.",
)

# --- Spark steps (yarnflink.operators.spark; other spark.* keys go to the TaskExecutor's SparkSession)
SPARK_MICRO_BATCH_MAX_ROWS = _opt(
    "spark.micro-batch.max-rows",
    "int",
    100_000,
    "STREAMING: most rows a Spark step (transform_spark, spark_sql) hands to Spark at once.",
    min_value=1,
)
SPARK_MICRO_BATCH_MAX_DELAY = _opt(
    "spark.micro-batch.max-delay",
    "duration",
    "1 s",
    "STREAMING: longest time a record waits in a Spark step's micro-batch before the batch runs.",
)
SPARK_SOURCE_PUSHDOWN = _opt(
    "spark.source.pushdown",
    "bool",
    True,
    "BATCH: a Spark step chained right after a FileSource of local Parquet files reads the source "
    "subtask's files itself with Spark's Parquet reader (when Spark reads them with the schema the "
    "records would have), instead of receiving them as Arrow batches.",
)


def option(key: str) -> ConfigOption:
    """The registered option for ``key`` (KeyError if unknown)."""
    return OPTIONS[key]


def is_known_key(key: str) -> bool:
    return key in OPTIONS or key.startswith(PASSTHROUGH_PREFIXES)


def _unknown_key_error(key: str, source: str | None) -> ConfigError:
    msg = f"unknown configuration key {key!r}{_from(source)}"
    match = difflib.get_close_matches(key, list(OPTIONS), n=1, cutoff=0.6)
    if not match:
        # also try case-insensitively (taskmanager.numberoftaskslots)
        lowered = {k.lower(): k for k in OPTIONS}
        m2 = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.6)
        match = [lowered[m2[0]]] if m2 else []
    if match:
        msg += f"; did you mean {match[0]!r}?"
    else:
        msg += (
            "; known keys are listed in yarnflink.common.config.OPTIONS (keys starting with "
            + ", ".join(repr(p) for p in PASSTHROUGH_PREFIXES)
            + " are passed through)"
        )
    return ConfigError(msg)


# ----------------------------------------------------------------------------- Configuration
_MISSING: Any = object()
OptionOrKey = Union[ConfigOption, str]


class Configuration:
    """String-valued key/value configuration, parsed on ``get`` according to ``OPTIONS``.

    ``set`` and ``from_dict`` validate: unknown keys (outside ``PASSTHROUGH_PREFIXES``) and
    unparsable values raise ``ConfigError``.
    """

    def __init__(self, values: Mapping[str, Any] | None = None, *, source: str | None = None):
        self._data: dict[str, str] = {}
        if values:
            for k, v in values.items():
                self.set(k, v, source=source)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, values: Mapping[str, Any], *, source: str | None = None) -> Configuration:
        return cls(values, source=source)

    def copy(self) -> Configuration:
        c = Configuration()
        c._data = dict(self._data)
        return c

    def update(self, other: Configuration | Mapping[str, Any], *, source: str | None = None) -> Configuration:
        """Apply ``other``'s entries on top of this configuration (in place); returns self."""
        if isinstance(other, Configuration):
            self._data.update(other._data)
        else:
            for k, v in other.items():
                self.set(k, v, source=source)
        return self

    def merged(self, other: Configuration | Mapping[str, Any]) -> Configuration:
        """A new configuration: this one overridden by ``other``."""
        return self.copy().update(other)

    # ------------------------------------------------------------------ access
    @staticmethod
    def _resolve(key: OptionOrKey) -> tuple[str, ConfigOption | None]:
        if isinstance(key, ConfigOption):
            return key.key, key
        if not isinstance(key, str):
            raise TypeError(f"configuration key must be a string or ConfigOption, got {type(key).__name__}")
        return key, OPTIONS.get(key)

    def set(self, key: OptionOrKey, value: Any, *, source: str | None = None) -> Configuration:
        """Set ``key`` (a ConfigOption or key string) to ``value`` (typed or string); validated.
        Returns self, so calls can be chained."""
        k, opt = self._resolve(key)
        if opt is None:
            if not k.startswith(PASSTHROUGH_PREFIXES):
                raise _unknown_key_error(k, source)
            self._data[k] = _plain_string(value)
            return self
        if value is None:
            raise ConfigError(f"invalid value None for {k!r}: expected {opt.expectation()}{_from(source)}")
        self._data[k] = opt.to_string(value, source)
        return self

    def get(self, key: OptionOrKey, default: Any = _MISSING) -> Any:
        """Typed value of ``key``: the set value parsed, else ``default`` if given, else the
        option's default. Unregistered (pass-through) keys return the raw string."""
        k, opt = self._resolve(key)
        if k in self._data:
            if opt is None:
                return self._data[k]
            return opt.parse(self._data[k])
        if default is not _MISSING:
            return default
        return opt.default if opt is not None else None

    def get_string(self, key: OptionOrKey, default: str | None = None) -> str | None:
        """The raw string (as set), or the option's default as a string, or ``default``."""
        k, opt = self._resolve(key)
        if k in self._data:
            return self._data[k]
        if default is not None:
            return default
        return opt.default_string() if opt is not None else None

    def get_seconds(self, key: OptionOrKey) -> float | None:
        """A duration option in seconds (float)."""
        v = self.get(key)
        return None if v is None else v.total_seconds()

    def contains(self, key: OptionOrKey) -> bool:
        """True if ``key`` was set explicitly."""
        return self._resolve(key)[0] in self._data

    __contains__ = contains

    def remove(self, key: OptionOrKey) -> bool:
        return self._data.pop(self._resolve(key)[0], None) is not None

    def to_dict(self, include_defaults: bool = False) -> dict[str, str]:
        """Explicitly set entries as ``str -> str`` (plus every option's default if asked)."""
        out: dict[str, str] = {}
        if include_defaults:
            for k, o in OPTIONS.items():
                d = o.default_string()
                if d is not None:
                    out[k] = d
        out.update(self._data)
        return out

    def keys(self) -> Iterable[str]:
        return self._data.keys()

    def items(self) -> Iterable[tuple[str, str]]:
        return self._data.items()

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Configuration) and other._data == self._data

    def __repr__(self) -> str:
        return f"Configuration({self._data!r})"


def _plain_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ";".join(_plain_string(v) for v in value)
    if isinstance(value, datetime.timedelta):
        return format_duration(value)
    return str(value)


# ----------------------------------------------------------------------------- loading
def _flatten_yaml(data: Any, source: str) -> list[tuple[str, Any]]:
    if data is None:
        return []
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a map of configuration keys at the top level, got {type(data).__name__}")
    out: list[tuple[str, Any]] = []

    def walk(prefix: str, node: dict[Any, Any]) -> None:
        for k, v in node.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict):
                if not v:
                    raise ConfigError(f"{source}: key {key!r} has an empty map as value")
                walk(key, v)
            else:
                out.append((key, v))

    walk("", data)
    return out


def _yaml_scalar(key: str, value: Any, source: str) -> Any:
    if value is None:
        raise ConfigError(f"{source}: key {key!r} has no value")
    if isinstance(value, (list, tuple)):
        return ";".join(_plain_string(v) for v in value)
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return value


def read_yaml_file(path: str) -> list[tuple[str, Any]]:
    """Flattened ``(key, value)`` pairs of a yarnflink.yaml / Flink config.yaml file."""
    import yaml  # local: config is imported by light-weight modules

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except FileNotFoundError:
        raise ConfigError(f"configuration file {path!r} does not exist") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"configuration file {path!r} is not valid YAML: {e}") from None
    return _flatten_yaml(data, path)


def parse_dynamic_property(entry: str) -> tuple[str, str]:
    """``"key=value"`` (or ``"-Dkey=value"``) -> ``(key, value)``."""
    s = entry.strip()
    if s.startswith("-D"):
        s = s[2:]
    key, sep, value = s.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"invalid dynamic property {entry!r} (from -D): expected key=value")
    return key, value.strip()


def load_configuration(
    conf_file: str | None = None,
    dynamic: Sequence[str] = (),
    conf_dir: str | None = None,
) -> Configuration:
    """Configuration from a YAML file plus ``-D key=value`` overrides (which win).

    ``conf_file`` (``--conf``) must exist. Without it, ``<conf_dir>/yarnflink.yaml`` is read if it
    exists, where ``conf_dir`` defaults to ``$YARNFLINK_CONF_DIR``, else ``conf/`` relative to the
    current directory.
    """
    conf = Configuration()
    if conf_file is not None:
        path, source = os.fspath(conf_file), f"--conf {os.fspath(conf_file)}"
    else:
        d = conf_dir or os.environ.get(CONF_DIR_ENV) or DEFAULT_CONF_DIR
        path = os.path.join(os.fspath(d), CONF_FILE_NAME)
        source = path
        if not os.path.isfile(path):
            path = None  # type: ignore[assignment]
    if path is not None:
        seen: set[str] = set()
        for key, value in read_yaml_file(path):
            if key in seen:
                raise ConfigError(f"configuration key {key!r} is given twice (from {source})")
            seen.add(key)
            conf.set(key, _yaml_scalar(key, value, source), source=source)
    for entry in dynamic:
        key, value = parse_dynamic_property(entry)
        conf.set(key, value, source="-D")
    return conf
