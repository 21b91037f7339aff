"""The gateways' dataclass messages to protobuf and back: the one place that knows both.

Wire input is checked here as far as its shape goes (an unknown execution state is an
InvalidRequest; a slot offer's nonsense profile counts as UNKNOWN); what it means is the
endpoint's business.
"""

from __future__ import annotations

import json

from yarnflink.common.rpc_errors import InvalidRequest
from yarnflink.executiongraph.executiongraph import ExecutionState
from yarnflink.jobmaster import gateway as jm
from yarnflink.resourcemanager import gateway as rm
from yarnflink.resourcemanager.resources import UNKNOWN, ResourceProfile
from yarnflink.rpc.pb import common_pb2, jobmaster_pb2, resourcemanager_pb2, taskexecutor_pb2
from yarnflink.state.handles import TaskStateSnapshot
from yarnflink.taskexecutor import gateway as te


# ---------------------------------------------------------------------------- common
def profile_to_pb(p: ResourceProfile) -> common_pb2.ResourceProfile:
    return common_pb2.ResourceProfile(
        cpu_cores=p.cpu_cores,
        task_heap_mb=p.task_heap_mb,
        task_off_heap_mb=p.task_off_heap_mb,
        managed_memory_mb=p.managed_memory_mb,
    )


def profile_from_pb(p: common_pb2.ResourceProfile) -> ResourceProfile:
    return ResourceProfile(round(p.cpu_cores, 6), p.task_heap_mb, p.task_off_heap_mb, p.managed_memory_mb)


def slot_report_to_pb(r: rm.SlotReport) -> common_pb2.SlotReport:
    return common_pb2.SlotReport(
        slots=[
            common_pb2.SlotStatus(
                slot_index=s.index, allocation_id=s.allocation_id, job_id=s.job_id, profile=profile_to_pb(s.profile)
            )
            for s in r.slots
        ],
        version=r.version,
    )


def slot_report_from_pb(r: common_pb2.SlotReport) -> rm.SlotReport:
    return rm.SlotReport(
        tuple(rm.ReportedSlot(s.slot_index, s.allocation_id, s.job_id, profile_from_pb(s.profile)) for s in r.slots),
        r.version,
    )


def throwable_to_pb(t: jm.SerializedThrowable) -> common_pb2.SerializedThrowable:
    return common_pb2.SerializedThrowable(exception_class=t.exception_class, message=t.message, traceback=t.traceback)


def throwable_from_pb(t: common_pb2.SerializedThrowable) -> jm.SerializedThrowable:
    return jm.SerializedThrowable(t.exception_class, t.message, t.traceback)


# ---------------------------------------------------------------------------- JobMasterGateway
def register_task_manager_to_pb(r: jm.RegisterTaskManager) -> jobmaster_pb2.RegisterTaskManagerRequest:
    return jobmaster_pb2.RegisterTaskManagerRequest(
        jobmaster_id=r.jobmaster_id,
        job_id=r.job_id,
        resource_id=r.resource_id,
        rpc_address=r.rpc_address,
        data_address=r.data_address,
    )


def register_task_manager_from_pb(r: jobmaster_pb2.RegisterTaskManagerRequest) -> jm.RegisterTaskManager:
    return jm.RegisterTaskManager(r.jobmaster_id, r.job_id, r.resource_id, r.rpc_address, r.data_address)


def offer_slots_to_pb(r: jm.OfferSlots) -> jobmaster_pb2.OfferSlotsRequest:
    return jobmaster_pb2.OfferSlotsRequest(
        jobmaster_id=r.jobmaster_id,
        resource_id=r.resource_id,
        offers=[
            jobmaster_pb2.SlotOffer(
                allocation_id=o.allocation_id, slot_index=o.slot_index, profile=profile_to_pb(o.profile)
            )
            for o in r.offers
        ],
    )


