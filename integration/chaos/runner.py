"""A chaos run: a 3-node ZooKeeper ensemble, moto's S3 behind a stoppable endpoint, an HA session
(LocalHaCluster: 3 masters, 3 TaskExecutors of 2 slots), the workload's two jobs; then the seeded
schedule's faults, a monitor sampling the jobs for the recovery times, and at the end the checker.

``run(ChaosOptions(seed=..., duration_s=...))`` returns a ``ChaosReport``; ``main`` is
``scripts/chaos``. Everything a run starts is stopped when it ends, also on failure or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from integration.chaos import checker
from integration.chaos.disk import CheckpointDisk
from integration.chaos.faultfs import CONTROL_ENV, PROTOCOL, FaultControl
from integration.chaos.injectors import Injectors
from integration.chaos.measure import FaultTiming, Sample, recovery, summarize
from integration.chaos.schedule import FaultKind, Schedule, Topology, make_schedule
from integration.chaos.tcpproxy import TcpProxy
from integration.chaos.workload import ChaosJob, records_for, submit
from tests.zk import die_with_parent

__all__ = ["ChaosOptions", "ChaosReport", "main", "run"]

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(__file__).resolve().parent / "site"
BUCKET = "yarnflink-chaos"
TERMINAL = ("FINISHED", "FAILED", "CANCELED")

#: the HA session's settings: fast heartbeats, a ZooKeeper session that rides out a server moving
#: (the drills' (c)), clients that wait for a new leader
CLUSTER_CONFIG = {
    "high-availability.zookeeper.client.session-timeout": "4 s",
    "high-availability.zookeeper.client.connection-timeout": "15 s",
    "high-availability.zookeeper.client.retry-wait": "100 ms",
    "high-availability.zookeeper.client.tolerate-suspended-connections": "true",
    "taskmanager.numberOfTaskSlots": "2",
    "heartbeat.interval": "1 s",
    "heartbeat.timeout": "10 s",
    "rest.await-leader-timeout": "60 s",
    "s3.access-key": "testing",
    "s3.secret-key": "testing",
    "s3.path.style.access": "true",
}


@dataclass
class ChaosOptions:
    seed: int
    duration_s: float
    kinds: list[FaultKind] = field(default_factory=lambda: list(FaultKind))
    workdir: Path | None = None
    keep: bool = False
    records: int | None = None
    topology: Topology = field(default_factory=Topology)
    job_conf: dict[str, str] = field(default_factory=dict)
    #: the checkpoint disk: a tmpfs where it can be mounted (auto), always one (tmpfs), or the fault
    #: file system only (wrapper); see integration/chaos/disk.py
    disk: str = "auto"
    #: orphaned checkpoints of finished jobs fail the run too (they are reported either way)
    strict: bool = False
    log: Callable[[str], None] = print


@dataclass
class ChaosReport:
    seed: int
    duration_s: float
    started_utc: str
    wall_s: float = 0.0
    faults_injected: int = 0
    faults_recovered: int = 0
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    per_kind: dict[str, dict[str, float | int]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    leftover_checkpoints: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    workdir: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        lines = [
            f"chaos seed {self.seed}: {self.duration_s:.0f}s of faults, {self.wall_s:.0f}s in all, "
            f"{self.faults_injected} faults injected, {self.faults_recovered} recovered from",
        ]
        for name, j in self.jobs.items():
            lines.append(
                f"  job {name}: {j.get('state')} after {j.get('restarts')} restarts; {j.get('committed')} of "
                f"{j.get('expected')} records, {j.get('duplicates')} duplicates, {j.get('gaps')} gaps"
            )
        lines.append("  recovery (lifted -> all tasks RUNNING with a new checkpoint), median / max s:")
        for kind, k in self.per_kind.items():
            lines.append(
                f"    {kind:18} x{k['injected']:<3} recovery {k['recovery_median_s']} / {k['recovery_max_s']}, "
                f"disruption {k['disruption_median_s']} / {k['disruption_max_s']} ({k['measured']} measured)"
            )
        if self.leftover_checkpoints:
            lines.append("  checkpoint leftovers of finished jobs: " + "; ".join(self.leftover_checkpoints))
        lines.append("OK" if self.ok else "FAILED:\n  " + "\n  ".join(self.problems))
        return "\n".join(lines)


# ----------------------------------------------------------------------------- the outside services
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_moto(workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    server = Path(sys.executable).parent / "moto_server"
    if not server.exists():
        raise RuntimeError("moto_server is not installed (pip install 'moto[server]'; scripts/setup does)")
    port = _free_port()
    with open(workdir / "moto.log", "wb") as log:
        proc = subprocess.Popen(
            die_with_parent([str(server), "-H", "127.0.0.1", "-p", str(port)]),  # a killed run leaves none
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            client.create_bucket(Bucket=BUCKET)
            return proc, port
        except Exception:  # noqa: BLE001 - not up yet
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise
            time.sleep(0.2)


# ----------------------------------------------------------------------------- the monitor
class Monitor(threading.Thread):
    """Samples every job's state and latest completed checkpoint twice a second, through a REST
    client that follows the leader (a sample is skipped while no master answers)."""

    def __init__(self, cluster: Any, job_ids: list[str], interval_s: float = 0.5) -> None:
        super().__init__(name="chaos-monitor", daemon=True)
        self.cluster = cluster
        self.job_ids = job_ids
        self.interval_s = interval_s
        self.samples: list[Sample] = []
        self.last: dict[str, dict[str, Any]] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        from tests.ha_jobs import all_running

        rest = None
        while not self._halt.is_set():
            try:
                rest = rest or self.cluster.rest(timeout=5.0)
                for job_id in self.job_ids:
                    details = rest.job(job_id)
                    stats = rest.get_json(f"/jobs/{job_id}/checkpoints")
                    completed = (stats.get("latest") or {}).get("completed") or {}
                    trig = completed.get("trigger_timestamp")
                    self.last[job_id] = details
                    self.samples.append(
                        Sample(
                            time.time(),
                            job_id,
                            str(details.get("state")),
                            all_running(details),
                            None if trig is None else float(trig) / 1000.0,
                        )
                    )
            except Exception:  # noqa: BLE001 - a failover or a stopped master: ask again
                if rest is not None:
                    rest.close()
                rest = None
            self._halt.wait(self.interval_s)
        if rest is not None:
            rest.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(30)


# ----------------------------------------------------------------------------- the run
def _environment(workdir: Path) -> FaultControl:
    """The cluster's processes (children of this one) load the fault file system and this tree."""
    control = str(workdir / "disk-control.json")
    os.environ[CONTROL_ENV] = control
    parts = [str(SITE), str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    import fsspec

    fsspec.register_implementation(PROTOCOL, "integration.chaos.faultfs.ChaosFileSystem", clobber=True)
    return FaultControl(control)


def run(options: ChaosOptions) -> ChaosReport:
    from tests.zk import ZooKeeperEnsemble, unique_root
    from yarnflink.common.config import Configuration
    from yarnflink.deployment.local.ha_session import LocalHaCluster
    from yarnflink.highavailability.zookeeper.client import ZooKeeperPaths

    log = options.log
    schedule: Schedule = make_schedule(options.seed, options.duration_s, options.kinds, options.topology)
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="yarnflink-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    report = ChaosReport(
        options.seed, options.duration_s, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), workdir=str(workdir)
    )
    t_start = time.monotonic()

    def event(text: str) -> None:
        line = f"{time.strftime('%H:%M:%S', time.gmtime())} +{time.monotonic() - t_start:7.2f}s {text}"
        report.events.append(line)
        log(line)

    # this process's own ZooKeeper and REST clients log every reconnect: to a file, not the console
    handler = logging.FileHandler(workdir / "runner.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    for name in ("kazoo", "yarnflink"):
        logging.getLogger(name).propagate = True
    logging.lastResort = None
    event(f"seed {options.seed}, {options.duration_s:.0f}s, {len(schedule.faults)} faults scheduled in {workdir}")
    control = _environment(workdir)
    disk = CheckpointDisk(workdir / "disk", control, options.disk)
    ensemble = moto = proxy = cluster = injectors = monitor = None
    records = options.records or records_for(options.duration_s)
    jobs = [
        ChaosJob(
            "disk",
            disk.url,
            workdir / "out-disk",
            workdir / "disk.slow",
            records,
        ),
        ChaosJob("s3", f"s3://{BUCKET}/checkpoints", workdir / "out-s3", workdir / "s3.slow", records),
    ]
    try:
        ensemble = ZooKeeperEnsemble(workdir / "zk").start()
        moto, moto_port = _start_moto(workdir)
        proxy = TcpProxy(moto_port)
        config = Configuration(
            {
                "high-availability.type": "zookeeper",
                "high-availability.zookeeper.quorum": ensemble.hosts,
                "high-availability.zookeeper.path.root": unique_root("chaos"),
                "high-availability.storageDir": f"file://{workdir / 'ha'}",
                "s3.endpoint": f"http://{proxy.address}",
                **CLUSTER_CONFIG,
            }
        )
        topo = schedule.topology
        cluster = LocalHaCluster(
            config, workdir / "cluster", masters=topo.masters, taskexecutors=topo.taskexecutors, name="chaos"
        ).start()
        injectors = Injectors(cluster, ensemble, proxy, disk)
        event(
            f"session up: leader {cluster.leader_url()}, ZooKeeper {ensemble.hosts}, S3 {proxy.address}, "
            f"checkpoint disk: {disk.describe()}"
        )
        for job in jobs:
            submit(cluster.leader_url(), job, options.job_conf)
            event(f"job {job.name} submitted: {job.job_id} ({records} records, checkpoints {job.checkpoint_dir})")
        _wait_checkpointed(cluster, [j.job_id for j in jobs])
        event("every job runs with a completed checkpoint: faults begin")

        monitor = Monitor(cluster, [j.job_id for j in jobs])
        monitor.start()
        timings = _inject(schedule, injectors, event)
        injectors.heal_all()
        injectors.wait_whole()
        event("faults over, everything healed: jobs run at full speed to their end")
        for job in jobs:
            job.flag.unlink(missing_ok=True)
        states = _wait_ended(cluster, [j.job_id for j in jobs], max(300.0, options.duration_s), event)
        event(f"jobs ended: {states}")
        monitor.stop()

        problems, figures = checker.check_jobs(jobs, states)
        problems += _failure_causes(cluster, jobs, states)
        for job in jobs:
            details = monitor.last.get(job.job_id, {})
            figures[job.name].update(state=states.get(job.job_id), restarts=details.get("numRestarts"))
        report.jobs = figures
        paths = ZooKeeperPaths.from_config(cluster.config)
        graphs = [paths.job_graph(j.job_id) for j in jobs]
        problems += _eventually(lambda: checker.check_zookeeper(ensemble.hosts, graphs), 30)
        problems += _eventually(lambda: checker.check_leftover_files(jobs, [workdir / "disk" / "checkpoints"]), 10)
        event("checked: job states, output, job graphs in ZooKeeper, temporary files")
        # what a finished job's checkpoints leave: its jobs/<id> node in ZooKeeper (pointers, the id
        # counter) and chk-<n> directories; reported, and a failure with --strict (docs/RELIABILITY.md)
        report.leftover_checkpoints = _eventually(
            lambda: [
                *checker.check_zookeeper(ensemble.hosts, [paths.job(j.job_id) for j in jobs]),
                *_orphans(workdir / "disk" / "checkpoints", proxy.address),
            ],
            5,
        )
        if report.leftover_checkpoints:
            event(f"checkpoint leftovers of finished jobs: {report.leftover_checkpoints}")
            if options.strict:
                problems += report.leftover_checkpoints
        times = recovery(monitor.samples, timings, [j.job_id for j in jobs])
        report.per_kind = summarize(timings, times)
        report.faults_injected = len(timings)
        report.faults_recovered = sum(1 for f in timings if times.get(f.fault_id, (None, None))[0] is not None)
        for f in timings:
            rec, dis = times.get(f.fault_id, (None, None))
            event(f"fault #{f.fault_id} {f.kind}: recovery {_s(rec)}, disruption {_s(dis)}")

        cluster.stop()
        cluster_stopped = cluster
        cluster = None
        problems += _eventually(lambda: checker.check_processes(injectors.started_pids, str(workdir / "cluster")), 20)
        problems += checker.check_zookeeper(ensemble.hosts, [ZooKeeperPaths.from_config(cluster_stopped.config).root])
        report.problems = problems
    except BaseException as e:
        report.problems.append(f"the run broke off: {type(e).__name__}: {e}")
        if not isinstance(e, Exception):
            raise
    finally:
        if monitor is not None and monitor.is_alive():
            monitor.stop()
        if injectors is not None:
            injectors.heal_all()
        if cluster is not None:
            cluster.stop()
        if proxy is not None:
            proxy.stop()
        if moto is not None:
            moto.terminate()
            moto.wait(30)
        if ensemble is not None:
            ensemble.stop()
        disk.close()
        report.wall_s = time.monotonic() - t_start
        (workdir / "report.json").write_text(json.dumps(asdict(report), indent=1, default=str))
        (workdir / "events.log").write_text("\n".join(report.events) + "\n")
        if report.ok and not options.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return report


def _failure_causes(cluster: Any, jobs: list[ChaosJob], states: dict[str, str]) -> list[str]:
    """The root exception of every job that did not finish (from the job's exception history)."""
    out = []
    for job in jobs:
        if states.get(job.job_id) == "FINISHED":
            continue
        try:
            with cluster.rest(timeout=10.0) as rest:
                exc = rest.exceptions(job.job_id)
            root = str(exc.get("root-exception") or exc)[:2000]
        except Exception as e:  # noqa: BLE001 - the cause is a hint; the state is the finding
            root = f"(no exception history: {e})"
        out.append(f"job {job.name} ({job.job_id}) root exception: {root}")
    return out


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}s"


