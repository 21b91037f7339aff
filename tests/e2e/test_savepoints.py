"""Savepoints end to end (issue 5 items 5, 8 and 9), with real master and TaskExecutor processes
and the ``yarnflink`` command line: ``savepoint``, ``stop --savepointPath``, ``run -s`` with
another parallelism (2 -> 3 -> 1, keyed state redistributed by key groups), a savepoint copied
elsewhere and restored from the copy, an incompatible savepoint and ``--allowNonRestoredState``,
and a corrupted latest checkpoint that restore falls back from.

The job: a slow sequence source (parallelism 1, its read position checkpointed) feeds a keyed
running sum (the parallelism under test) into an exactly-once FileSink (parallelism 1). Every
run writes to the same output directory, so the records committed by all runs together must be
exactly the running sums of one failure-free run: nothing lost, nothing twice.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.oracles import committed, running_sums

from .cli_runner import JobCli
from .conftest import Cluster, start_cluster, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

N = 100_000  # at 1 ms a record while slowed: 100 s, far more than a test stays slowed
KEYS = 7

JOB = """
    import os, sys, time
    from yarnflink import FileSink, MapFunction, StreamExecutionEnvironment

    out, checkpoints, flag, parallelism, sum_uid = sys.argv[1:6]
    extra = dict(a.split("=", 1) for a in sys.argv[6:])

    class Slow(MapFunction):
        def map(self, value):
            if os.path.exists(flag):
                time.sleep(0.001)
            while os.path.exists(flag + ".block"):  # holds the pipeline (and the checkpoints) still
                time.sleep(0.02)
            return value

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_max_parallelism(128)
    conf = {"execution.checkpointing.interval": "300 ms", "execution.checkpointing.dir": checkpoints,
            "execution.checkpointing.data-inline-threshold": "64 b", **extra}
    for k, v in conf.items():
        env.get_config().set(k, v)
    (env.from_sequence(0, %(n)d - 1).set_parallelism(1).uid("source")
        .map(Slow()).set_parallelism(1).uid("slow")
        .map(lambda x: (x %% %(keys)d, x)).set_parallelism(1).uid("pair")
        .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).set_parallelism(int(parallelism)).uid(sum_uid)
        .sink_to(FileSink(out, format="jsonl")).set_parallelism(1).uid("sink"))
    env.execute("savepointed keyed sum")
