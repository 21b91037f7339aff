"""``pyflink.common.configuration``: yarnflink's Configuration (Flink's keys, validated)."""

from yarnflink.common.config import Configuration

__all__ = ["Configuration"]
