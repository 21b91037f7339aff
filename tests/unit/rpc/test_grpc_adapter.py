"""The gRPC adapter end to end on loopback: a gateway's dataclass messages arrive unchanged at the
endpoint (converted to protobuf and back), its answer returns unchanged, and what the endpoint
raises, or what the transport does, reaches the caller as the matching exception."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
import pytest

from yarnflink.common.rpc_errors import (
    FencingTokenMismatch,
    InvalidRequest,
    RpcException,
    RpcRejected,
    RpcTimeout,
    RpcUnreachable,
    UnknownTarget,
)
from yarnflink.executiongraph.executiongraph import ExecutionState
from yarnflink.jobmaster import gateway as jm
from yarnflink.resourcemanager.gateway import DisconnectJobMaster
from yarnflink.resourcemanager.resources import UNKNOWN, ResourceProfile
from yarnflink.resourcemanager.slotmanager import ReportedSlot, SlotReport
from yarnflink.rpc.clients import GrpcGatewayResolver
from yarnflink.rpc.servicers import JobMasterServicer, Servicer, TaskExecutorServicer
from yarnflink.state.handles import OperatorSubtaskState, TaskStateSnapshot
from yarnflink.taskexecutor import gateway as te

T = TypeVar("T")


class RecordingGateway:
    """Answers every call with ``answer`` (or raises ``error``) and keeps what it was sent."""

    def __init__(self, answer: Any = None, error: BaseException | None = None, delay_s: float = 0.0) -> None:
        self.answer, self.error, self.delay_s = answer, error, delay_s
        self.received: list[Any] = []

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        async def call(request: Any, **_: Any) -> Any:
            self.received.append(request)
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            if self.error is not None:
                raise self.error
            return self.answer

        return call


def _serve_and_call(servicer: Servicer, call: Callable[[GrpcGatewayResolver, str], Awaitable[T]]) -> T:
    async def run() -> T:
        server = grpc.aio.server()
        servicer.add_to(server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        gateways = GrpcGatewayResolver()
        try:
            return await call(gateways, f"127.0.0.1:{port}")
        finally:
            await gateways.close()
            await server.stop(grace=0)

    return asyncio.run(run())


TDD = te.TaskDeploymentDescriptor(
    job_id="job",
    task_name="map",
    execution_id="attempt-1",
    subtask_index=1,
    parallelism=2,
    max_parallelism=128,
    job_name="a job",
    vertex_id="v1",
    attempt_number=3,
    allocation_id="alloc",
    operators=(te.ChainedOperator(7, "map", "map", b"spec", "uid-7", (8,), ("ds",)),),
    produced_partitions=(te.ResultPartitionDescriptor("ds", "p1", 4, "hash", b"key", "v2", "BLOCKING"),),
    input_gates=(te.InputGateDescriptor("in", "forward", (te.InputChannelDescriptor("p0", 1, "host:1"),)),),
    runtime_mode="BATCH",
    job_config={"k": "v"},
    task_state=b"{}",
    restored_checkpoint_id=5,
)


def test_a_task_deployment_descriptor_arrives_unchanged() -> None:
    fake = RecordingGateway()
    request = te.SubmitTask("jm-1", TDD)
    _serve_and_call(TaskExecutorServicer(fake), lambda g, a: g.task_executor(a).submit_task(request))  # type: ignore[arg-type]
    assert fake.received == [request]


def test_a_slot_request_and_its_answer_arrive_unchanged() -> None:
    fake = RecordingGateway(answer=te.SlotRequestAck(3, 17))
    request = te.RequestSlot("rm-token", -1, "job", "alloc", ResourceProfile(0.5, 128, 0, 64), "jm:1", "jm-1")
    ack = _serve_and_call(TaskExecutorServicer(fake), lambda g, a: g.task_executor(a).request_slot(request))  # type: ignore[arg-type]
    assert (fake.received, ack) == ([request], te.SlotRequestAck(3, 17))


def test_a_heartbeat_answers_with_the_slot_report() -> None:
    report = SlotReport((ReportedSlot(0, "alloc", "job", ResourceProfile(1.0, 10, 0, 0)), ReportedSlot(1)), 9)
    fake = RecordingGateway(answer=report)
    got = _serve_and_call(
        TaskExecutorServicer(fake),  # type: ignore[arg-type]
        lambda g, a: g.task_executor(a).heartbeat_from_resource_manager("rm-token"),
    )
    assert (fake.received, got) == (["rm-token"], report)


def test_checkpoint_acknowledgements_and_declines_are_typed_calls() -> None:
    fake = RecordingGateway()
    ack = jm.AcknowledgeCheckpoint(
        "jm-1",
        "attempt-1",
        4,
        2,
        TaskStateSnapshot({"op": OperatorSubtaskState()}),
        jm.CheckpointMetrics(1.5, 2.5, 0.5, 3, 100, 100, 40, True),
    )
    decline = jm.DeclineCheckpoint("jm-1", "attempt-1", 5, 2, "IOError: disk full")

    async def both(g: GrpcGatewayResolver, address: str) -> None:
        await g.job_master(address).acknowledge_checkpoint(ack)
        await g.job_master(address).decline_checkpoint(decline)

    _serve_and_call(JobMasterServicer(fake), both)  # type: ignore[arg-type]
    assert fake.received == [ack, decline]


def test_a_task_state_and_its_failure_arrive_unchanged() -> None:
    fake = RecordingGateway()
    update = jm.TaskExecutionState(
        "jm-1",
        "attempt-1",
        ExecutionState.FAILED,
        jm.SerializedThrowable("E", "boom", "tb"),
        {"numBytesOut": 3.0},
        "p0",
    )
    offers = jm.OfferSlots(
        "jm-1", "te-1", (jm.SlotOffer("alloc", 0, UNKNOWN), jm.SlotOffer("b", 1, ResourceProfile(1.0)))
    )

    async def both(g: GrpcGatewayResolver, address: str) -> None:
        await g.job_master(address).update_task_execution_state(update)
        fake.answer = ("alloc",)
        assert await g.job_master(address).offer_slots(offers) == ("alloc",)

    _serve_and_call(JobMasterServicer(fake), both)  # type: ignore[arg-type]
    assert fake.received == [update, offers]


@pytest.mark.parametrize(
    ("raised", "caught", "status"),
    [
        (FencingTokenMismatch("stale token"), FencingTokenMismatch, "StatusCode.FAILED_PRECONDITION"),
        (RpcRejected("no free slot"), RpcRejected, "StatusCode.FAILED_PRECONDITION"),
        (InvalidRequest("num_slots out of range"), InvalidRequest, "StatusCode.INVALID_ARGUMENT"),
        (UnknownTarget("no task x here"), UnknownTarget, "StatusCode.NOT_FOUND"),
    ],
)
def test_a_refusal_reaches_the_caller_as_the_same_exception(
    raised: RpcException, caught: type[RpcException], status: str
) -> None:
    fake = RecordingGateway(error=raised)
    with pytest.raises(caught) as info:
        _serve_and_call(
            TaskExecutorServicer(fake),  # type: ignore[arg-type]
            lambda g, a: g.task_executor(a).cancel_task(te.CancelTask("jm-1", "x")),
        )
    assert type(info.value) is caught and str(info.value) == str(raised) and info.value.status == status


def test_a_malformed_message_is_an_invalid_request() -> None:
    fake = RecordingGateway()

    async def forged(g: GrpcGatewayResolver, address: str) -> None:
        from yarnflink.rpc.pb import jobmaster_pb2, jobmaster_pb2_grpc

        stub = jobmaster_pb2_grpc.JobMasterGatewayStub(g._channel(address))
        await stub.UpdateTaskExecutionState(jobmaster_pb2.TaskExecutionState(jobmaster_id="jm-1", state="DANCING"))

    with pytest.raises(grpc.aio.AioRpcError) as info:
        _serve_and_call(JobMasterServicer(fake), forged)  # type: ignore[arg-type]
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and fake.received == []


def test_no_answer_within_the_deadline_is_a_timeout() -> None:
    fake = RecordingGateway(delay_s=2.0)
    with pytest.raises(RpcTimeout):
        _serve_and_call(
            TaskExecutorServicer(fake),  # type: ignore[arg-type]
            lambda g, a: g.task_executor(a).free_slot(te.FreeSlot("alloc", "test"), timeout=0.2),
        )


def test_a_peer_that_is_not_there_is_unreachable() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"

    async def call() -> None:
        gateways = GrpcGatewayResolver()
        try:
            await gateways.resource_manager(address).disconnect_job_master(DisconnectJobMaster("token", "job", "test"))
        finally:
            await gateways.close()

    with pytest.raises(RpcUnreachable):
        asyncio.run(call())