""" % {"n": N, "keys": KEYS}


def expected_running_sums() -> list[tuple[int, int]]:
    return running_sums(N, lambda x: x % KEYS)


@pytest.fixture(scope="module")
def sp_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("savepoint-cluster"), taskexecutors=2, slots=2)
    yield c
    c.stop()


class Cli(JobCli):
    """``yarnflink`` in a subprocess against the test cluster, for the keyed-sum job."""

    def __init__(self, cluster: Cluster, tmp_path: Path) -> None:
        super().__init__(cluster, tmp_path, JOB)

    def run(self, parallelism: int, *flags: str, sum_uid: str = "sum", extra: tuple[str, ...] = ()) -> str:
        return self.submit(flags, (str(parallelism), sum_uid, *extra))


def checkpoints_of(cluster: Cluster, job_id: str) -> dict[str, Any]:
    return dict(cluster.rest.get_json(f"/jobs/{job_id}/checkpoints"))


def running_with_checkpoint(cluster: Cluster, job_id: str, timeout: float = 120) -> None:
    def ok() -> bool:
        d = cluster.rest.job(job_id)
        assert d["state"] not in ("FAILED", "CANCELED", "FINISHED"), d["state"]
        return d["state"] == "RUNNING" and checkpoints_of(cluster, job_id)["counts"]["completed"] >= 1

    wait_until(ok, timeout=timeout, interval=0.1, message=f"job {job_id} running with a completed checkpoint")


def state_of(cluster: Cluster, job_id: str) -> str:
    return str(cluster.rest.job(job_id)["state"])


def root_exception(cluster: Cluster, job_id: str) -> str:
    return str(cluster.rest.exceptions(job_id).get("root-exception") or "")


def test_rescale_2_3_1_through_relocated_savepoints_is_exactly_once(sp_cluster: Cluster, tmp_path: Path) -> None:
    cli = Cli(sp_cluster, tmp_path)
    savepoints = tmp_path / "savepoints"
    first = cli.run(2)
    running_with_checkpoint(sp_cluster, first)
    # yarnflink savepoint JOBID DIR: the job keeps running
    taken = cli.savepoint_path(cli("savepoint", "-m", sp_cluster.rest_url, first, f"file://{savepoints}"))
    assert taken.startswith(f"file://{savepoints}/savepoint-") and os.path.isfile(taken[7:] + "/_metadata")
    assert state_of(sp_cluster, first) == "RUNNING"
    # yarnflink stop --savepointPath DIR JOBID
    stopped = cli.savepoint_path(
        cli("stop", "-m", sp_cluster.rest_url, "--savepointPath", f"file://{savepoints}", first)
    )
    assert state_of(sp_cluster, first) == "FINISHED"  # stop-with-savepoint: printed once the job finished
    sp_dir = Path(stopped[len("file://") :])
    files = sorted(p.name for p in sp_dir.iterdir())
    assert "_metadata" in files and any(f.endswith(".arrow") for f in files), files  # state inside

    second = cli.run(3, "-s", stopped)
    running_with_checkpoint(sp_cluster, second)
    restored = checkpoints_of(sp_cluster, second)["latest"]["restored"]
    assert restored["is_savepoint"] is True and restored["external_path"] == stopped
    assert [v["parallelism"] for v in sp_cluster.rest.job(second)["vertices"]].count(3) == 1
    stopped2 = cli.savepoint_path(cli("stop", "-m", sp_cluster.rest_url, "-p", f"file://{savepoints}", second))
    assert state_of(sp_cluster, second) == "FINISHED"

    # relocate: copy the savepoint elsewhere, delete the original, restore from the copy
    original = Path(stopped2[len("file://") :])
    copy = tmp_path / "moved" / "my-savepoint"
    shutil.copytree(original, copy)
    shutil.rmtree(original)
    cli.flag.unlink()  # full speed to the end
    third = cli.run(1, "-s", str(copy))
    wait_until(
        lambda: state_of(sp_cluster, third) in ("FINISHED", "FAILED", "CANCELED"),
        timeout=180,
        message="the last job ends",
    )
    assert state_of(sp_cluster, third) == "FINISHED", root_exception(sp_cluster, third)
    assert checkpoints_of(sp_cluster, third)["latest"]["restored"]["external_path"] == f"file://{copy}"
    got = committed(cli.out)
    expected = expected_running_sums()
    assert len(got) == len(expected), f"{len(got)} committed records, expected {len(expected)}"
    assert got == expected  # the final sums and every intermediate one, exactly once


def test_incompatible_savepoint_is_refused_unless_allow_non_restored_state(sp_cluster: Cluster, tmp_path: Path) -> None:
    cli = Cli(sp_cluster, tmp_path)
    job = cli.run(2)
    running_with_checkpoint(sp_cluster, job)
    path = cli.savepoint_path(cli("stop", "-m", sp_cluster.rest_url, "-p", f"file://{tmp_path / 'sp'}", job))
    assert state_of(sp_cluster, job) == "FINISHED"
    # the keyed operator changed its uid: the savepoint has state the job cannot take
    bad = cli.run(2, "-s", path, sum_uid="sum-v2")
    wait_until(lambda: state_of(sp_cluster, bad) == "FAILED", timeout=60, message="the incompatible job fails")
    cause = root_exception(sp_cluster, bad)
    assert path in cause and "the job does not contain" in cause
    cli.flag.unlink()
    ok = cli.run(2, "-s", path, "--allowNonRestoredState", sum_uid="sum-v2")
    wait_until(lambda: state_of(sp_cluster, ok) in ("FINISHED", "FAILED"), timeout=120, message="the job ends")
    assert state_of(sp_cluster, ok) == "FINISHED", root_exception(sp_cluster, ok)
    # a path that is no savepoint: the job fails naming it
    missing = cli.run(2, "-s", f"file://{tmp_path / 'no-such-savepoint'}")
    wait_until(lambda: state_of(sp_cluster, missing) == "FAILED", timeout=60, message="the job fails")
    assert "no-such-savepoint" in root_exception(sp_cluster, missing)
    assert "no such savepoint or checkpoint directory" in root_exception(sp_cluster, missing)
    # the CLI reports a savepoint of a job that does not run
    r = cli("savepoint", "-m", sp_cluster.rest_url, missing, f"file://{tmp_path / 'sp'}")
    assert r.returncode != 0 and "is not running" in r.stderr


def test_restore_falls_back_from_a_corrupted_latest_checkpoint(sp_cluster: Cluster, tmp_path: Path) -> None:
    cli = Cli(sp_cluster, tmp_path)
    retain = (
        "execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION",
        "execution.checkpointing.num-retained=3",
    )
    job = cli.run(2, extra=retain)
    wait_until(
        lambda: checkpoints_of(sp_cluster, job)["counts"]["completed"] >= 3,
        timeout=120,
        message="three completed checkpoints",
    )
    # bad requests are refused with the problem named, and the job runs on
    import httpx

    def post(path: str, body: Any) -> httpx.Response:
        return httpx.post(f"{sp_cluster.rest_url}/jobs/{job}/{path}", json=body, headers=sp_cluster.auth, timeout=30)

    for path, body, problem in [
        ("stop", {"drain": 1, "targetDirectory": "/tmp/x"}, "drain must be true or false"),
        ("stop", {"targetDirectory": "relative/dir"}, "must be an absolute path or a URL"),
        ("savepoints", {"target-directory": 7}, "target-directory must be a non-empty string"),
        ("savepoints", {"cancel-job": "yes"}, "cancel-job must be true or false"),
        ("savepoints", [1], "the body must be a JSON object"),
    ]:
        resp = post(path, body)
        assert resp.status_code == 400 and problem in resp.json()["errors"][0], (path, body, resp.text)
    r = cli("stop", "-m", sp_cluster.rest_url, "--drain", "--timeout", "-1", "-p", "/tmp/x", job)
    assert r.returncode != 0 and "--timeout must be positive" in r.stderr
    r = cli("cancel", "-m", sp_cluster.rest_url, job)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: state_of(sp_cluster, job) == "CANCELED", timeout=60, message="the job is cancelled")
    job_dir = tmp_path / "checkpoints" / job
    ids = sorted(int(p.name[4:]) for p in job_dir.glob("chk-*") if (p / "_metadata").exists())
    assert len(ids) >= 2, ids
    newest, previous = ids[-1], ids[-2]
    meta = job_dir / f"chk-{newest}" / "_metadata"
    data = bytearray(meta.read_bytes())
    data[-3] ^= 0xFF
    meta.write_bytes(bytes(data))
    # the job's checkpoint directory: the newest valid checkpoint is restored
    resumed = cli.run(2, "-s", f"file://{job_dir}")
    running_with_checkpoint(sp_cluster, resumed)
    restored = checkpoints_of(sp_cluster, resumed)["latest"]["restored"]
    assert restored["id"] == previous and restored["external_path"].endswith(f"/chk-{previous}")
    assert any(f"chk-{newest}/_metadata" in s and "checksum mismatch" in s for s in restored["skipped"])
    cli("cancel", "-m", sp_cluster.rest_url, resumed)
    # the corrupted checkpoint named explicitly: the job fails, naming it and the problem
    explicit = cli.run(2, "-s", f"file://{job_dir}/chk-{newest}")
    wait_until(lambda: state_of(sp_cluster, explicit) == "FAILED", timeout=60, message="the job fails")
    cause = root_exception(sp_cluster, explicit)
    assert f"chk-{newest}/_metadata" in cause and "checksum mismatch: the file is corrupted" in cause


COUNT_JOB = """
    import os, sys, time
    from yarnflink import FileSink, KeyedProcessFunction, MapFunction, StreamExecutionEnvironment, ValueStateDescriptor

    out, checkpoints, flag = sys.argv[1:4]

    class Slow(MapFunction):
        def map(self, value):
            if os.path.exists(flag):
                time.sleep(0.001)
            return value

    class Count(KeyedProcessFunction):
        def open(self, runtime_context):
            self.count = runtime_context.get_state(ValueStateDescriptor("count"))

        def process_element(self, value, ctx):
            c = (self.count.value() or 0) + 1
            self.count.update(c)
            yield (ctx.get_current_key(), c)

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_max_parallelism(128)
    env.get_config().set("execution.checkpointing.interval", "300 ms")
    env.get_config().set("execution.checkpointing.dir", checkpoints)
    (env.from_sequence(0, 100_000).set_parallelism(1).map(Slow()).set_parallelism(1)
        .map(lambda x: "user-%d" % (x % 50)).set_parallelism(1)
        .key_by(lambda k: k).process(Count()).set_parallelism(2).uid("counter")
        .sink_to(FileSink(out, format="jsonl")).set_parallelism(1).uid("sink"))
    env.execute("counts from a bootstrapped savepoint")
