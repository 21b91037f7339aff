"""State descriptors and TTL configuration (PyFlink's ``pyflink.datastream.state`` names).

A descriptor names a state and says its kind; ``RuntimeContext.get_state(descriptor)`` (and
``get_list_state`` ...) returns the state object for the current key. The ``type_info`` argument
PyFlink takes is accepted and ignored: values are Python objects (pickled in snapshots).
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Callable
from typing import Any, Union

from yarnflink.common.typeinfo import Types  # noqa: F401 - re-exported (yarnflink.api imports it here)


def to_millis(value: Any, what: str) -> int:
    """Milliseconds of a ``Time`` / ``Duration`` (anything with ``to_milliseconds()``), a
    ``datetime.timedelta`` or an int of milliseconds."""
    if hasattr(value, "to_milliseconds"):
        return int(value.to_milliseconds())
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(f"{what}: expected a Time, Duration, timedelta or milliseconds, got {value!r}")


# ----------------------------------------------------------------------------- TTL
class StateTtlConfig:
    """Time-to-live of state entries (Flink's ``StateTtlConfig``)::

        StateTtlConfig.new_builder(Time.seconds(10))
            .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
            .set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)
            .build()

    TTL is measured in processing time; for list state it applies per element, for map state per
    entry. Expired entries are dropped when read, and from snapshots when
    ``cleanup_full_snapshot()`` was set.
    """

    class UpdateType(enum.Enum):
        Disabled = 0
        OnCreateAndWrite = 1
        OnReadAndWrite = 2

    class StateVisibility(enum.Enum):
        ReturnExpiredIfNotCleanedUp = 0
        NeverReturnExpired = 1

    class TtlTimeCharacteristic(enum.Enum):
        ProcessingTime = 0

    def __init__(
        self,
        ttl_ms: int,
        update_type: StateTtlConfig.UpdateType = UpdateType.OnCreateAndWrite,
        state_visibility: StateTtlConfig.StateVisibility = StateVisibility.NeverReturnExpired,
        cleanup_full_snapshot: bool = False,
    ):
        if ttl_ms <= 0:
            raise ValueError(f"StateTtlConfig: the TTL must be positive, got {ttl_ms} ms")
        self.ttl_ms = ttl_ms
        self.update_type = update_type
        self.state_visibility = state_visibility
        self.cleanup_full_snapshot = cleanup_full_snapshot

    @staticmethod
    def new_builder(ttl: Any) -> StateTtlConfig.Builder:
        return StateTtlConfig.Builder(ttl)

    def is_enabled(self) -> bool:
        return self.update_type is not StateTtlConfig.UpdateType.Disabled

    def get_ttl(self) -> int:
        return self.ttl_ms

    def get_update_type(self) -> StateTtlConfig.UpdateType:
        return self.update_type

    def get_state_visibility(self) -> StateTtlConfig.StateVisibility:
        return self.state_visibility

    def __repr__(self) -> str:
        return (
            f"StateTtlConfig(ttl={self.ttl_ms} ms, update={self.update_type.name}, "
            f"visibility={self.state_visibility.name})"
        )

    class Builder:
        def __init__(self, ttl: Any):
            self._ttl = to_millis(ttl, "StateTtlConfig.new_builder()")
            self._update = StateTtlConfig.UpdateType.OnCreateAndWrite
            self._visibility = StateTtlConfig.StateVisibility.NeverReturnExpired
            self._full_snapshot = False

        def set_update_type(self, update_type: StateTtlConfig.UpdateType) -> StateTtlConfig.Builder:
            self._update = update_type
            return self

        def update_ttl_on_create_and_write(self) -> StateTtlConfig.Builder:
            return self.set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)

        def update_ttl_on_read_and_write(self) -> StateTtlConfig.Builder:
            return self.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)

        def set_state_visibility(self, visibility: StateTtlConfig.StateVisibility) -> StateTtlConfig.Builder:
            self._visibility = visibility
            return self

        def return_expired_if_not_cleaned_up(self) -> StateTtlConfig.Builder:
            return self.set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)

        def never_return_expired(self) -> StateTtlConfig.Builder:
            return self.set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)

        def set_ttl_time_characteristic(self, characteristic: Any) -> StateTtlConfig.Builder:
            return self  # processing time is the only one (as in Flink)

        def set_ttl(self, ttl: Any) -> StateTtlConfig.Builder:
            self._ttl = to_millis(ttl, "StateTtlConfig.Builder.set_ttl()")
            return self

        def cleanup_full_snapshot(self) -> StateTtlConfig.Builder:
            self._full_snapshot = True
            return self

        def cleanup_incrementally(
            self, cleanup_size: int = 5, run_cleanup_for_every_record: bool = False
        ) -> StateTtlConfig.Builder:
            return self  # accepted; expired entries are dropped on read

        def disable_cleanup_in_background(self) -> StateTtlConfig.Builder:
            return self

        def build(self) -> StateTtlConfig:
            return StateTtlConfig(self._ttl, self._update, self._visibility, self._full_snapshot)


# ----------------------------------------------------------------------------- descriptors
class StateDescriptor:
    kind = ""

    def __init__(self, name: str, type_info: Any = None):
        if not isinstance(name, str) or not name:
            raise ValueError(f"a state name must be a non-empty string, got {name!r}")
        self.name = name
        self.type_info = type_info
        self.ttl_config: StateTtlConfig | None = None

    def get_name(self) -> str:
        return self.name

    def enable_time_to_live(self, ttl_config: StateTtlConfig) -> None:
        if not isinstance(ttl_config, StateTtlConfig):
            raise TypeError(f"enable_time_to_live() needs a StateTtlConfig, got {ttl_config!r}")
        self.ttl_config = ttl_config if ttl_config.is_enabled() else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class ValueStateDescriptor(StateDescriptor):
    kind = "value"


class ListStateDescriptor(StateDescriptor):
    kind = "list"

    def __init__(self, name: str, elem_type_info: Any = None):
        super().__init__(name, elem_type_info)


class MapStateDescriptor(StateDescriptor):
    kind = "map"

    def __init__(self, name: str, key_type_info: Any = None, value_type_info: Any = None):
        super().__init__(name, (key_type_info, value_type_info))


def _reduce_fn(fn: Any) -> Callable[[Any, Any], Any]:
    m = getattr(fn, "reduce", None)
    if callable(m):
        return m
    if callable(fn):
        return fn
    raise TypeError(f"a ReducingStateDescriptor needs a function (a, b) -> c or a ReduceFunction, got {fn!r}")


class ReducingStateDescriptor(StateDescriptor):
    kind = "reducing"

    def __init__(self, name: str, reduce_function: Any, type_info: Any = None):
        super().__init__(name, type_info)
        self.reduce_function = _reduce_fn(reduce_function)


class AggregateFunction:
    """PyFlink's ``AggregateFunction``: an accumulator per key / window (generic as PyFlink's:
    ``AggregateFunction[IN, ACC, OUT]`` is the class itself).

    A yarnflink extension, optional: ``add_batch(self, rows: pyarrow.RecordBatch, accumulator)
    -> accumulator`` adds several rows at once and must give what ``add`` gives row by row in
    that order. Tumbling / sliding event-time windows on Arrow batches call it once per (key,
    window) and batch with that group's rows (see docs/STATE_AND_EVENT_TIME.md)."""

    def __class_getitem__(cls, params: Any) -> Any:
        return cls

    def create_accumulator(self) -> Any:
        raise NotImplementedError

    def add(self, value: Any, accumulator: Any) -> Any:
        raise NotImplementedError

    def get_result(self, accumulator: Any) -> Any:
        raise NotImplementedError

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement merge() (needed by session windows)")


def check_aggregate_function(fn: Any, what: str) -> Any:
    for m in ("create_accumulator", "add", "get_result"):
        if not callable(getattr(fn, m, None)) or isinstance(fn, type):
            raise TypeError(
                f"{what} needs an AggregateFunction instance (create_accumulator, add, get_result), got {fn!r}"
            )
    return fn


class AggregatingStateDescriptor(StateDescriptor):
    kind = "aggregating"

    def __init__(self, name: str, agg_function: Any, state_type_info: Any = None):
        super().__init__(name, state_type_info)
        self.agg_function = check_aggregate_function(agg_function, "AggregatingStateDescriptor")


DescriptorLike = Union[
    ValueStateDescriptor, ListStateDescriptor, MapStateDescriptor, ReducingStateDescriptor, AggregatingStateDescriptor
]