def _eventually(check: Callable[[], list[str]], timeout: float) -> list[str]:
    """The problems ``check`` still finds after up to ``timeout`` seconds (cleanup is asynchronous)."""
    deadline = time.monotonic() + timeout
    while True:
        problems = check()
        if not problems or time.monotonic() > deadline:
            return problems
        time.sleep(0.5)


def _orphans(disk: Path, s3_address: str) -> list[str]:
    """Checkpoint directories left on the disk and on S3 (see ``checker.orphaned_checkpoints``)."""
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=f"http://{s3_address}",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET).get("Contents", [])]
    files = [str(p) for p in disk.rglob("*") if p.is_file()] if disk.exists() else []
    return [f"disk:{c}" for c in checker.orphaned_checkpoints(files)] + [
        f"s3:{c}" for c in checker.orphaned_checkpoints(keys)
    ]


def _inject(schedule: Schedule, injectors: Injectors, event: Callable[[str], None]) -> list[FaultTiming]:
    """Runs the schedule's events at their times. A step that takes long (waiting for a process
    started again to serve before its group's next fault) shifts the rest of the schedule, so
    every fault lasts as long as scheduled and the constraints hold as planned."""
    t0 = time.monotonic()
    shift = 0.0
    began: dict[int, float] = {}
    timings = []
    for e in schedule.events:
        delay = t0 + e.at_s + shift - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            shift -= delay
        f = e.fault
        t_call = time.monotonic()
        if e.phase == "begin":
            what = injectors.begin(f)
            began[f.id] = time.time()
        else:
            what = injectors.end(f)
            timings.append(FaultTiming(f.id, f.kind.value, began[f.id], time.time()))
        shift += time.monotonic() - t_call  # the fault took effect when the call returned
        event(f"{e.phase:5} #{f.id} {f.kind.value} {f.target}: {what}")
    return timings