def _offered_profile(offer: jobmaster_pb2.SlotOffer) -> ResourceProfile:
    """The profile a TaskExecutor says its offered slot has (UNKNOWN if absent or nonsense)."""
    p = offer.profile
    values = (p.cpu_cores, p.task_heap_mb, p.task_off_heap_mb, p.managed_memory_mb)
    if not offer.HasField("profile") or any(v < 0 or v != v for v in values):
        return UNKNOWN
    return profile_from_pb(p)


def offer_slots_from_pb(r: jobmaster_pb2.OfferSlotsRequest) -> jm.OfferSlots:
    return jm.OfferSlots(
        r.jobmaster_id,
        r.resource_id,
        tuple(jm.SlotOffer(o.allocation_id, o.slot_index, _offered_profile(o)) for o in r.offers),
    )


def reconnect_task_manager_to_pb(r: jm.ReconnectTaskManager) -> jobmaster_pb2.ReconnectTaskManagerRequest:
    return jobmaster_pb2.ReconnectTaskManagerRequest(
        jobmaster_id=r.jobmaster_id,
        job_id=r.job_id,
        resource_id=r.resource_id,
        rpc_address=r.rpc_address,
        data_address=r.data_address,
        slots=[
            jobmaster_pb2.SlotOffer(
                allocation_id=o.allocation_id, slot_index=o.slot_index, profile=profile_to_pb(o.profile)
            )
            for o in r.slots
        ],
        tasks=[
            jobmaster_pb2.ReportedTask(
                execution_id=t.execution_id,
                vertex_id=t.vertex_id,
                subtask_index=t.subtask_index,
                attempt_number=t.attempt_number,
                state=t.state.value,
                allocation_id=t.allocation_id,
                error=throwable_to_pb(t.error) if t.error is not None else None,
                failed_partition_id=t.failed_partition_id,
            )
            for t in r.tasks
        ],
    )


def _reported_task_from_pb(t: jobmaster_pb2.ReportedTask) -> jm.ReportedTask:
    try:
        state = ExecutionState(t.state)
    except ValueError:
        raise InvalidRequest(f"task {t.execution_id}: unknown execution state {t.state!r}") from None
    if t.subtask_index < 0 or t.attempt_number < 0:
        raise InvalidRequest(f"task {t.execution_id}: negative subtask index or attempt number")
    return jm.ReportedTask(
        t.execution_id,
        t.vertex_id,
        t.subtask_index,
        t.attempt_number,
        state,
        t.allocation_id,
        throwable_from_pb(t.error) if t.HasField("error") else None,
        t.failed_partition_id,
    )


def reconnect_task_manager_from_pb(r: jobmaster_pb2.ReconnectTaskManagerRequest) -> jm.ReconnectTaskManager:
    return jm.ReconnectTaskManager(
        r.jobmaster_id,
        r.job_id,
        r.resource_id,
        r.rpc_address,
        r.data_address,
        tuple(jm.SlotOffer(o.allocation_id, o.slot_index, _offered_profile(o)) for o in r.slots),
        tuple(_reported_task_from_pb(t) for t in r.tasks),
    )


def task_execution_state_to_pb(r: jm.TaskExecutionState) -> jobmaster_pb2.TaskExecutionState:
    return jobmaster_pb2.TaskExecutionState(
        jobmaster_id=r.jobmaster_id,
        execution_id=r.execution_id,
        state=r.state.value,
        error=throwable_to_pb(r.error) if r.error is not None else None,
        io_metrics=dict(r.io_metrics),
        failed_partition_id=r.failed_partition_id,
    )


def task_execution_state_from_pb(r: jobmaster_pb2.TaskExecutionState) -> jm.TaskExecutionState:
    try:
        state = ExecutionState(r.state)
    except ValueError:
        raise InvalidRequest(f"unknown execution state {r.state!r}") from None
    return jm.TaskExecutionState(
        r.jobmaster_id,
        r.execution_id,
        state,
        throwable_from_pb(r.error) if r.HasField("error") else None,
        dict(r.io_metrics),
        r.failed_partition_id,
    )


