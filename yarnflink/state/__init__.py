"""Keyed and operator state (Flink's state backends; ``state.backend.type: hashmap`` or ``rocksdb``).

* ``descriptors``: ``ValueStateDescriptor`` ... ``AggregatingStateDescriptor``, ``StateTtlConfig``;
* ``heap``: ``HeapKeyedStateBackend`` (key-grouped, changelog and shadow copy, asynchronous snapshots);
* ``rocksdb``: ``RocksDBKeyedStateBackend`` (an embedded RocksDB on local disk, state larger than memory);
* ``keyed_states``: the state objects; ``operator_state``: list and union list state;
* ``handles``: state handles and ``TaskStateSnapshot`` (pure data);
* ``task_state``: the Task seam (``TaskStateManager``, ``snapshot_chain``).

The State Processor API (savepoints read and written on Spark) is ``yarnflink.state_processor``:
it reads checkpoint metadata, and ``yarnflink.checkpoint`` depends on this package, not the reverse.
"""

from typing import TYPE_CHECKING

from yarnflink.common.lazy import lazy_exports

if TYPE_CHECKING:  # the static view (mypy, import-linter); at run time they load on first use
    from yarnflink.state.descriptors import (
        AggregateFunction,
        AggregatingStateDescriptor,
        ListStateDescriptor,
        MapStateDescriptor,
        ReducingStateDescriptor,
        StateTtlConfig,
        Types,
        ValueStateDescriptor,
    )
    from yarnflink.state.handles import (
        KeyGroupRange,
        KeyGroupsStateHandle,
        OperatorStateHandle,
        OperatorSubtaskState,
        SnapshotResult,
        TaskStateSnapshot,
    )
    from yarnflink.state.heap import HeapKeyedStateBackend, StateMigrationError
    from yarnflink.state.operator_state import OperatorStateBackend
    from yarnflink.state.task_state import TaskStateManager, snapshot_chain

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "yarnflink.state.descriptors": (
            "AggregateFunction",
            "AggregatingStateDescriptor",
            "ListStateDescriptor",
            "MapStateDescriptor",
            "ReducingStateDescriptor",
            "StateTtlConfig",
            "Types",
            "ValueStateDescriptor",
        ),
        "yarnflink.state.handles": (
            "KeyGroupRange",
            "KeyGroupsStateHandle",
            "OperatorStateHandle",
            "OperatorSubtaskState",
            "SnapshotResult",
            "TaskStateSnapshot",
        ),
        "yarnflink.state.heap": ("HeapKeyedStateBackend", "StateMigrationError"),
        "yarnflink.state.operator_state": ("OperatorStateBackend",),
        "yarnflink.state.task_state": ("TaskStateManager", "snapshot_chain"),
    },
)

__all__ = [
    "AggregateFunction",
    "AggregatingStateDescriptor",
    "HeapKeyedStateBackend",
    "KeyGroupRange",
    "KeyGroupsStateHandle",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "OperatorStateBackend",
    "OperatorStateHandle",
    "OperatorSubtaskState",
    "ReducingStateDescriptor",
    "SnapshotResult",
    "StateMigrationError",
    "StateTtlConfig",
    "TaskStateManager",
    "TaskStateSnapshot",
    "Types",
    "ValueStateDescriptor",
    "snapshot_chain",
]
