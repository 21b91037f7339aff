"""Scheduling benchmarks (issue 3, item 10), ``scripts/bench --suite scheduling``:

* ``slotmanager``: slot allocation throughput of the SlotManager alone (pure logic, no servers)
  with 1,000 simulated TaskExecutors of 4 slots. Jobs of 1..8 slots declare their requirements
  until the cluster is full; every AllocateSlot is acknowledged; then the jobs end and their slots
  are freed, and the cycle repeats. "requests/s" counts slots requested by jobs and allocated;
  a request's whole life (declare, allocate, acknowledge, free) is in the time.
* ``deploy``: time from ``POST /jobs`` to every task RUNNING for a 4-vertex job (chaining off,
  parallelism 2: 8 tasks in 2 shared slots) on a warm local session (a master and 2 TaskExecutors
  of 2 slots that already ran a job), polling ``GET /jobs/:id`` every 5 ms.

    scripts/bench --suite scheduling [--only slotmanager,deploy] [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from yarnflink.resourcemanager.resources import UNKNOWN, ResourceProfile
from yarnflink.resourcemanager.slotmanager import AllocateSlot, SlotManager, SlotReport


def bench_slotmanager(
    task_executors: int = 1000, slots: int = 4, cycles: int = 5, *, fine_grained: bool = False, evenly: bool = False
) -> dict[str, Any]:
    sm = SlotManager(fine_grained=fine_grained, evenly_spread_out_slots=evenly)
    total = ResourceProfile(float(slots), 256 * slots, 0, 256 * slots)
    for i in range(task_executors):
        sm.register_task_executor(f"te{i}", f"te{i}:1", f"te{i}:2", slots, SlotReport(), 0.0, total=total)
    rng = random.Random(7)
    capacity = task_executors * slots
    requested = 0
    t0 = time.perf_counter()
    for cycle in range(cycles):
        now = float(cycle + 1)
        jobs: list[str] = []
        allocations: list[AllocateSlot] = []
        remaining = capacity
        while remaining > 0:
            n = min(remaining, rng.randint(1, 8))
            job = f"job{cycle}-{len(jobs)}"
            jobs.append(job)
            profile = ResourceProfile(1.0, 256, 0, 256) if fine_grained else UNKNOWN
            actions = sm.declare_requirements(job, "jm:1", "jm-id", {profile: n}, now)
            allocations += [a for a in actions if isinstance(a, AllocateSlot)]
            remaining -= n
            requested += n
        for a in allocations:
            sm.allocation_acked(a.resource_id, a.allocation_id, a.slot_index, 1, now)
        assert len(allocations) == capacity and sm.totals()[1] == 0, "the cluster should be full"
        for job in jobs:
            sm.unregister_job(job, now)
        for a in allocations:
            sm.slot_freed(a.resource_id, a.allocation_id, 2 + cycle, now)
    elapsed = time.perf_counter() - t0
    mode = "fine-grained" if fine_grained else "evenly spread" if evenly else "default"
    return {
        "bench": "slotmanager",
        "mode": mode,
        "task_executors": task_executors,
        "slots": capacity,
        "requests": requested,
        "seconds": round(elapsed, 3),
        "requests_per_s": round(requested / elapsed),
    }


def four_vertex_job(env: Any) -> None:
    def slow(rb: Any) -> Any:
        time.sleep(0.05)
        return rb.slice(0, 0)

    env.set_parallelism(2)
    # source | map | map | sink: chaining is off around the maps
    env.from_sequence(1, 10**12).map_batches(slow).disable_chaining().map_batches(slow).disable_chaining().print()


def bench_deploy(repeat: int = 10, workdir: Path | None = None) -> dict[str, Any]:
    from yarnflink import StreamExecutionEnvironment
    from yarnflink.api.common import ProgramAbortException
    from yarnflink.api.environment import PlanCaptureExecutor, set_default_executor
    from yarnflink.client.rest_client import RestClient
    from yarnflink.common.config import Configuration
    from yarnflink.deployment.local.cluster import start_local_cluster, stop_process
    from yarnflink.jobgraph.jobgraph import new_id

    config = Configuration({"taskmanager.numberOfTaskSlots": "2", "slotmanager.number-of-slots.max": "4"})
    workdir = workdir or Path(tempfile.mkdtemp(prefix="yarnflink-bench-"))
    proc, info = start_local_cluster(config, taskexecutors=2, workdir=workdir, detached=False)
    capture = PlanCaptureExecutor(Configuration())
    set_default_executor(capture)
    try:
        env = StreamExecutionEnvironment.get_execution_environment()
        four_vertex_job(env)
        try:
            env.execute("deploy-bench")
        except ProgramAbortException:
            pass
        graph = capture.job_graph
        assert graph is not None and len(graph.vertices) == 4
        rest = RestClient(str(info["rest_url"]))
        times = []
        for run in range(repeat + 1):  # the first run warms the session up
            graph.job_id = new_id()
            body = graph.to_json()
            t0 = time.perf_counter()
            rest.submit_job(body)
            while True:
                d = rest.job(graph.job_id)
                if all(v["status"] == "RUNNING" for v in d["vertices"]):
                    break
                if d["state"] in ("FAILED", "CANCELED"):
                    raise RuntimeError(f"benchmark job {d['state']}")
                time.sleep(0.005)
            elapsed = time.perf_counter() - t0
            if run > 0:
                times.append(elapsed)
            rest.cancel(graph.job_id)
            while rest.overview()["slots-available"] < 4:
                time.sleep(0.02)
        rest.close()
    finally:
        set_default_executor(None)
        stop_process(proc.pid)
    times.sort()
    return {
        "bench": "deploy",
        "runs": repeat,
        "tasks": 8,
        "median_ms": round(statistics.median(times) * 1000),
        "min_ms": round(times[0] * 1000),
        "max_ms": round(times[-1] * 1000),
        "p90_ms": round(times[min(len(times) - 1, int(0.9 * len(times)))] * 1000),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="slotmanager,deploy")
    parser.add_argument("--repeat", type=int, default=10, help="deploy runs (after one warm-up run)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    print(
        f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"python {platform.python_version()}"
    )
    results = []
    only = {s.strip() for s in args.only.split(",")}
    if "slotmanager" in only:
        results += [bench_slotmanager(), bench_slotmanager(evenly=True), bench_slotmanager(fine_grained=True)]
    if "deploy" in only:
        results.append(bench_deploy(args.repeat))
    for r in results:
        if args.json:
            print(json.dumps(r))
        elif r["bench"] == "slotmanager":
            print(
                f"SlotManager {r['mode']:<13} {r['task_executors']} TaskExecutors x 4 slots: {r['requests']:,} "
                f"slot requests in {r['seconds']:.2f} s = {r['requests_per_s']:,} requests/s"
            )
        else:
            print(
                f"POST /jobs -> all {r['tasks']} tasks RUNNING (4 vertices, warm session), {r['runs']} runs: "
                f"median {r['median_ms']} ms, p90 {r['p90_ms']} ms, min {r['min_ms']} ms, max {r['max_ms']} ms"
            )


if __name__ == "__main__":
    main()