def checkpoint_metrics_to_pb(m: jm.CheckpointMetrics) -> jobmaster_pb2.CheckpointMetrics:
    return jobmaster_pb2.CheckpointMetrics(
        sync_ms=m.sync_ms,
        async_ms=m.async_ms,
        alignment_ms=m.alignment_ms,
        start_delay_ms=m.start_delay_ms,
        state_size=m.state_size,
        checkpointed_size=m.checkpointed_size,
        persisted_data=m.persisted_data,
        unaligned=m.unaligned,
    )


def checkpoint_metrics_from_pb(m: jobmaster_pb2.CheckpointMetrics) -> jm.CheckpointMetrics:
    return jm.CheckpointMetrics(
        m.sync_ms,
        m.async_ms,
        m.alignment_ms,
        m.start_delay_ms,
        m.state_size,
        m.checkpointed_size,
        m.persisted_data,
        m.unaligned,
    )


def acknowledge_checkpoint_to_pb(r: jm.AcknowledgeCheckpoint) -> jobmaster_pb2.AcknowledgeCheckpointRequest:
    return jobmaster_pb2.AcknowledgeCheckpointRequest(
        jobmaster_id=r.jobmaster_id,
        execution_id=r.execution_id,
        checkpoint_id=r.checkpoint_id,
        attempt_number=r.attempt_number,
        subtask_state=json.dumps(r.subtask_state.to_json()).encode("utf-8"),
        metrics=checkpoint_metrics_to_pb(r.metrics),
    )


def acknowledge_checkpoint_from_pb(r: jobmaster_pb2.AcknowledgeCheckpointRequest) -> jm.AcknowledgeCheckpoint:
    try:
        state = TaskStateSnapshot.from_json(json.loads(r.subtask_state.decode("utf-8")) if r.subtask_state else {})
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise InvalidRequest(f"unreadable subtask state of checkpoint {r.checkpoint_id}: {e}") from None
    return jm.AcknowledgeCheckpoint(
        r.jobmaster_id,
        r.execution_id,
        r.checkpoint_id,
        r.attempt_number,
        state,
        checkpoint_metrics_from_pb(r.metrics),
    )


def decline_checkpoint_to_pb(r: jm.DeclineCheckpoint) -> jobmaster_pb2.DeclineCheckpointRequest:
    return jobmaster_pb2.DeclineCheckpointRequest(
        jobmaster_id=r.jobmaster_id,
        execution_id=r.execution_id,
        checkpoint_id=r.checkpoint_id,
        attempt_number=r.attempt_number,
        reason=r.reason,
    )


def decline_checkpoint_from_pb(r: jobmaster_pb2.DeclineCheckpointRequest) -> jm.DeclineCheckpoint:
    return jm.DeclineCheckpoint(r.jobmaster_id, r.execution_id, r.checkpoint_id, r.attempt_number, r.reason)


def coordination_data_to_pb(r: jm.CoordinationData) -> jobmaster_pb2.CoordinationData:
    return jobmaster_pb2.CoordinationData(
        jobmaster_id=r.jobmaster_id, execution_id=r.execution_id, kind=r.kind, payload=r.payload
    )


def coordination_data_from_pb(r: jobmaster_pb2.CoordinationData) -> jm.CoordinationData:
    return jm.CoordinationData(r.jobmaster_id, r.execution_id, r.kind, r.payload)


def task_manager_heartbeat_to_pb(r: jm.TaskManagerHeartbeat) -> jobmaster_pb2.TaskManagerHeartbeat:
    return jobmaster_pb2.TaskManagerHeartbeat(
        jobmaster_id=r.jobmaster_id, resource_id=r.resource_id, running_execution_ids=list(r.running_execution_ids)
    )


def task_manager_heartbeat_from_pb(r: jobmaster_pb2.TaskManagerHeartbeat) -> jm.TaskManagerHeartbeat:
    return jm.TaskManagerHeartbeat(r.jobmaster_id, r.resource_id, tuple(r.running_execution_ids))