def _wait_checkpointed(cluster: Any, job_ids: list[str], timeout: float = 180.0) -> None:
    from tests.ha_jobs import running_with_checkpoint_after, wait_until

    with cluster.rest() as rest:
        for job_id in job_ids:
            wait_until(lambda: running_with_checkpoint_after(rest, job_id, 0), timeout, f"job {job_id} checkpointing")


def _wait_ended(cluster: Any, job_ids: list[str], timeout: float, event: Callable[[str], None]) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    rest = None
    seen: set[str] = set()
    while time.monotonic() < deadline and len(states) < len(job_ids):
        try:
            rest = rest or cluster.rest(timeout=10.0)
            for job_id in job_ids:
                state = str(rest.job(job_id)["state"])
                if state in TERMINAL:
                    states[job_id] = state
        except Exception as e:  # noqa: BLE001 - a failover: ask again
            if str(e) not in seen:
                seen.add(str(e))
                event(f"waiting for the jobs' end: {type(e).__name__}: {e}")
            if rest is not None:
                rest.close()
            rest = None
        time.sleep(0.5)
    for job_id in job_ids:
        states.setdefault(job_id, "NOT ENDED")
    return states


# ----------------------------------------------------------------------------- the command
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/chaos",
        description="Seeded fault injection against a local HA session running exactly-once jobs; "
        "checks the output, the job states and leaks at the end.",
    )
    parser.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: a random one, printed)")
    parser.add_argument("--duration", type=float, default=90.0, help="seconds of faults (default 90)")
    parser.add_argument(
        "--kinds",
        default="all",
        help="comma-separated fault kinds (default all): " + ", ".join(k.value for k in FaultKind),
    )
    parser.add_argument("--workdir", type=Path, default=None, help="keep everything here (default: a temporary dir)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir after a successful run")
    parser.add_argument("--schedule-only", action="store_true", help="print the schedule and exit")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail on checkpoint leftovers of finished jobs too (ZooKeeper nodes, chk-<n> dirs; else reported)",
    )
    parser.add_argument(
        "--disk",
        choices=("auto", "tmpfs", "wrapper"),
        default="auto",
        help="the checkpoint disk: a tmpfs where it can be mounted (auto, the default), or the fault file system only",
    )
    parser.add_argument("--report", type=Path, default=None, help="also write the report (JSON) here")
    parser.add_argument(
        "-D", dest="job_conf", action="append", default=[], help="KEY=VALUE for the jobs' configuration"
    )
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
    try:
        kinds = FaultKind.parse(args.kinds.split(","))
        bad = [kv for kv in args.job_conf if "=" not in kv or not kv.split("=", 1)[0]]
        if bad:
            raise ValueError(f"-D takes KEY=VALUE, got {bad[0]!r}")
        job_conf = dict(kv.split("=", 1) for kv in args.job_conf)
        options = ChaosOptions(
            seed, args.duration, kinds, args.workdir, args.keep, job_conf=job_conf, strict=args.strict, disk=args.disk
        )
        schedule = make_schedule(seed, args.duration, kinds)
    except ValueError as e:
        parser.error(str(e))
    print(f"chaos seed {seed} (reproduce: scripts/chaos --seed {seed} --duration {args.duration:g})", flush=True)
    if args.schedule_only:
        print(schedule.describe())
        return 0
    report = run(options)
    print(report.summary())
    if args.report:
        args.report.write_text(json.dumps(asdict(report), indent=1, default=str))
    if not report.ok:
        print(f"\nseed {seed}; event log ({report.workdir}/events.log):\n" + "\n".join(report.events))
        print(f"reproduce: scripts/chaos --seed {seed} --duration {args.duration:g}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
