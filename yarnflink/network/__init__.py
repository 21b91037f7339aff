"""Shuffle/network stack (Flink's NettyShuffleEnvironment): result partitions, input gates,
local in-memory and remote TCP/Arrow-IPC channels with bounded, backpressured queues."""

from typing import TYPE_CHECKING

from yarnflink.common.lazy import lazy_exports

if TYPE_CHECKING:  # the static view (mypy, import-linter); at run time they load on first use
    from yarnflink.network.blocking import BlockingResultPartition
    from yarnflink.network.common import BufferOrEvent, InputChannelSpec
    from yarnflink.network.environment import ShuffleEnvironment
    from yarnflink.network.errors import CancelledTransfer, PartitionException
    from yarnflink.network.gate import InputGate
    from yarnflink.network.partition import ResultPartition

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "yarnflink.network.blocking": ("BlockingResultPartition",),
        "yarnflink.network.common": ("BufferOrEvent", "InputChannelSpec"),
        "yarnflink.network.environment": ("ShuffleEnvironment",),
        "yarnflink.network.errors": ("CancelledTransfer", "PartitionException"),
        "yarnflink.network.gate": ("InputGate",),
        "yarnflink.network.partition": ("ResultPartition",),
    },
)

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