def disconnect_task_manager_to_pb(r: jm.DisconnectTaskManager) -> jobmaster_pb2.DisconnectTaskManagerRequest:
    return jobmaster_pb2.DisconnectTaskManagerRequest(
        jobmaster_id=r.jobmaster_id, resource_id=r.resource_id, cause=r.cause
    )


def disconnect_task_manager_from_pb(r: jobmaster_pb2.DisconnectTaskManagerRequest) -> jm.DisconnectTaskManager:
    return jm.DisconnectTaskManager(r.jobmaster_id, r.resource_id, r.cause)


# ---------------------------------------------------------------------------- ResourceManagerGateway
def register_task_executor_to_pb(r: rm.RegisterTaskExecutor) -> resourcemanager_pb2.RegisterTaskExecutorRequest:
    return resourcemanager_pb2.RegisterTaskExecutorRequest(
        resource_id=r.resource_id,
        rpc_address=r.rpc_address,
        data_address=r.data_address,
        num_slots=r.num_slots,
        default_slot_profile=profile_to_pb(r.default_slot_profile),
        total_profile=profile_to_pb(r.total_profile),
        slot_report=slot_report_to_pb(r.slot_report),
        pid=r.pid,
        hostname=r.hostname,
    )


def register_task_executor_from_pb(r: resourcemanager_pb2.RegisterTaskExecutorRequest) -> rm.RegisterTaskExecutor:
    return rm.RegisterTaskExecutor(
        r.resource_id,
        r.rpc_address,
        r.data_address,
        r.num_slots,
        profile_from_pb(r.default_slot_profile),
        profile_from_pb(r.total_profile),
        slot_report_from_pb(r.slot_report),
        r.pid,
        r.hostname,
    )


def task_executor_registration_to_pb(
    r: rm.TaskExecutorRegistrationSuccess,
) -> resourcemanager_pb2.RegisterTaskExecutorResponse:
    return resourcemanager_pb2.RegisterTaskExecutorResponse(
        registration_id=r.registration_id,
        fencing_token=r.fencing_token,
        resource_manager_resource_id=r.resource_manager_resource_id,
        heartbeat_interval_ms=r.heartbeat_interval_ms,
        heartbeat_timeout_ms=r.heartbeat_timeout_ms,
    )


def task_executor_registration_from_pb(
    r: resourcemanager_pb2.RegisterTaskExecutorResponse,
) -> rm.TaskExecutorRegistrationSuccess:
    return rm.TaskExecutorRegistrationSuccess(
        r.registration_id,
        r.fencing_token,
        r.resource_manager_resource_id,
        r.heartbeat_interval_ms,
        r.heartbeat_timeout_ms,
    )


def notify_slot_available_to_pb(r: rm.NotifySlotAvailable) -> resourcemanager_pb2.NotifySlotAvailableRequest:
    return resourcemanager_pb2.NotifySlotAvailableRequest(
        fencing_token=r.fencing_token,
        resource_id=r.resource_id,
        slot_index=r.slot_index,
        allocation_id=r.allocation_id,
        slot_report_version=r.slot_report_version,
    )


def notify_slot_available_from_pb(r: resourcemanager_pb2.NotifySlotAvailableRequest) -> rm.NotifySlotAvailable:
    return rm.NotifySlotAvailable(r.fencing_token, r.resource_id, r.slot_index, r.allocation_id, r.slot_report_version)


def disconnect_task_executor_to_pb(r: rm.DisconnectTaskExecutor) -> resourcemanager_pb2.DisconnectTaskExecutorRequest:
    return resourcemanager_pb2.DisconnectTaskExecutorRequest(
        fencing_token=r.fencing_token, resource_id=r.resource_id, cause=r.cause
    )


def disconnect_task_executor_from_pb(r: resourcemanager_pb2.DisconnectTaskExecutorRequest) -> rm.DisconnectTaskExecutor:
    return rm.DisconnectTaskExecutor(r.fencing_token, r.resource_id, r.cause)


