"""yarnflink on a real YARN (issue 17, point 8): four latencies, each measured ``--runs`` times.

* ``session_start_to_first_taskexecutor``: ``submit_cluster`` called -> the first TaskExecutor
  container registered with the ResourceManager (YARN application start, ApplicationMaster
  container, master process, one TaskExecutor container);
* ``container_kill_to_all_running``: a TaskExecutor container killed through YARN while a
  checkpointed job runs (2 TaskExecutors, checkpoints on HDFS) -> every subtask RUNNING again;
* ``master_kill_to_job_running``: the ApplicationMaster's master process SIGKILLed with ZooKeeper
  HA -> the job RUNNING again in YARN's next attempt (a fresh session per run: YARN allows one
  more attempt; the master process must be on this node, as on the self-started cluster);
* ``per_job_submit_to_result``: ``yarnflink run --per-job --target yarn`` (attached, wordcount) ->
  the client exits with the job's result.

    HADOOP_HOME=/opt/hadoop-3.x JAVA_HOME=/path/to/jdk scripts/bench --suite yarn [--runs 3]

starts a one-node HDFS + YARN on loopback ports (``integration/hadoop_cluster.py``) and a
ZooKeeper (tests/zk.py); ``HADOOP_CONF_DIR=... YARNFLINK_IT_YARN=1`` uses an existing cluster
instead (with ``YARNFLINK_IT_ARCHIVE`` / ``YARNFLINK_IT_PYTHON`` / ``YARNFLINK_IT_QUEUE`` as for
``integration/test_yarn.py``). Without either it exits 2, saying how to run it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

METRICS = (
    "session_start_to_first_taskexecutor",
    "container_kill_to_all_running",
    "master_kill_to_job_running",
    "per_job_submit_to_result",
)
HOW_TO_RUN = (
    "needs Hadoop: HADOOP_HOME=/path/to/hadoop-3.x JAVA_HOME=/path/to/jdk scripts/bench --suite yarn "
    "(or an existing cluster: HADOOP_CONF_DIR=... YARNFLINK_IT_YARN=1)"
)
ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- pure parts
def existing_cluster(environ: Mapping[str, str]) -> bool:
    return bool(environ.get("HADOOP_CONF_DIR")) and environ.get("YARNFLINK_IT_YARN") == "1"


def unavailable_reason(environ: Mapping[str, str]) -> str | None:
    """None when a YARN is reachable (an existing one, or HADOOP_HOME naming a distribution)."""
    if existing_cluster(environ):
        return None
    home = environ.get("HADOOP_HOME")
    if not home:
        return HOW_TO_RUN
    if not (Path(home) / "bin" / "hadoop").is_file():
        return f"HADOOP_HOME={home} has no bin/hadoop; {HOW_TO_RUN}"
    return None


def check_args(runs: int, records: int, metrics: Sequence[str]) -> None:
    """Raises ValueError naming the bad argument."""
    if runs < 1:
        raise ValueError(f"--runs must be at least 1, got {runs}")
    if records < 1000:
        raise ValueError(f"--records must be at least 1000 (a job that checkpoints before it ends), got {records}")
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {', '.join(unknown)}; known: {', '.join(METRICS)}")
    if not metrics:
        raise ValueError("no metric selected")


def sample_line(metric: str, run: int, seconds: float) -> str:
    return f"{metric} run {run}: {seconds:.2f} s"


def summarize(samples: Mapping[str, Sequence[float]], notes: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Per metric: runs, median, min and max in seconds (2 decimals); a metric without samples
    carries its note (why it was not measured)."""
    out: dict[str, Any] = {}
    for metric in METRICS:
        values = list(samples.get(metric, ()))
        if values:
            out[metric] = {
                "runs": len(values),
                "median_s": round(statistics.median(values), 2),
                "min_s": round(min(values), 2),
                "max_s": round(max(values), 2),
            }
        elif notes and metric in notes:
            out[metric] = {"runs": 0, "note": notes[metric]}
    return out


# ----------------------------------------------------------------------------- the measurements
def _timed(action: Callable[[], Any]) -> float:
    t0 = time.monotonic()
    action()
    return time.monotonic() - t0


