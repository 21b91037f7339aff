"""Size limits that apply across components, checked where the input arrives so that a bad
input gets a clear error instead of failing later, deep inside a running job.

A JobGraph arrives over REST (bounded by ``rest.server.max-content-length``), but each of its
vertices later travels to TaskExecutors in one gRPC message (a TaskDeploymentDescriptor with the
vertex's operator code), bounded by the RPC message limit. ``check_job_graph_size`` refuses at
submission a graph one of whose vertices could never be deployed.
"""

from __future__ import annotations

from yarnflink.jobgraph.jobgraph import JobGraph
from yarnflink.rpc.endpoint import MAX_MESSAGE_BYTES

#: Room left in a deployment message for the fields not counted below.
_HEADROOM = 1 << 20
#: Upper bound of one input channel's descriptor (partition id, address, index).
_CHANNEL_BYTES = 160


class JobGraphTooLarge(ValueError):
    pass


def deployment_size_estimate(graph: JobGraph, vertex_id: str) -> int:
    """An upper-bound estimate of one TaskDeploymentDescriptor of vertex ``vertex_id``, in bytes."""
    v = graph.vertex(vertex_id)
    size = sum(len(o.spec) + len(o.name) + 64 for o in v.operators)
    size += sum(len(e.key_selector or b"") + 128 for _, e in graph.outputs_of(vertex_id))
    size += sum(len(k) + len(val) + 8 for k, val in graph.config.items())
    for edge in graph.inputs_of(vertex_id):
        size += graph.vertex(graph.dataset(edge.source).producer).parallelism * _CHANNEL_BYTES
    return size


def check_job_graph_size(graph: JobGraph, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
    """Raises JobGraphTooLarge naming the first vertex whose deployment would exceed the RPC limit."""
    limit = max_message_bytes - _HEADROOM
    for v in graph.vertices:
        size = deployment_size_estimate(graph, v.id)
        if size > limit:
            raise JobGraphTooLarge(
                f"vertex {v.name!r} ({v.id}) needs about {size // (1 << 20)} MiB per deployment "
                f"(operator code, key selectors, job config, input channels), more than the RPC "
                f"message limit of {max_message_bytes // (1 << 20)} MiB: ship large data through a "
                f"source instead of capturing it in functions"
            )