def register_job_master_to_pb(r: rm.RegisterJobMaster) -> resourcemanager_pb2.RegisterJobMasterRequest:
    return resourcemanager_pb2.RegisterJobMasterRequest(
        job_id=r.job_id, jobmaster_address=r.jobmaster_address, jobmaster_id=r.jobmaster_id
    )


def register_job_master_from_pb(r: resourcemanager_pb2.RegisterJobMasterRequest) -> rm.RegisterJobMaster:
    return rm.RegisterJobMaster(r.job_id, r.jobmaster_address, r.jobmaster_id)


def job_master_registration_to_pb(r: rm.JobMasterRegistrationSuccess) -> resourcemanager_pb2.RegisterJobMasterResponse:
    return resourcemanager_pb2.RegisterJobMasterResponse(
        fencing_token=r.fencing_token,
        heartbeat_interval_ms=r.heartbeat_interval_ms,
        heartbeat_timeout_ms=r.heartbeat_timeout_ms,
        heartbeat_rpc_failure_threshold=r.heartbeat_rpc_failure_threshold,
    )


def job_master_registration_from_pb(
    r: resourcemanager_pb2.RegisterJobMasterResponse,
) -> rm.JobMasterRegistrationSuccess:
    return rm.JobMasterRegistrationSuccess(
        r.fencing_token, r.heartbeat_interval_ms, r.heartbeat_timeout_ms, r.heartbeat_rpc_failure_threshold
    )


def declare_required_resources_to_pb(
    r: rm.DeclareRequiredResources,
) -> resourcemanager_pb2.DeclareRequiredResourcesRequest:
    return resourcemanager_pb2.DeclareRequiredResourcesRequest(
        fencing_token=r.fencing_token,
        job_id=r.job_id,
        jobmaster_address=r.jobmaster_address,
        jobmaster_id=r.jobmaster_id,
        requirements=[
            resourcemanager_pb2.ResourceRequirement(
                profile=profile_to_pb(q.profile),
                number_of_slots=q.number_of_slots,
                slot_sharing_group=q.slot_sharing_group,
            )
            for q in r.requirements
        ],
    )


def declare_required_resources_from_pb(
    r: resourcemanager_pb2.DeclareRequiredResourcesRequest,
) -> rm.DeclareRequiredResources:
    return rm.DeclareRequiredResources(
        r.fencing_token,
        r.job_id,
        r.jobmaster_address,
        tuple(
            rm.ResourceRequirement(profile_from_pb(q.profile), q.number_of_slots, q.slot_sharing_group)
            for q in r.requirements
        ),
        r.jobmaster_id,
    )


def disconnect_job_master_to_pb(r: rm.DisconnectJobMaster) -> resourcemanager_pb2.DisconnectJobMasterRequest:
    return resourcemanager_pb2.DisconnectJobMasterRequest(fencing_token=r.fencing_token, job_id=r.job_id, cause=r.cause)


def disconnect_job_master_from_pb(r: resourcemanager_pb2.DisconnectJobMasterRequest) -> rm.DisconnectJobMaster:
    return rm.DisconnectJobMaster(r.fencing_token, r.job_id, r.cause)


def job_master_heartbeat_to_pb(r: rm.JobMasterHeartbeat) -> resourcemanager_pb2.JobMasterHeartbeat:
    return resourcemanager_pb2.JobMasterHeartbeat(
        fencing_token=r.fencing_token, job_id=r.job_id, jobmaster_id=r.jobmaster_id
    )


def job_master_heartbeat_from_pb(r: resourcemanager_pb2.JobMasterHeartbeat) -> rm.JobMasterHeartbeat:
    return rm.JobMasterHeartbeat(r.fencing_token, r.job_id, r.jobmaster_id)


