"""``pyflink.datastream.output_tag``."""

from yarnflink.operators.windows import OutputTag

__all__ = ["OutputTag"]
