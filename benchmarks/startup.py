"""Start-up and idle memory (issue 20, point 4), repeated ``--runs`` times, median and max:

* ``session_ready_s``: a local session of a master and 2 TaskExecutors (1 slot each) from the
  start call until both TaskExecutors have registered (the session accepts a job), measured in
  this process (``start_local_cluster``; the client's own imports are already done);
* ``idle_rss_mb``, ``idle_uss_mb``: each process's resident and unique set sizes ``--idle`` seconds
  after that;
* ``per_job_s``: ``yarnflink run`` of a 3-element job on its own per-job local cluster, end to end
  as a user types it (a new Python process: its imports, the cluster's start, the job, the stop),
  its output checked;
* ``import_s``: ``python -c "import <module>"`` for each process's entry module, wall time.

Wall times on a loaded machine measure the load as much as the code, so each figure also comes as
CPU seconds (user + system) of the processes involved: ``*_cpu_s``, robust to other processes.

    scripts/bench --suite startup [--runs 5] [--idle 2] [--json]

The machine this runs on is usually shared: the figures carry the load average at start and end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from yarnflink.client.rest_client import RestClient, RestClientError
from yarnflink.common.config import Configuration
from yarnflink.deployment.local.cluster import start_local_cluster, stop_process
from yarnflink.security.client import RestCredentials

TASKEXECUTORS = 2
ENTRY_MODULES = ("yarnflink.entrypoint.master", "yarnflink.entrypoint.taskexecutor", "yarnflink.cli.main")

THREE_ELEMENTS_JOB = """
from yarnflink import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
print(sorted(env.from_collection([1, 2, 3]).map(lambda x: x * 10).execute_and_collect()))
"""
EXPECTED_OUTPUT = "[10, 20, 30]"


def session_run(idle_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="yarnflink-startup-") as tmp:
        config = Configuration({"taskmanager.numberOfTaskSlots": "1"})
        started = time.monotonic()
        proc, info = start_local_cluster(
            config, taskexecutors=TASKEXECUTORS, workdir=Path(tmp), detached=False, timeout=600
        )
        ready = time.monotonic() - started
        try:
            master = psutil.Process(proc.pid)
            children = [c for c in master.children(recursive=True) if "taskexecutor" in " ".join(c.cmdline())]
            ready_cpu = sum(_cpu(p) for p in [master, *children])
            time.sleep(idle_s)
            rss = {
                "master": master.memory_info().rss / 2**20,
                "taskexecutors": [c.memory_info().rss / 2**20 for c in children],
                # unique set size: what the process alone holds (its shared libraries' pages, e.g.
                # libarrow's ~30 MB, count in every process's RSS but exist once on the machine)
                "master_uss": master.memory_full_info().uss / 2**20,
                "taskexecutors_uss": [c.memory_full_info().uss / 2**20 for c in children],
            }
        finally:
            _stop(proc, info)
        return {"session_ready_s": ready, "session_ready_cpu_s": ready_cpu, "rss_mb": rss}


def _cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return float(t.user + t.system)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _stop(proc: subprocess.Popen[bytes], info: dict[str, Any]) -> None:
    credentials = RestCredentials(info["token_file"] or None, info["rest_ca"] or None)
    try:
        with RestClient(str(info["rest_url"]), timeout=5, credentials=credentials) as rest:
            rest.shutdown()
        proc.wait(timeout=20)
    except (RestClientError, subprocess.TimeoutExpired):
        stop_process(proc.pid)


def per_job_run(job_file: Path) -> tuple[float, float]:
    """(wall, CPU) seconds; the CPU of the CLI process and the cluster it starts and waits for."""
    cpu = _children_cpu()
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "yarnflink.cli.main", "run", str(job_file)],
        capture_output=True,
        text=True,
        timeout=600,  # a loaded machine (other processes) may stretch a 2 s run by 10x and more
        stdin=subprocess.DEVNULL,
    )
    elapsed = time.monotonic() - started
    if out.returncode != 0 or EXPECTED_OUTPUT not in out.stdout:
        raise RuntimeError(f"the 3-element job failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return elapsed, _children_cpu() - cpu


def import_run(module: str) -> tuple[float, float]:
    cpu = _children_cpu()
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True, stdin=subprocess.DEVNULL)
    return time.monotonic() - started, _children_cpu() - cpu


def summary(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "max": round(max(values), 3)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--idle", type=float, default=2.0, help="seconds idle before sampling RSS")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    load_before = os.getloadavg()
    imports: dict[str, list[float]] = {m: [] for m in ENTRY_MODULES}
    imports_cpu: dict[str, list[float]] = {m: [] for m in ENTRY_MODULES}
    ready: list[float] = []
    ready_cpu: list[float] = []
    master_rss: list[float] = []
    te_rss: list[float] = []
    master_uss: list[float] = []
    te_uss: list[float] = []
    per_job: list[float] = []
    per_job_cpu: list[float] = []
    with tempfile.TemporaryDirectory(prefix="yarnflink-startup-job-") as tmp:
        job_file = Path(tmp) / "three_elements.py"
        job_file.write_text(THREE_ELEMENTS_JOB)
        for _ in range(args.runs):
            for m in ENTRY_MODULES:
                wall, cpu = import_run(m)
                imports[m].append(wall)
                imports_cpu[m].append(cpu)
            s = session_run(args.idle)
            ready.append(s["session_ready_s"])
            ready_cpu.append(s["session_ready_cpu_s"])
            master_rss.append(s["rss_mb"]["master"])
            te_rss.extend(s["rss_mb"]["taskexecutors"])
            master_uss.append(s["rss_mb"]["master_uss"])
            te_uss.extend(s["rss_mb"]["taskexecutors_uss"])
            wall, cpu = per_job_run(job_file)
            per_job.append(wall)
            per_job_cpu.append(cpu)
    result = {
        "runs": args.runs,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_before": [round(x, 1) for x in load_before],
        "loadavg_after": [round(x, 1) for x in os.getloadavg()],
        "session_ready_s": summary(ready),
        "session_ready_cpu_s": summary(ready_cpu),
        "per_job_3_elements_s": summary(per_job),
        "per_job_3_elements_cpu_s": summary(per_job_cpu),
        "idle_rss_mb": {"master": summary(master_rss), "taskexecutor": summary(te_rss)},
        "idle_uss_mb": {"master": summary(master_uss), "taskexecutor": summary(te_uss)},
        "import_s": {m: summary(v) for m, v in imports.items()},
        "import_cpu_s": {m: summary(v) for m, v in imports_cpu.items()},
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"runs: {args.runs}  load average before {result['loadavg_before']}, after {result['loadavg_after']}")
    print(f"session ready (master + {TASKEXECUTORS} TaskExecutors): {result['session_ready_s']} s")
    print(f"  CPU of its processes until ready:               {result['session_ready_cpu_s']} s")
    print(f"per-job 3-element job end to end:                 {result['per_job_3_elements_s']} s")
    print(f"  CPU of the CLI and its cluster:                 {result['per_job_3_elements_cpu_s']} s")
    print(f"idle RSS master:                                  {result['idle_rss_mb']['master']} MB")
    print(f"idle RSS TaskExecutor:                            {result['idle_rss_mb']['taskexecutor']} MB")
    print(f"idle USS master:                                  {result['idle_uss_mb']['master']} MB")
    print(f"idle USS TaskExecutor:                            {result['idle_uss_mb']['taskexecutor']} MB")
    for m, v in result["import_s"].items():
        print(f"import {m:42s} {v} s, CPU {result['import_cpu_s'][m]} s")


if __name__ == "__main__":
    main()