# ---------------------------------------------------------------------------- TaskExecutorGateway
def tdd_to_pb(d: te.TaskDeploymentDescriptor) -> taskexecutor_pb2.TaskDeploymentDescriptor:
    return taskexecutor_pb2.TaskDeploymentDescriptor(
        job_id=d.job_id,
        job_name=d.job_name,
        vertex_id=d.vertex_id,
        task_name=d.task_name,
        execution_id=d.execution_id,
        subtask_index=d.subtask_index,
        parallelism=d.parallelism,
        max_parallelism=d.max_parallelism,
        attempt_number=d.attempt_number,
        allocation_id=d.allocation_id,
        operators=[
            taskexecutor_pb2.ChainedOperator(
                node_id=o.node_id,
                name=o.name,
                kind=o.kind,
                uid=o.uid,
                spec=o.spec,
                chained_outputs=list(o.chained_outputs),
                output_datasets=list(o.output_datasets),
            )
            for o in d.operators
        ],
        produced_partitions=[
            taskexecutor_pb2.ResultPartitionDescriptor(
                dataset_id=p.dataset_id,
                partition_id=p.partition_id,
                num_subpartitions=p.num_subpartitions,
                partitioning=p.partitioning,
                key_selector=p.key_selector,
                consumer_vertex_id=p.consumer_vertex_id,
                result_type=p.result_type,
            )
            for p in d.produced_partitions
        ],
        input_gates=[
            taskexecutor_pb2.InputGateDescriptor(
                dataset_id=g.dataset_id,
                partitioning=g.partitioning,
                channels=[
                    taskexecutor_pb2.InputChannelDescriptor(
                        partition_id=c.partition_id,
                        subpartition=c.subpartition,
                        producer_data_address=c.producer_data_address,
                    )
                    for c in g.channels
                ],
            )
            for g in d.input_gates
        ],
        runtime_mode=d.runtime_mode,
        job_config=dict(d.job_config),
        task_state=d.task_state,
        restored_checkpoint_id=d.restored_checkpoint_id,
    )


def tdd_from_pb(d: taskexecutor_pb2.TaskDeploymentDescriptor) -> te.TaskDeploymentDescriptor:
    return te.TaskDeploymentDescriptor(
        job_id=d.job_id,
        job_name=d.job_name,
        vertex_id=d.vertex_id,
        task_name=d.task_name,
        execution_id=d.execution_id,
        subtask_index=d.subtask_index,
        parallelism=d.parallelism,
        max_parallelism=d.max_parallelism,
        attempt_number=d.attempt_number,
        allocation_id=d.allocation_id,
        operators=tuple(
            te.ChainedOperator(
                o.node_id, o.name, o.kind, o.spec, o.uid, tuple(o.chained_outputs), tuple(o.output_datasets)
            )
            for o in d.operators
        ),
        produced_partitions=tuple(
            te.ResultPartitionDescriptor(
                p.dataset_id,
                p.partition_id,
                p.num_subpartitions,
                p.partitioning,
                p.key_selector,
                p.consumer_vertex_id,
                p.result_type,
            )
            for p in d.produced_partitions
        ),
        input_gates=tuple(
            te.InputGateDescriptor(
                g.dataset_id,
                g.partitioning,
                tuple(
                    te.InputChannelDescriptor(c.partition_id, c.subpartition, c.producer_data_address)
                    for c in g.channels
                ),
            )
            for g in d.input_gates
        ),
        runtime_mode=d.runtime_mode,
        job_config=dict(d.job_config),
        task_state=d.task_state,
        restored_checkpoint_id=d.restored_checkpoint_id,
    )


def request_slot_to_pb(r: te.RequestSlot) -> taskexecutor_pb2.RequestSlotRequest:
    return taskexecutor_pb2.RequestSlotRequest(
        resource_manager_token=r.resource_manager_token,
        slot_index=r.slot_index,
        job_id=r.job_id,
        allocation_id=r.allocation_id,
        profile=profile_to_pb(r.profile),
        jobmaster_address=r.jobmaster_address,
        jobmaster_id=r.jobmaster_id,
    )


