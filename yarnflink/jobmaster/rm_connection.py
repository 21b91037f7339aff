"""The JobMaster's connection to the ResourceManager (Flink's ResourceManagerConnection and the
JobMaster side of the DeclarativeSlotPool's requirement declarations): register, declare the
slots every slot sharing group needs with its ResourceProfile, and keep heartbeats.

The connection re-registers and declares again whenever the ResourceManager forgets the job
(a ResourceManager that restarted or timed the job out answers ``known=False``), changes its
leader session id, or is unreachable for ``heartbeat.rpc-failure-threshold`` heartbeats or silent
for ``heartbeat.timeout``. It ends when the job ends; the JobMaster then disconnects.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from yarnflink.common.rpc_errors import FencingTokenMismatch, RpcException, RpcUnreachable
from yarnflink.jobgraph.jobgraph import JobGraph
from yarnflink.resourcemanager.gateway import (
    DeclareRequiredResources,
    JobMasterHeartbeat,
    RegisterJobMaster,
    ResourceManagerGateway,
    ResourceRequirement,
)
from yarnflink.resourcemanager.heartbeat import HeartbeatMonitor
from yarnflink.resourcemanager.resources import ResourceProfile

log = logging.getLogger(__name__)

RM = "ResourceManager"


@dataclass(frozen=True)
class SlotRequirement:
    slot_sharing_group: str
    profile: ResourceProfile
    slots: int


def requirements_of(shared_slots: Iterable[Any], job_graph: JobGraph) -> list[SlotRequirement]:
    """One requirement per slot sharing group: as many slots as the group has shared slots (its
    highest parallelism), each of the group's declared resources (UNKNOWN if none)."""
    counts = Counter(s.group_name for s in shared_slots)
    return [
        SlotRequirement(name, ResourceProfile.of_slot_sharing_group(job_graph.slot_sharing_groups.get(name)), n)
        for name, n in counts.items()
    ]


class ResourceManagerConnection:
    def __init__(self, jobmaster: Any, requirements: list[SlotRequirement]) -> None:
        """``jobmaster``: the JobMaster (its ``job_id``, ``address``, ``jobmaster_id``, ``rm_address``,
        ``gateways``, ``heartbeat_interval_s``, ``eg``; its ``rm_token`` is set here)."""
        self.jm = jobmaster
        self.requirements = requirements
        self.heartbeats = HeartbeatMonitor(jobmaster.heartbeat_timeout_s)
        self.interval_s = jobmaster.heartbeat_interval_s
        self.registrations = 0

    @property
    def _ended(self) -> bool:
        return bool(self.jm.eg.status.globally_terminal)

    async def run(self) -> None:
        delay = 0.05
        while not self._ended:
            try:
                await self._register_and_declare()
            except RpcException as e:
                log.warning(
                    "job %s: registration at the ResourceManager %s failed (%s); retrying in %.2f s",
                    self.jm.job_id,
                    self.jm.rm_address,
                    e,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            delay = 0.05
            cause = await self._heartbeats()
            if cause:
                log.warning("job %s: %s; registering again", self.jm.job_id, cause)

    async def declare(self, requirements: list[SlotRequirement]) -> None:
        """Declares new requirements (e.g. after a restart changed what the job needs)."""
        self.requirements = requirements
        if self.jm.rm_token:
            await self._declare(self.jm.gateways.resource_manager(self.jm.rm_address))

    async def _register_and_declare(self) -> None:
        rm = self.jm.gateways.resource_manager(self.jm.rm_address)
        resp = await rm.register_job_master(RegisterJobMaster(self.jm.job_id, self.jm.address, self.jm.jobmaster_id))
        self.jm.rm_token = resp.fencing_token
        if resp.heartbeat_interval_ms > 0:
            self.interval_s = resp.heartbeat_interval_ms / 1000
            self.heartbeats = HeartbeatMonitor(resp.heartbeat_timeout_ms / 1000, resp.heartbeat_rpc_failure_threshold)
        self.registrations += 1
        await self._declare(rm)

    async def _declare(self, rm: ResourceManagerGateway) -> None:
        await rm.declare_required_resources(
            DeclareRequiredResources(
                fencing_token=self.jm.rm_token,
                job_id=self.jm.job_id,
                jobmaster_address=self.jm.address,
                requirements=tuple(
                    ResourceRequirement(r.profile, r.slots, r.slot_sharing_group) for r in self.requirements
                ),
                jobmaster_id=self.jm.jobmaster_id,
            )
        )

    async def _heartbeats(self) -> str:
        """Heartbeats until the job ends (returns "") or the connection is lost (returns why)."""
        rm = self.jm.gateways.resource_manager(self.jm.rm_address)
        self.heartbeats.monitor(RM, time.monotonic())
        while True:
            await asyncio.sleep(self.interval_s)
            if self._ended:
                return ""
            try:
                known = await rm.heartbeat_from_job_master(
                    JobMasterHeartbeat(self.jm.rm_token, self.jm.job_id, self.jm.jobmaster_id),
                    timeout=self.heartbeats.timeout,
                )
            except RpcException as e:
                if self._ended:
                    return ""
                if isinstance(e, FencingTokenMismatch):
                    return f"the ResourceManager has a new leader session ({e})"
                if isinstance(e, RpcUnreachable) and self.heartbeats.rpc_failed(RM):
                    return "the ResourceManager is unreachable"
                if self.heartbeats.timed_out(time.monotonic()):
                    return "the ResourceManager's heartbeat timed out"
                continue
            if self._ended:
                return ""
            if not known:
                return "the ResourceManager does not know this job any more"
            self.heartbeats.received(RM, time.monotonic())
