"""Checkpointing settings from a job's configuration (Flink's ``CheckpointConfig``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from yarnflink.checkpoint.options import CheckpointingOptions
from yarnflink.common.config import Configuration

EXACTLY_ONCE = "EXACTLY_ONCE"
AT_LEAST_ONCE = "AT_LEAST_ONCE"


def _ms(td: Any) -> int | None:
    return None if td is None else int(td.total_seconds() * 1000)


@dataclass(frozen=True)
class CheckpointConfig:
    interval_ms: int | None = None  # None: periodic checkpoints disabled
    timeout_ms: int = 600_000
    min_pause_ms: int = 0
    max_concurrent: int = 1
    mode: str = EXACTLY_ONCE
    tolerable_failures: int = 0
    num_retained: int = 1
    externalized_retention: str = "NO_EXTERNALIZED_CHECKPOINTS"
    directory: str | None = None
    inline_threshold: int = 20 * 1024
    unaligned: bool = False

    @property
    def periodic(self) -> bool:
        return self.interval_ms is not None and self.interval_ms > 0

    @staticmethod
    def from_configuration(conf: Configuration | Mapping[str, str] | None) -> CheckpointConfig:
        if conf is None:
            conf = Configuration()
        elif not isinstance(conf, Configuration):
            conf = Configuration.from_dict(conf, source="job configuration")
        return CheckpointConfig(
            interval_ms=_ms(conf.get(CheckpointingOptions.INTERVAL)),
            timeout_ms=_ms(conf.get(CheckpointingOptions.TIMEOUT)) or 0,
            min_pause_ms=_ms(conf.get(CheckpointingOptions.MIN_PAUSE_BETWEEN_CHECKPOINTS)) or 0,
            max_concurrent=conf.get(CheckpointingOptions.MAX_CONCURRENT_CHECKPOINTS),
            mode=conf.get(CheckpointingOptions.CHECKPOINTING_MODE),
            tolerable_failures=conf.get(CheckpointingOptions.TOLERABLE_FAILURE_NUMBER),
            num_retained=conf.get(CheckpointingOptions.MAX_RETAINED_CHECKPOINTS),
            externalized_retention=conf.get(CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION),
            directory=conf.get(CheckpointingOptions.CHECKPOINTS_DIRECTORY),
            inline_threshold=conf.get(CheckpointingOptions.FS_SMALL_FILE_THRESHOLD),
            unaligned=bool(conf.get(CheckpointingOptions.ENABLE_UNALIGNED)),
        )


def checkpointing_enabled(config: Mapping[str, Any], runtime_mode: str) -> bool:
    """Periodic checkpoints run in STREAMING jobs with ``execution.checkpointing.interval`` set
    (the JobMaster and every Task decide alike)."""
    interval = (config.get(CheckpointingOptions.INTERVAL.key) or "").strip()
    return bool(interval) and interval not in ("0", "0 ms", "0ms") and (runtime_mode or "STREAMING") == "STREAMING"