def request_slot_from_pb(r: taskexecutor_pb2.RequestSlotRequest) -> te.RequestSlot:
    return te.RequestSlot(
        r.resource_manager_token,
        r.slot_index,
        r.job_id,
        r.allocation_id,
        profile_from_pb(r.profile),
        r.jobmaster_address,
        r.jobmaster_id,
    )


def slot_request_ack_to_pb(r: te.SlotRequestAck) -> taskexecutor_pb2.RequestSlotResponse:
    return taskexecutor_pb2.RequestSlotResponse(slot_index=r.slot_index, slot_report_version=r.slot_report_version)


def slot_request_ack_from_pb(r: taskexecutor_pb2.RequestSlotResponse) -> te.SlotRequestAck:
    return te.SlotRequestAck(r.slot_index, r.slot_report_version)


def submit_task_to_pb(r: te.SubmitTask) -> taskexecutor_pb2.SubmitTaskRequest:
    return taskexecutor_pb2.SubmitTaskRequest(jobmaster_id=r.jobmaster_id, tdd=tdd_to_pb(r.tdd))


def submit_task_from_pb(r: taskexecutor_pb2.SubmitTaskRequest) -> te.SubmitTask:
    return te.SubmitTask(r.jobmaster_id, tdd_from_pb(r.tdd))


def cancel_task_to_pb(r: te.CancelTask) -> taskexecutor_pb2.CancelTaskRequest:
    return taskexecutor_pb2.CancelTaskRequest(jobmaster_id=r.jobmaster_id, execution_id=r.execution_id)


def cancel_task_from_pb(r: taskexecutor_pb2.CancelTaskRequest) -> te.CancelTask:
    return te.CancelTask(r.jobmaster_id, r.execution_id)


def free_slot_to_pb(r: te.FreeSlot) -> taskexecutor_pb2.FreeSlotRequest:
    return taskexecutor_pb2.FreeSlotRequest(allocation_id=r.allocation_id, cause=r.cause, jobmaster_id=r.jobmaster_id)


def free_slot_from_pb(r: taskexecutor_pb2.FreeSlotRequest) -> te.FreeSlot:
    return te.FreeSlot(r.allocation_id, r.cause, r.jobmaster_id)


def release_partitions_to_pb(r: te.ReleasePartitions) -> taskexecutor_pb2.ReleasePartitionsRequest:
    return taskexecutor_pb2.ReleasePartitionsRequest(
        job_id=r.job_id, partition_ids=list(r.partition_ids), jobmaster_id=r.jobmaster_id
    )


def release_partitions_from_pb(r: taskexecutor_pb2.ReleasePartitionsRequest) -> te.ReleasePartitions:
    return te.ReleasePartitions(r.job_id, tuple(r.partition_ids), r.jobmaster_id)


def disconnect_job_manager_to_pb(r: te.DisconnectJobManager) -> taskexecutor_pb2.DisconnectJobManagerRequest:
    return taskexecutor_pb2.DisconnectJobManagerRequest(job_id=r.job_id, cause=r.cause, jobmaster_id=r.jobmaster_id)


def disconnect_job_manager_from_pb(r: taskexecutor_pb2.DisconnectJobManagerRequest) -> te.DisconnectJobManager:
    return te.DisconnectJobManager(r.job_id, r.cause, r.jobmaster_id)


def trigger_checkpoint_to_pb(r: te.TriggerCheckpoint) -> taskexecutor_pb2.CheckpointRequest:
    return taskexecutor_pb2.CheckpointRequest(
        jobmaster_id=r.jobmaster_id,
        execution_id=r.execution_id,
        checkpoint_id=r.checkpoint_id,
        timestamp=r.timestamp,
        is_savepoint=r.is_savepoint,
        synchronous=r.synchronous,
        drain=r.drain,
    )


def trigger_checkpoint_from_pb(r: taskexecutor_pb2.CheckpointRequest) -> te.TriggerCheckpoint:
    return te.TriggerCheckpoint(
        r.jobmaster_id, r.execution_id, r.checkpoint_id, r.timestamp, r.is_savepoint, r.synchronous, r.drain
    )


