"""Checkpoints: the CheckpointCoordinator (pure), barrier handling at task inputs (pure), state
assignment on restore (pure), the ``_metadata`` format, and storage through fsspec/pyarrow
(``storage``: the only module here that does I/O; import it explicitly)."""

from typing import TYPE_CHECKING

from yarnflink.common.lazy import lazy_exports

if TYPE_CHECKING:  # the static view (mypy, import-linter); at run time they load on first use
    from yarnflink.checkpoint.assignment import RestoreVertex, assign_state
    from yarnflink.checkpoint.barriers import (
        AlignedBarrierHandler,
        BarrierTracker,
        CancelCheckpointMarker,
        CheckpointBarrier,
        create_barrier_handler,
    )
    from yarnflink.checkpoint.config import CheckpointConfig
    from yarnflink.checkpoint.coordinator import CheckpointCoordinator, CheckpointTask
    from yarnflink.checkpoint.metadata import CheckpointMetadataError, CompletedCheckpoint, OperatorState

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "yarnflink.checkpoint.assignment": ("RestoreVertex", "assign_state"),
        "yarnflink.checkpoint.barriers": (
            "AlignedBarrierHandler",
            "BarrierTracker",
            "CancelCheckpointMarker",
            "CheckpointBarrier",
            "create_barrier_handler",
        ),
        "yarnflink.checkpoint.config": ("CheckpointConfig",),
        "yarnflink.checkpoint.coordinator": ("CheckpointCoordinator", "CheckpointTask"),
        "yarnflink.checkpoint.metadata": ("CheckpointMetadataError", "CompletedCheckpoint", "OperatorState"),
    },
)

__all__ = [
    "AlignedBarrierHandler",
    "BarrierTracker",
    "CancelCheckpointMarker",
    "CheckpointBarrier",
    "CheckpointConfig",
    "CheckpointCoordinator",
    "CheckpointMetadataError",
    "CheckpointTask",
    "CompletedCheckpoint",
    "OperatorState",
    "RestoreVertex",
    "assign_state",
    "create_barrier_handler",
]
