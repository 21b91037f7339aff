"""Options of the shuffle (network) stack (Flink's ``NettyShuffleEnvironmentOptions``)."""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["NettyShuffleEnvironmentOptions"]


class NettyShuffleEnvironmentOptions:
    """The data server and the channels' credits and buffers."""

    DATA_PORT = ConfigOption(
        "taskmanager.data.port",
        "int",
        0,
        "Port of the TaskManager's data (shuffle) server; 0 picks a free port.",
        min_value=0,
        max_value=65535,
    )
    NETWORK_BUFFERS_PER_CHANNEL = ConfigOption(
        "taskmanager.network.memory.buffers-per-channel",
        "int",
        8,
        "Network buffers per outgoing/incoming channel (credits).",
        min_value=1,
    )
    NETWORK_MAX_BYTES_PER_CHANNEL = ConfigOption(
        "taskmanager.network.memory.max-bytes-per-channel",
        "memory",
        "8 mb",
        "Upper bound of buffered bytes per channel before the writer blocks (backpressure).",
    )