def notify_checkpoint_to_pb(r: te.NotifyCheckpoint, completed: bool) -> taskexecutor_pb2.CheckpointNotification:
    return taskexecutor_pb2.CheckpointNotification(
        jobmaster_id=r.jobmaster_id, execution_id=r.execution_id, checkpoint_id=r.checkpoint_id, completed=completed
    )


def notify_checkpoint_from_pb(r: taskexecutor_pb2.CheckpointNotification) -> te.NotifyCheckpoint:
    return te.NotifyCheckpoint(r.jobmaster_id, r.execution_id, r.checkpoint_id)


def task_executor_info_request_to_pb(r: te.RequestTaskExecutorInfo) -> taskexecutor_pb2.TaskExecutorInfoRequest:
    return taskexecutor_pb2.TaskExecutorInfoRequest(
        include_metrics=r.include_metrics, log_name=r.log_name, log_max_bytes=r.log_max_bytes
    )


def task_executor_info_request_from_pb(r: taskexecutor_pb2.TaskExecutorInfoRequest) -> te.RequestTaskExecutorInfo:
    return te.RequestTaskExecutorInfo(r.include_metrics, r.log_name, r.log_max_bytes)


def task_executor_info_to_pb(i: te.TaskExecutorInfo) -> taskexecutor_pb2.TaskExecutorInfo:
    return taskexecutor_pb2.TaskExecutorInfo(
        resource_id=i.resource_id,
        slot_report=slot_report_to_pb(i.slot_report),
        tasks=[
            taskexecutor_pb2.TaskInfo(
                execution_id=t.execution_id,
                job_id=t.job_id,
                task_name=t.task_name,
                subtask_index=t.subtask_index,
                state=t.state,
                slot_index=t.slot_index,
                allocation_id=t.allocation_id,
                vertex_id=t.vertex_id,
                attempt_number=t.attempt_number,
            )
            for t in i.tasks
        ],
        rss_bytes=i.rss_bytes,
        network_memory_in_use=i.network_memory_in_use,
        task_metrics=[
            taskexecutor_pb2.TaskMetrics(
                execution_id=m.execution_id,
                job_id=m.job_id,
                vertex_id=m.vertex_id,
                subtask_index=m.subtask_index,
                attempt_number=m.attempt_number,
                task_name=m.task_name,
                metrics=dict(m.metrics),
            )
            for m in i.task_metrics
        ],
        process_metrics=dict(i.process_metrics),
        log_files=[taskexecutor_pb2.LogFileInfo(name=f.name, size=f.size, mtime_ms=f.mtime_ms) for f in i.log_files],
        log_content=i.log_content,
        log_truncated=i.log_truncated,
        metric_reporter_address=i.metric_reporter_address,
    )


def task_executor_info_from_pb(i: taskexecutor_pb2.TaskExecutorInfo) -> te.TaskExecutorInfo:
    return te.TaskExecutorInfo(
        resource_id=i.resource_id,
        slot_report=slot_report_from_pb(i.slot_report),
        tasks=tuple(
            te.TaskInfo(
                t.execution_id,
                t.job_id,
                t.task_name,
                t.subtask_index,
                t.state,
                t.slot_index,
                t.allocation_id,
                t.vertex_id,
                t.attempt_number,
            )
            for t in i.tasks
        ),
        rss_bytes=i.rss_bytes,
        network_memory_in_use=i.network_memory_in_use,
        task_metrics=tuple(
            te.TaskMetrics(
                m.execution_id, m.job_id, m.vertex_id, m.subtask_index, m.attempt_number, m.task_name, dict(m.metrics)
            )
            for m in i.task_metrics
        ),
        process_metrics=dict(i.process_metrics),
        log_files=tuple(te.LogFileInfo(f.name, f.size, f.mtime_ms) for f in i.log_files),
        log_content=i.log_content,
        log_truncated=i.log_truncated,
        metric_reporter_address=i.metric_reporter_address,
    )
