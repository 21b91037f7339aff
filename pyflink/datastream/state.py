"""``pyflink.datastream.state``: state descriptors and the keyed state types."""

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
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "ReducingState",
    "ReducingStateDescriptor",
    "StateTtlConfig",
    "ValueState",
    "ValueStateDescriptor",
]
