"""AdaptiveBatch scheduler decisions (Flink's AdaptiveBatchScheduler and
DefaultVertexParallelismDecider): a BATCH vertex whose parallelism the user left unset gets one
decided from the bytes its producers wrote, when the last of them finishes. Pure.

Which vertices: no operator of the vertex and not the job set a parallelism
(``JobVertex.parallelism_configured`` is False), it reads only BLOCKING results over all-to-all
exchanges (hash, rebalance, shuffle, rescale, broadcast), and it has no forward edge in or out
(forward needs equal parallelism on both sides). Sources keep the parallelism they were given.

How: producers of such a vertex write a fixed number of subpartitions -- for a hash exchange one per
key group (the producer's max parallelism), otherwise the vertex's upper bound -- so that, once
the parallelism ``p`` is decided, consumer subtask ``i`` reads a contiguous range of them (for hash
exactly its key-group range, so keyed state stays where the key groups say).

The decision: ``ceil(non-broadcast bytes / (avg-data-volume-per-task - broadcast bytes))``, the
broadcast bytes capped at half the volume per task, then clamped to ``[min, max]`` where max is
``execution.batch.adaptive.auto-parallelism.max-parallelism`` bounded by the vertex's max
parallelism. Unlike early Flink versions it is not rounded to a power of two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from yarnflink.jobgraph.jobgraph import JobGraph
from yarnflink.scheduler.options import BatchExecutionOptions

#: The share of the volume per task that broadcast input may take (Flink's CAP_RATIO_OF_BROADCAST).
CAP_RATIO_OF_BROADCAST = 0.5
ALL_TO_ALL = frozenset({"hash", "rebalance", "shuffle", "rescale", "broadcast"})


@dataclass(frozen=True)
class AdaptiveBatchOptions:
    min_parallelism: int = 1
    max_parallelism: int = 128
    avg_data_volume_per_task: int = 16 << 20
    enabled: bool = True  # execution.batch.adaptive.auto-parallelism.enabled

    def __post_init__(self) -> None:
        if self.min_parallelism < 1:
            raise ValueError("execution.batch.adaptive.auto-parallelism.min-parallelism must be at least 1")
        if self.max_parallelism < self.min_parallelism:
            raise ValueError(
                f"execution.batch.adaptive.auto-parallelism.max-parallelism ({self.max_parallelism}) is smaller "
                f"than execution.batch.adaptive.auto-parallelism.min-parallelism ({self.min_parallelism})"
            )
        if self.avg_data_volume_per_task < 1:
            raise ValueError("execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task must be positive")

    @staticmethod
    def from_configuration(config: Any) -> AdaptiveBatchOptions:
        return AdaptiveBatchOptions(
            int(config.get(BatchExecutionOptions.ADAPTIVE_AUTO_PARALLELISM_MIN_PARALLELISM)),
            int(config.get(BatchExecutionOptions.ADAPTIVE_AUTO_PARALLELISM_MAX_PARALLELISM)),
            int(config.get(BatchExecutionOptions.ADAPTIVE_AUTO_PARALLELISM_AVG_DATA_VOLUME_PER_TASK)),
            bool(config.get(BatchExecutionOptions.ADAPTIVE_AUTO_PARALLELISM_ENABLED)),
        )


def adaptive_vertices(jg: JobGraph, options: AdaptiveBatchOptions) -> dict[str, int]:
    """The vertices whose parallelism is decided at run time, with their upper bound."""
    out: dict[str, int] = {}
    if not options.enabled:
        return out
    for v in jg.vertices:
        inputs = jg.inputs_of(v.id)
        if v.parallelism_configured or not inputs:
            continue
        if not all(e.partitioning in ALL_TO_ALL and jg.dataset(e.source).result_type == "BLOCKING" for e in inputs):
            continue
        if any(e.partitioning not in ALL_TO_ALL for _, e in jg.outputs_of(v.id)):
            continue
        out[v.id] = max(1, min(options.max_parallelism, v.max_parallelism))
    return out


def decide_parallelism(input_bytes: int, broadcast_bytes: int, options: AdaptiveBatchOptions, upper_bound: int) -> int:
    """The parallelism of a vertex that reads ``input_bytes`` through non-broadcast exchanges and
    ``broadcast_bytes`` through broadcast ones (every subtask reads all of those)."""
    upper = max(1, upper_bound)
    lower = min(options.min_parallelism, upper)
    volume = options.avg_data_volume_per_task
    broadcast = min(max(0, broadcast_bytes), int(volume * CAP_RATIO_OF_BROADCAST))
    expected = math.ceil(max(0, input_bytes) / max(1, volume - broadcast))
    return max(lower, min(upper, expected))


def subpartition_range(num_subpartitions: int, parallelism: int, index: int) -> range:
    """The subpartitions consumer subtask ``index`` of ``parallelism`` reads out of
    ``num_subpartitions`` (Flink's key-group range formula: contiguous, every one read once)."""
    start = (index * num_subpartitions + parallelism - 1) // parallelism
    end = ((index + 1) * num_subpartitions - 1) // parallelism
    return range(start, end + 1)
