"""``pyflink.common.watermark_strategy``."""

from yarnflink.operators.watermarks import TimestampAssigner, WatermarkStrategy

__all__ = ["TimestampAssigner", "WatermarkStrategy"]
