"""StreamGraph (operator-level dataflow) and its translation into a JobGraph."""

from yarnflink.streaming.describe import describe_job_graph, job_graph_summary_json
from yarnflink.streaming.graph import (
    ChainingStrategy,
    StreamEdge,
    StreamGraph,
    StreamGraphError,
    StreamNode,
)
from yarnflink.streaming.jobgraph_generator import compute_default_max_parallelism, create_job_graph

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
