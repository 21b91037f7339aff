"""StreamGraph (operator-level dataflow) and its translation into a JobGraph."""

from typing import TYPE_CHECKING

from yarnflink.common.lazy import lazy_exports

if TYPE_CHECKING:  # the static view (mypy, import-linter); at run time they load on first use
    from yarnflink.streaming.describe import describe_job_graph, job_graph_summary_json
    from yarnflink.streaming.graph import (
        ChainingStrategy,
        StreamEdge,
        StreamGraph,
        StreamGraphError,
        StreamNode,
    )
    from yarnflink.streaming.jobgraph_generator import compute_default_max_parallelism, create_job_graph

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "yarnflink.streaming.describe": ("describe_job_graph", "job_graph_summary_json"),
        "yarnflink.streaming.graph": (
            "ChainingStrategy",
            "StreamEdge",
            "StreamGraph",
            "StreamGraphError",
            "StreamNode",
        ),
        "yarnflink.streaming.jobgraph_generator": ("compute_default_max_parallelism", "create_job_graph"),
    },
)

__all__ = [
    "ChainingStrategy",
    "StreamEdge",
    "StreamGraph",
    "StreamGraphError",
    "StreamNode",
    "compute_default_max_parallelism",
    "create_job_graph",
    "describe_job_graph",
    "job_graph_summary_json",
]