"""


def test_state_processor_api_bootstrap_run_savepoint_read(sp_cluster: Cluster, tmp_path: Path) -> None:
    """bootstrap_savepoint from a Spark DataFrame -> ``run -s`` of a job whose keyed counts continue
    from it -> stop with a savepoint -> read_savepoint gives each key's last committed count."""
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    from yarnflink.state_processor import bootstrap_savepoint, read_savepoint

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    try:
        initial = {f"user-{i}": 1000 * i for i in range(50)}
        boot = bootstrap_savepoint(
            spark.createDataFrame(sorted(initial.items()), ["key", "value"]),
            f"file://{tmp_path / 'boot'}",
            "counter",
            "count",
            128,
            parallelism=2,
        )
        cli = Cli(sp_cluster, tmp_path)
        cli.job.write_text(textwrap.dedent(COUNT_JOB))
        r = cli(
            "run",
            "-m",
            sp_cluster.rest_url,
            "-d",
            "-s",
            boot,
            str(cli.job),
            str(cli.out),
            cli.checkpoints,
            str(cli.flag),
        )
        assert r.returncode == 0, r.stderr
        job = re.search(r"JobID ([0-9a-f]{32})", r.stdout).group(1)  # type: ignore[union-attr]
        running_with_checkpoint(sp_cluster, job)
        wait_until(lambda: committed(cli.out), timeout=60, message="committed output")
        stopped = cli.savepoint_path(cli("stop", "-m", sp_cluster.rest_url, "-p", f"file://{tmp_path / 'sp'}", job))
        assert state_of(sp_cluster, job) == "FINISHED"
        out = committed(cli.out)
        last: dict[str, int] = {}
        for key, count in out:  # sorted: per key, counts ascending
            assert count == last.get(key, initial[key]) + 1, (key, count)  # continues from the bootstrap
            last[key] = count
        state = {r["key"]: r["value"] for r in read_savepoint(spark, stopped, "counter", "count").collect()}
        assert state == {k: last.get(k, v) for k, v in initial.items()}
        assert any(state[k] > initial[k] for k in initial)
    finally:
        spark.stop()


