"""Shuffle/network stack (Flink's NettyShuffleEnvironment): result partitions, input gates,
local in-memory and remote TCP/Arrow-IPC channels with bounded, backpressured queues."""

from yarnflink.network.blocking import BlockingResultPartition
from yarnflink.network.common import BufferOrEvent, InputChannelSpec
from yarnflink.network.environment import ShuffleEnvironment
from yarnflink.network.errors import CancelledTransfer, PartitionException
from yarnflink.network.gate import InputGate
from yarnflink.network.partition import ResultPartition

__all__ = [
    "BlockingResultPartition",
    "BufferOrEvent",
    "CancelledTransfer",
    "InputChannelSpec",
    "InputGate",
    "PartitionException",
    "ResultPartition",
    "ShuffleEnvironment",
]