class _Bench:
    def __init__(self, workdir: Path, records: int, zk_quorum: Callable[[], str]) -> None:
        self.workdir = workdir
        self.records = records
        self.zk_quorum = zk_quorum
        self.env = dict(os.environ, PYTHONPATH=str(ROOT))

    def conf(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        conf = {
            "yarn.application.name": f"yarnflink-bench-{uuid.uuid4().hex[:8]}",
            "taskmanager.numberOfTaskSlots": "2",
            "taskmanager.memory.process.size": "1024m",
            "jobmanager.memory.process.size": "1024m",
        }
        if existing_cluster(os.environ):
            for key, var in (
                ("yarn.ship-archives", "YARNFLINK_IT_ARCHIVE"),
                ("yarn.python.executable", "YARNFLINK_IT_PYTHON"),
                ("yarn.application.queue", "YARNFLINK_IT_QUEUE"),
            ):
                if os.environ.get(var):
                    conf[key] = os.environ[var]
        else:  # one node: the containers run this interpreter on this checkout
            conf["yarn.python.executable"] = sys.executable
            for who in ("master", "taskmanager"):
                conf[f"containerized.{who}.env.PYTHONPATH"] = str(ROOT)
        conf.update(extra or {})
        return conf

    def cli(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "yarnflink.cli.main", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
            cwd=ROOT,
        )

    # -- session start -> first TaskExecutor registered
    def session_start(self) -> float:
        from integration.hadoop_cluster import until
        from yarnflink.client.rest_client import RestClient
        from yarnflink.common.config import Configuration
        from yarnflink.deployment.yarn.client import stop_cluster, submit_cluster
        from yarnflink.deployment.yarn.spec import ClusterRequest

        config = Configuration(self.conf())
        t0 = time.monotonic()
        cluster = submit_cluster(config, ClusterRequest(taskexecutors=1))
        try:
            with RestClient(cluster.rest_url) as rest:
                until(lambda: rest.taskmanagers(), 300, "a TaskExecutor registered")
                return time.monotonic() - t0
        finally:
            stop_cluster(config, cluster.app_id)

    # -- a checkpointed sum job in a CLI session
    def _start_sum_session(self, conf: dict[str, str], tag: str) -> tuple[str, str, Path]:
        from integration.hadoop_cluster import SUM_JOB, app_id_in, hdfs_url

        dflags = [x for k, v in conf.items() for x in ("-D", f"{k}={v}")]
        start = self.cli("session", "start", "--target", "yarn", "-n", "2", *dflags)
        if start.returncode != 0:
            raise RuntimeError(f"session start failed: {start.stderr.strip()}")
        app_id = app_id_in(start.stdout)
        job = self.workdir / "sum_job.py"
        job.write_text(SUM_JOB)
        flag = self.workdir / f"slow-{tag}"
        flag.touch()
        out = self.workdir / f"out-{tag}"
        run = self.cli(
            "run", "-yid", app_id, "-d", *dflags, str(job), str(self.records), str(out),
            hdfs_url(f"/bench/{app_id}/checkpoints"), str(flag), "2",
        )  # fmt: skip
        if run.returncode != 0:
            self.cli("session", "stop", app_id, *dflags)
            raise RuntimeError(f"run -yid failed: {run.stderr.strip()}")
        return app_id, run.stdout.split()[-1], flag

    def _with_checkpoint(self, rest: Any, job_id: str) -> None:
        from integration.hadoop_cluster import all_running, until

        def ready() -> bool:
            counts = rest.get_json(f"/jobs/{job_id}/checkpoints")["counts"]
            return all_running(rest, job_id) and int(counts["completed"]) > 0

        until(ready, 300, "the job RUNNING with a checkpoint")

    # -- TaskExecutor container kill -> all tasks RUNNING
    def container_kills(self, runs: int, report: Callable[[float], None]) -> None:
        from integration.hadoop_cluster import all_running, running_taskexecutors, until
        from yarnflink.client.rest_client import RestClient
        from yarnflink.common.config import Configuration
        from yarnflink.deployment.yarn.client import rest_url_of, skein_client

        conf = self.conf()
        config = Configuration(conf)
        app_id, job_id, flag = self._start_sum_session(conf, "kill")
        try:
            with RestClient(rest_url_of(config, app_id)) as rest:
                for _ in range(runs):
                    self._with_checkpoint(rest, job_id)
                    victim = running_taskexecutors(config, app_id)[0]
                    t0 = time.monotonic()
                    skein_client(config).connect(app_id).kill_container(victim.id)
                    until(lambda: not all_running(rest, job_id), 60, "the loss noticed")
                    until(lambda: all_running(rest, job_id), 300, "every task RUNNING again")
                    report(time.monotonic() - t0)
        finally:
            flag.unlink(missing_ok=True)
            self.cli("session", "stop", app_id)

    # -- master process kill (HA) -> job RUNNING in the next attempt
    def master_kill(self) -> float:
        from integration.hadoop_cluster import all_running, hdfs_url, master_pid, until
        from yarnflink.client.rest_client import RestClient
        from yarnflink.common.config import Configuration
        from yarnflink.deployment.yarn.client import rest_url_of

        tag = uuid.uuid4().hex[:8]
        conf = self.conf(
            {
                "high-availability.type": "zookeeper",
                "high-availability.zookeeper.quorum": self.zk_quorum(),
                "high-availability.zookeeper.path.root": f"/bench-yarn-{tag}",
                "high-availability.storageDir": hdfs_url(f"/bench/ha-{tag}"),
                "yarn.application-attempts": "2",
            }
        )
        config = Configuration(conf)
        app_id, job_id, flag = self._start_sum_session(conf, f"ha-{tag}")
        try:
            with RestClient(rest_url_of(config, app_id)) as rest:
                self._with_checkpoint(rest, job_id)
                pid = master_pid(app_id)
                t0 = time.monotonic()
            os.kill(pid, signal.SIGKILL)

            # the REST address moves with the attempt: re-read it from YARN until the job runs there
            def running_again() -> bool:
                with RestClient(rest_url_of(config, app_id)) as again:
                    return all_running(again, job_id)

            until(running_again, 300, "the job RUNNING after the failover")
            return time.monotonic() - t0
        finally:
            flag.unlink(missing_ok=True)
            self.cli("session", "stop", app_id, *[x for k, v in conf.items() for x in ("-D", f"{k}={v}")])

    # -- per-job submit -> result
    def per_job(self, run: int) -> float:
        dflags = [x for k, v in self.conf().items() for x in ("-D", f"{k}={v}")]
        out = self.workdir / f"wordcount-{run}"
        args = ("run", "--per-job", "--target", "yarn", "-n", "1", *dflags, str(ROOT / "examples" / "wordcount.py"))
        t0 = time.monotonic()
        result = self.cli(*args, "--lines", "2000", "--output", str(out))
        took = time.monotonic() - t0
        if result.returncode != 0 or "WordCount finished" not in result.stdout:
            raise RuntimeError(f"per-job run {run} failed ({result.returncode}): {result.stderr.strip()[-500:]}")
        return took


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--records", type=int, default=40_000, help="records of the checkpointed sum job")
    p.add_argument("--metric", action="append", dest="metrics", help="measure only these (repeatable)")
    args = p.parse_args(argv)
    metrics = args.metrics or list(METRICS)
    try:
        check_args(args.runs, args.records, metrics)
    except ValueError as e:
        p.error(str(e))
    reason = unavailable_reason(os.environ)
    if reason:
        print(reason, file=sys.stderr)
        return 2

    from integration.hadoop_cluster import HadoopCluster
    from tests.zk import start_standalone

    workdir = Path(tempfile.mkdtemp(prefix="yarnflink-bench-yarn-"))
    os.environ["YARNFLINK_SESSIONS_DIR"] = str(workdir / "sessions")
    hadoop = None if existing_cluster(os.environ) else HadoopCluster(workdir / "hadoop")
    zookeeper: list[Any] = []

    def zk_quorum() -> str:
        if not zookeeper:
            zookeeper.append(start_standalone(workdir / "zookeeper"))
        return str(zookeeper[0].address)

    samples: dict[str, list[float]] = {m: [] for m in metrics}
    notes: dict[str, str] = {}

    def record(metric: str) -> Callable[[float], None]:
        def add(seconds: float) -> None:
            samples[metric].append(seconds)
            print(sample_line(metric, len(samples[metric]), seconds), flush=True)

        return add

    bench = _Bench(workdir, args.records, zk_quorum)
    try:
        if hadoop is not None:
            print("starting a one-node HDFS + YARN ...", file=sys.stderr, flush=True)
            hadoop.start()
            os.environ.update(hadoop.environment())
            bench.env.update(hadoop.environment())
        for metric in metrics:
            try:
                if metric == "session_start_to_first_taskexecutor":
                    for _ in range(args.runs):
                        record(metric)(bench.session_start())
                elif metric == "container_kill_to_all_running":
                    bench.container_kills(args.runs, record(metric))
                elif metric == "master_kill_to_job_running":
                    for _ in range(args.runs):
                        record(metric)(bench.master_kill())
                else:
                    for run in range(args.runs):
                        record(metric)(bench.per_job(run + 1))
            except (AssertionError, RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                notes[metric] = f"{type(e).__name__}: {e}"
                print(f"{metric}: not measured: {notes[metric]}", file=sys.stderr, flush=True)
    finally:
        for server in zookeeper:
            server.stop()
        if hadoop is not None:
            hadoop.stop()
    summary = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "cluster": "existing (HADOOP_CONF_DIR)" if hadoop is None else f"one node from {hadoop.home}",
        **summarize(samples, notes),
    }
    print(json.dumps(summary, indent=2))
    return 0 if not notes else 1


if __name__ == "__main__":
    sys.exit(main())