def test_a_restart_falls_back_from_a_damaged_latest_checkpoint(sp_cluster: Cluster, tmp_path: Path) -> None:
    """A TaskExecutor dies while the newest retained checkpoint has lost a state file: the
    restarted job restores the previous checkpoint and says why."""
    cli = Cli(sp_cluster, tmp_path)
    job = cli.run(
        2,
        extra=(
            "execution.checkpointing.num-retained=2",
            "restart-strategy.type=fixed-delay",
            "restart-strategy.fixed-delay.attempts=5",
            "restart-strategy.fixed-delay.delay=200 ms",
        ),
    )
    wait_until(
        lambda: checkpoints_of(sp_cluster, job)["counts"]["completed"] >= 2,
        timeout=120,
        message="two completed checkpoints",
    )
    block = Path(str(cli.flag) + ".block")
    block.touch()  # the pipeline stops: no further checkpoint completes

    def stable_latest() -> Any:
        first = checkpoints_of(sp_cluster, job)
        import time

        time.sleep(1.5)
        second = checkpoints_of(sp_cluster, job)
        done = second["latest"]["completed"]
        same = first["counts"]["completed"] == second["counts"]["completed"]
        return done if same and done else None

    latest = wait_until(stable_latest, timeout=90, message="no checkpoint completing any more")
    chk = Path(latest["external_path"][len("file://") :])  # type: ignore[index]
    victims = sorted(chk.glob("*.arrow"))
    assert victims, list(chk.iterdir())
    victims[0].unlink()
    pids = {tm["id"]: tm["hardware"]["pid"] for tm in sp_cluster.rest.taskmanagers()}
    d = sp_cluster.rest.job(job)
    tms = sorted({s["taskmanager-id"] for v in d["vertices"] for s in v["subtasks"]} & set(pids))
    os.kill(pids[tms[0]], signal.SIGKILL)
    wait_until(lambda: sp_cluster.rest.job(job)["numRestarts"] >= 1, timeout=90, message="a restart")
    block.unlink()

    def restored() -> Any:
        r = checkpoints_of(sp_cluster, job)["latest"]["restored"]
        return r if r and r["id"] != 0 else None

    info = wait_until(restored, timeout=90, message="a restore")
    assert info["id"] < latest["id"], (info, latest)  # type: ignore[index]
    assert any(f"checkpoint {latest['id']} skipped" in s and "is missing" in s for s in info["skipped"])  # type: ignore[index]
    cli.flag.unlink()
    wait_until(lambda: state_of(sp_cluster, job) in ("FINISHED", "FAILED"), timeout=180, message="the job ends")
    assert state_of(sp_cluster, job) == "FINISHED", root_exception(sp_cluster, job)
