"""``pyflink.common.time``: ``Duration``, ``Time`` (window sizes) and ``Instant``."""

from dataclasses import dataclass

from yarnflink.operators.watermarks import Duration
from yarnflink.operators.windows import Time


@dataclass(frozen=True)
class Instant:
    """A point in time: seconds and nanoseconds since the epoch."""

    seconds: int
    nanos: int = 0

    @staticmethod
    def of_epoch_milli(epoch_milli: int) -> "Instant":
        return Instant(epoch_milli // 1000, (epoch_milli % 1000) * 1_000_000)

    def to_epoch_milli(self) -> int:
        return self.seconds * 1000 + self.nanos // 1_000_000


__all__ = ["Duration", "Instant", "Time"]
