"""``pyflink.common.types``: ``Row`` and ``RowKind``."""

from yarnflink.common.row import Row, RowKind

__all__ = ["Row", "RowKind"]
