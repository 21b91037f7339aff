"""Builds a TaskDeploymentDescriptor for one Execution: its chain of operators, the result
partitions it produces and the input channels it reads (with the producers' locations)."""

from __future__ import annotations

from yarnflink.executiongraph.executiongraph import POINTWISE, Execution, ExecutionGraph, ExecutionVertex
from yarnflink.taskexecutor.gateway import (
    ChainedOperator,
    InputChannelDescriptor,
    InputGateDescriptor,
    ResultPartitionDescriptor,
    TaskDeploymentDescriptor,
)

__all__ = ["POINTWISE", "build_tdd"]


def build_tdd(eg: ExecutionGraph, ev: ExecutionVertex, execution: Execution | None = None) -> TaskDeploymentDescriptor:
    """``execution``: the attempt to deploy (default: the current one; a speculative attempt
    writes partitions of its own)."""
    jg = eg.job_graph
    jv = ev.job_vertex.job_vertex
    execution = execution or ev.current
    assert execution.slot is not None, "an execution is deployed only into an assigned slot"
    operators = tuple(
        ChainedOperator(
            node_id=op.node_id,
            name=op.name,
            kind=op.kind,
            uid=op.uid or "",
            spec=op.spec,
            chained_outputs=tuple(op.chained_outputs),
            output_datasets=tuple(op.output_datasets),
        )
        for op in jv.operators
    )
    produced = []
    for dataset, edge in jg.outputs_of(jv.id):
        consumer = jg.vertex(edge.target)
        produced.append(
            ResultPartitionDescriptor(
                dataset_id=dataset.id,
                partition_id=ev.produced[dataset.id].partition_id_of(execution),
                num_subpartitions=eg.num_subpartitions(edge),
                partitioning=edge.partitioning,
                key_selector=edge.key_selector or b"",
                consumer_vertex_id=consumer.id,
                result_type=dataset.result_type,
            )
        )
    gates = []
    for edge in jg.inputs_of(jv.id):
        producer = eg.vertex(jg.dataset(edge.source).producer)
        if edge.partitioning in POINTWISE:
            sources = [(producer.task_vertices[ev.subtask_index], 0)]
        else:  # one subpartition each, or a range of them (a parallelism decided at run time)
            subs = eg.consumed_subpartitions(edge, ev)
            sources = [(p, sub) for p in producer.task_vertices for sub in subs]
        channels = []
        for p, sub in sources:
            slot = p.current.slot
            assert slot is not None, "producers are assigned slots before consumers are deployed"
            channels.append(
                InputChannelDescriptor(
                    partition_id=p.produced[edge.source].partition_id,
                    subpartition=sub,
                    producer_data_address=slot.data_address,
                )
            )
        gates.append(
            InputGateDescriptor(dataset_id=edge.source, partitioning=edge.partitioning, channels=tuple(channels))
        )
    return TaskDeploymentDescriptor(
        job_id=jg.job_id,
        job_name=jg.job_name,
        vertex_id=jv.id,
        task_name=jv.name,
        execution_id=execution.attempt_id,
        subtask_index=ev.subtask_index,
        parallelism=jv.parallelism,
        max_parallelism=jv.max_parallelism,
        attempt_number=execution.attempt_number,
        allocation_id=execution.slot.allocation_id,
        operators=operators,
        produced_partitions=tuple(produced),
        input_gates=tuple(gates),
        runtime_mode=jg.runtime_mode,
        job_config=dict(jg.config),
    )
