"""MetricFetcher (Flink's MetricFetcherImpl): asks every registered TaskExecutor for the metrics
of its tasks and process (``RequestTaskExecutorInfo`` with ``include_metrics``) and puts them in
the MetricStore. ``update()`` fetches at most once per ``metrics.fetcher.update-interval``; callers
that come while a fetch runs wait for that one. Runs on the Dispatcher's loop.
"""

from __future__ import annotations

import asyncio
import logging
import time

from yarnflink.common.rpc_errors import RpcException
from yarnflink.metrics.store import MetricStore, TaskManagerMetrics, TaskMetricsEntry
from yarnflink.resourcemanager.gateway import ResourceManagerControlGateway, TaskManagerInfo
from yarnflink.rpc.resolver import GatewayResolver
from yarnflink.taskexecutor.gateway import RequestTaskExecutorInfo, TaskExecutorInfo

log = logging.getLogger(__name__)

#: Deadline of one TaskExecutor's answer; a TaskExecutor that does not answer keeps its old values.
FETCH_TIMEOUT_S = 3.0


class UnknownTaskManager(KeyError):
    pass


class MetricFetcher:
    def __init__(
        self,
        resource_manager: ResourceManagerControlGateway,
        store: MetricStore,
        gateways: GatewayResolver,
        update_interval_s: float,
    ) -> None:
        self.resource_manager = resource_manager
        self.store = store
        self.gateways = gateways
        self.update_interval_s = max(0.0, update_interval_s)
        self._last = -float("inf")
        self._inflight: asyncio.Future[None] | None = None
        self._fetched_once = False
        #: job ids whose metrics are archived: late answers about them are dropped
        self.ended_jobs: set[str] = set()

    async def task_managers(self) -> tuple[TaskManagerInfo, ...]:
        return await self.resource_manager.request_task_manager_info()

    async def update(self) -> None:
        """Starts a fetch if the last one is older than the update interval. Like Flink's, the
        caller gets the values at hand and does not wait for the TaskExecutors, except for the
        very first fetch (before it there is nothing to show)."""
        if self._inflight is None and time.monotonic() - self._last >= self.update_interval_s:
            self._inflight = asyncio.ensure_future(self._fetch())
            self._inflight.add_done_callback(self._fetched)
        if self._inflight is not None and not self._fetched_once:
            try:
                await asyncio.shield(self._inflight)
            except Exception:  # noqa: BLE001 - logged by _fetched; the caller shows what there is
                pass

    def _fetched(self, fut: asyncio.Future[None]) -> None:
        self._inflight = None
        self._fetched_once = True
        if not fut.cancelled() and fut.exception() is not None:
            log.warning("fetching metrics failed", exc_info=fut.exception())

    async def _fetch(self) -> None:
        try:
            tms = await self.task_managers()
            await asyncio.gather(*(self._fetch_one(tm) for tm in tms))
            self.store.retain_task_managers(tm.resource_id for tm in tms)
        finally:
            self._last = time.monotonic()

    async def _fetch_one(self, tm: TaskManagerInfo) -> None:
        try:
            info = await self.request_info(tm.rpc_address, include_metrics=True)
        except RpcException as e:
            log.info("metrics of TaskExecutor %s not fetched: %s", tm.resource_id, e)
            return
        except Exception:  # noqa: BLE001 - one bad answer must not fail every metrics request
            log.warning("metrics of TaskExecutor %s not fetched", tm.resource_id, exc_info=True)
            return
        self.store.task_managers[tm.resource_id] = TaskManagerMetrics(
            dict(info.process_metrics), info.metric_reporter_address, int(time.time() * 1000)
        )
        for t in info.task_metrics:
            if t.job_id in self.ended_jobs:
                continue
            self.store.put_task(
                TaskMetricsEntry(
                    t.job_id,
                    t.vertex_id,
                    t.subtask_index,
                    t.attempt_number,
                    t.execution_id,
                    tm.resource_id,
                    dict(t.metrics),
                )
            )

    async def request_info(
        self, rpc_address: str, *, include_metrics: bool = False, log_name: str = "", log_max_bytes: int = 0
    ) -> TaskExecutorInfo:
        return await self.gateways.task_executor(rpc_address).request_task_executor_info(
            RequestTaskExecutorInfo(include_metrics, log_name, log_max_bytes), timeout=FETCH_TIMEOUT_S
        )

    async def find_task_manager(self, tm_id: str) -> TaskManagerInfo:
        for tm in await self.task_managers():
            if tm.resource_id == tm_id:
                return tm
        raise UnknownTaskManager(tm_id)
