"""``pyflink.datastream.state``: state descriptors and the keyed state types."""

from yarnflink.state.broadcast import BroadcastState, ReadOnlyBroadcastState
from yarnflink.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from yarnflink.state.keyed_states import AggregatingState, ListState, MapState, ReducingState, ValueState

__all__ = [
    "AggregatingState",
    "AggregatingStateDescriptor",
    "BroadcastState",
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "ReadOnlyBroadcastState",
    "ReducingState",
    "ReducingStateDescriptor",
    "StateTtlConfig",
    "ValueState",
    "ValueStateDescriptor",
]
