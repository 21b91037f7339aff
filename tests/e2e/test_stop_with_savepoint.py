"""Stop-with-savepoint end to end (FLIP-34), with real master and TaskExecutor processes and the
``yarnflink`` command line / REST API.

The job: a slow sequence source whose records carry event time ``x * 10 ms`` feeds keyed tumbling
event-time windows (5 s: 500 records each, counted and summed per key) into an exactly-once
FileSink. Every run of a test writes to the same output directory, so the output committed by all
runs together can be compared with one failure-free run.

* ``stop`` (SUSPEND): the job ends FINISHED; the windows still open at the stop fire only after a
  restore from the savepoint, and the output of the stopped and the restored run together is
  exactly the failure-free output (no partial window emitted at the stop, nothing twice);
* ``stop --drain`` (TERMINATE): MAX_WATERMARK before the savepoint, so every window that holds a
  record fires before the job ends FINISHED: the output is exactly the failure-free output of the
  records read until the stop;
* a stop whose savepoint cannot be written fails with the reason in the trigger status, the job
  keeps RUNNING (and checkpointing), and a later stop and restore still give exactly the
  failure-free output;
* a task that fails after the stop's savepoint completed (on its completion notification, before
  the sink commits it) ends the job FAILED without a restart (FLINK-26783), the stop fails naming
  the savepoint, and a restore from that savepoint commits what it covered: exactly the
  failure-free output again.

Before the sink, a ``CommitHook`` (keyed process function at parallelism 1, chained with the
sink) passes the windows on; two files next to ``flag`` steer it: while ``hold`` exists it holds
the next record (and creates ``held``), and its ``notify_checkpoint_complete`` of a checkpoint
whose id is at least the one in ``fail-at`` raises (before the sink, after it in the chain,
commits anything).
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.oracles import committed

from .cli_runner import JobCli
from .conftest import Cluster, start_cluster, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

N = 60_000  # at 1 ms a record while slowed: 60 s, far more than a test stays slowed
KEYS = 5
WINDOW_MS = 5_000
STEP_MS = 10  # event time of record x: x * STEP_MS

JOB = """
    import os, sys, time
    from yarnflink import (Duration, FileSink, KeyedProcessFunction, MapFunction, ProcessWindowFunction,
                           StreamExecutionEnvironment, Time, TumblingEventTimeWindows, WatermarkStrategy)

    out, checkpoints, flag = sys.argv[1:4]
    hold, held, fail_at = (os.path.join(os.path.dirname(flag), name) for name in ("hold", "held", "fail-at"))

    class Slow(MapFunction):
        def map(self, value):
            if os.path.exists(flag):
                time.sleep(0.001)
            return value

    class CommitHook(KeyedProcessFunction):
        def process_element(self, value, ctx):
            if os.path.exists(hold):
                open(held, "w").close()
                while os.path.exists(hold):
                    time.sleep(0.005)
            yield value

        def notify_checkpoint_complete(self, checkpoint_id):
            if os.path.exists(fail_at) and checkpoint_id >= int(open(fail_at).read()):
                raise RuntimeError("injected failure on the completion of checkpoint " + str(checkpoint_id))

    class WithWindow(ProcessWindowFunction):
        def process(self, key, context, elements):
            for _k, count, total in elements:
                yield (key, context.window().start, count, total)

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_max_parallelism(128)
    for k, v in {"execution.checkpointing.interval": "300 ms", "execution.checkpointing.dir": checkpoints,
                 "pipeline.auto-watermark-interval": "50 ms"}.items():
        env.get_config().set(k, v)
    strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0))
                .with_timestamp_assigner(lambda x, _ts: x * %(step)d))
    (env.from_sequence(0, %(n)d - 1).set_parallelism(1).uid("source")
        .map(Slow()).set_parallelism(1).uid("slow")
        .assign_timestamps_and_watermarks(strategy).set_parallelism(1).uid("timestamps")
        .map(lambda x: (x %% %(keys)d, 1, x)).set_parallelism(1).uid("pair")
        .key_by(lambda t: t[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(%(window)d)))
        .reduce(lambda a, b: (a[0], a[1] + b[1], a[2] + b[2]), window_function=WithWindow())
        .set_parallelism(2).uid("windows")
        .key_by(lambda r: 0).process(CommitHook()).set_parallelism(1).uid("commit-hook")
        .sink_to(FileSink(out, format="jsonl")).set_parallelism(1).uid("sink"))
    env.execute("windowed sums, stopped with a savepoint")
""" % {"n": N, "keys": KEYS, "step": STEP_MS, "window": WINDOW_MS}


def window_sums(n: int) -> list[tuple[int, int, int, int]]:
    """The sorted ``(key, window start, count, sum)`` records of a failure-free run over ``0 .. n-1``."""
    acc: dict[tuple[int, int], list[int]] = collections.defaultdict(lambda: [0, 0])
    for x in range(n):
        a = acc[(x % KEYS, x * STEP_MS // WINDOW_MS * WINDOW_MS)]
        a[0] += 1
        a[1] += x
    return sorted((k, start, c, s) for (k, start), (c, s) in acc.items())


@pytest.fixture(scope="module")
def stop_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("stop-cluster"), taskexecutors=2, slots=2)
    yield c
    c.stop()


class Cli(JobCli):
    """``yarnflink`` in a subprocess against the test cluster, for one test's windowed job."""

    timeout = 300.0

    def __init__(self, cluster: Cluster, tmp_path: Path) -> None:
        super().__init__(cluster, tmp_path, JOB)
        self.savepoints = f"file://{tmp_path / 'savepoints'}"

    def run(self, *flags: str) -> str:
        return self.submit(flags, ())

    def stop(self, job_id: str, *flags: str) -> str:
        """``yarnflink stop``: the savepoint's path, printed once the job ended."""
        path = self.savepoint_path(self("stop", "-m", self.cluster.rest_url, "-p", self.savepoints, *flags, job_id))
        assert os.path.isfile(path[len("file://") :] + "/_metadata")
        return path


def state_of(cluster: Cluster, job_id: str) -> str:
    return str(cluster.rest.job(job_id)["state"])


def root_exception(cluster: Cluster, job_id: str) -> str:
    return str(cluster.rest.exceptions(job_id).get("root-exception") or "")


def completed_checkpoints(cluster: Cluster, job_id: str) -> int:
    return int(cluster.rest.get_json(f"/jobs/{job_id}/checkpoints")["counts"]["completed"])


def running_with_output(cluster: Cluster, cli: Cli, job_id: str, timeout: float = 120) -> None:
    """The job runs, has completed a checkpoint and committed some windows."""

    def ok() -> bool:
        state = state_of(cluster, job_id)
        assert state not in ("FAILED", "CANCELED", "FINISHED"), (state, root_exception(cluster, job_id))
        return state == "RUNNING" and completed_checkpoints(cluster, job_id) >= 1 and bool(committed(cli.out))

    wait_until(ok, timeout=timeout, interval=0.1, message=f"job {job_id} running with committed windows")


def run_to_the_end(cluster: Cluster, cli: Cli, savepoint: str) -> None:
    """Restore from ``savepoint`` at full speed and run until the bounded input ends."""
    cli.flag.unlink()
    job = cli.run("-s", savepoint)
    wait_until(
        lambda: state_of(cluster, job) in ("FINISHED", "FAILED", "CANCELED"),
        timeout=300,
        message="the restored job ends",
    )
    assert state_of(cluster, job) == "FINISHED", root_exception(cluster, job)


def test_stop_ends_finished_and_pending_windows_fire_after_restore(stop_cluster: Cluster, tmp_path: Path) -> None:
    cli = Cli(stop_cluster, tmp_path)
    job = cli.run()
    running_with_output(stop_cluster, cli, job)
    savepoint = cli.stop(job)
    # the CLI prints the path once the job has ended: FINISHED, as Flink's stop
    assert state_of(stop_cluster, job) == "FINISHED", root_exception(stop_cluster, job)
    at_stop = committed(cli.out)
    expected = window_sums(N)
    assert at_stop and set(at_stop) < set(expected), "only complete windows are committed at the stop"
    assert len(at_stop) == len(set(at_stop))
    run_to_the_end(stop_cluster, cli, savepoint)
    got = committed(cli.out)
    assert len(got) == len(expected), f"{len(got)} committed windows, expected {len(expected)}"
    assert got == expected  # the windows open at the stop fired after the restore, with all their records


def test_stop_with_drain_fires_every_pending_window_before_finishing(stop_cluster: Cluster, tmp_path: Path) -> None:
    cli = Cli(stop_cluster, tmp_path)
    job = cli.run()
    running_with_output(stop_cluster, cli, job)
    cli.stop(job, "--drain")
    assert state_of(stop_cluster, job) == "FINISHED", root_exception(stop_cluster, job)
    got = committed(cli.out)
    read = sum(count for _k, _start, count, _sum in got)  # every record read is in exactly one window
    assert 0 < read < N
    # every window holding a record read before the stop fired, also the incomplete last ones
    assert got == window_sums(read)
    assert any(start + WINDOW_MS > (read - 1) * STEP_MS for _k, start, _c, _s in got)


def test_a_failed_stop_leaves_the_job_running_and_loses_nothing(stop_cluster: Cluster, tmp_path: Path) -> None:
    cli = Cli(stop_cluster, tmp_path)
    job = cli.run()
    running_with_output(stop_cluster, cli, job)

    def post(body: Any) -> httpx.Response:
        return httpx.post(f"{stop_cluster.rest_url}/jobs/{job}/stop", json=body, headers=stop_cluster.auth, timeout=30)

    # invalid requests are refused naming the problem; the job runs on
    for body, problem in [
        ({"drain": "yes", "targetDirectory": "/tmp/x"}, "drain must be true or false"),
        ({"targetDirectory": "relative/dir"}, "must be an absolute path or a URL"),
        ({"targetDirectory": "/tmp/x", "drian": True}, "unknown field(s) drian"),
        ([1], "the body must be a JSON object"),
    ]:
        resp = post(body)
        assert resp.status_code == 400 and problem in resp.json()["errors"][0], (body, resp.text)
    r = cli("stop", "-m", stop_cluster.rest_url, "--timeout", "0", job)
    assert r.returncode != 0 and "--timeout must be positive" in r.stderr

    # a savepoint target that cannot be written: under a regular file
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    resp = post({"targetDirectory": f"file://{blocker}/savepoints", "drain": False})
    assert resp.status_code == 200, resp.text
    trigger = resp.json()["request-id"]

    def outcome() -> Any:
        status = stop_cluster.rest.savepoint_status(job, trigger)
        return status if status["status"]["id"] == "COMPLETED" else None

    status = wait_until(outcome, timeout=180, interval=0.2, message="the failed stop's result")
    cause = status["operation"]["failure-cause"]["stack-trace"]  # type: ignore[index]
    assert "location" not in status["operation"]  # type: ignore[index]
    assert "the job keeps running" in cause and "not-a-directory" in cause, cause
    assert "FINALIZE_CHECKPOINT_FAILURE" in cause, cause
    # the job goes on: RUNNING, checkpointing and committing again
    assert state_of(stop_cluster, job) == "RUNNING"
    before = completed_checkpoints(stop_cluster, job)
    windows = len(committed(cli.out))
    wait_until(
        lambda: completed_checkpoints(stop_cluster, job) > before and len(committed(cli.out)) > windows,
        timeout=120,
        interval=0.2,
        message="checkpoints and output after the failed stop",
    )
    assert state_of(stop_cluster, job) == "RUNNING"
    # a CLI stop to the same target fails the same way and says why
    r = cli("stop", "-m", stop_cluster.rest_url, "-p", f"file://{blocker}/savepoints", job)
    assert r.returncode != 0 and "the job keeps running" in r.stderr, r.stderr
    assert state_of(stop_cluster, job) == "RUNNING"

    # then a stop that works, and the rest from its savepoint: nothing lost, nothing twice
    savepoint = cli.stop(job)
    assert state_of(stop_cluster, job) == "FINISHED", root_exception(stop_cluster, job)
    run_to_the_end(stop_cluster, cli, savepoint)
    assert committed(cli.out) == window_sums(N)


def test_a_failure_after_the_stops_savepoint_completed_fails_the_job_and_a_restore_commits_the_rest(
    stop_cluster: Cluster, tmp_path: Path
) -> None:
    """FLINK-26783: the savepoint of the stop completes, then the sink's task fails on its
    completion notification (before the sink commits it). The job ends FAILED without a restart;
    the stop fails naming the savepoint and telling to start from it; and the job started from
    that savepoint commits what it covered: the output is exactly the failure-free output."""
    cli = Cli(stop_cluster, tmp_path)
    job = cli.run()
    running_with_output(stop_cluster, cli, job)
    restarts = int(stop_cluster.rest.job(job)["numRestarts"])
    hold, held, fail_at = tmp_path / "hold", tmp_path / "held", tmp_path / "fail-at"
    stderr = tmp_path / "stop.stderr"

    def in_progress_savepoint() -> int:
        history = stop_cluster.rest.get_json(f"/jobs/{job}/checkpoints")["history"]
        return next((int(h["id"]) for h in history if h["is_savepoint"] and h["status"] == "IN_PROGRESS"), 0)

    # hold the sink's task on a record: no checkpoint can complete until it goes on, so the
    # stop's savepoint is still in progress when the failure is armed for its id
    hold.touch()
    try:
        wait_until(held.exists, timeout=60, message="the commit hook holding a record")
        with stderr.open("w") as err:
            stopping = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "yarnflink.cli.main",
                    "stop",
                    "-m",
                    stop_cluster.rest_url,
                    "-p",
                    cli.savepoints,
                    "--timeout",
                    "240",
                    job,
                ],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=cli.env,
                cwd=tmp_path,
                stdin=subprocess.DEVNULL,
            )
        try:
            found = wait_until(
                lambda: re.search(r"\(trigger ([0-9a-f]{32})\)", stderr.read_text()),
                timeout=60,
                message="the stop's trigger id",
            )
            trigger = found.group(1)  # type: ignore[attr-defined]
            savepoint_id = int(
                wait_until(
                    in_progress_savepoint,
                    timeout=60,
                    interval=0.1,  # type: ignore[arg-type]
                    message="the stop's savepoint in progress",
                )
            )
            (tmp_path / "fail-at.tmp").write_text(str(savepoint_id))
            os.replace(tmp_path / "fail-at.tmp", fail_at)
            assert state_of(stop_cluster, job) == "RUNNING" and in_progress_savepoint() == savepoint_id
        finally:
            hold.unlink()
        out, _ = stopping.communicate(timeout=300)
    finally:
        hold.unlink(missing_ok=True)

    # the CLI fails, says why and what to do
    message = stderr.read_text()
    assert stopping.returncode != 0, (out, message)
    m = re.search(r"yarnflink run -s (\S+) ", message)
    assert m and "complete and consistent" in message and "may not have been committed" in message, message
    savepoint = m.group(1)
    assert os.path.isfile(savepoint[len("file://") :] + "/_metadata")
    # the trigger status: failed, naming the savepoint (it did complete: it is in the history)
    status = stop_cluster.rest.savepoint_status(job, trigger)
    assert status["status"]["id"] == "COMPLETED" and "location" not in status["operation"], status
    cause = status["operation"]["failure-cause"]
    assert cause["class"] == "StopWithSavepointStoppingException", cause
    assert f"the savepoint {savepoint} completed" in cause["stack-trace"], cause
    assert "injected failure on the completion of checkpoint" in cause["stack-trace"], cause
    assert f"yarnflink run -s {savepoint}" in cause["stack-trace"], cause
    history = stop_cluster.rest.get_json(f"/jobs/{job}/checkpoints")["history"]
    assert [h["external_path"] for h in history if h["id"] == savepoint_id] == [savepoint]
    # the job failed without a failover: no restart, every subtask still at its first attempt
    wait_until(
        lambda: state_of(stop_cluster, job) in ("FAILED", "CANCELED", "FINISHED"),
        timeout=120,
        message="the stopped job ends",
    )
    details = stop_cluster.rest.job(job)
    assert details["state"] == "FAILED", root_exception(stop_cluster, job)
    assert details["numRestarts"] == restarts
    assert {st["attempt"] for v in details["vertices"] for st in v["subtasks"]} == {0}
    root = root_exception(stop_cluster, job)
    assert root.startswith("StopWithSavepointStoppingException: ") and savepoint in root, root
    assert "RuntimeError: injected failure on the completion of checkpoint" in root, root

    # a job started from the savepoint commits what it covered and goes on: nothing lost, nothing twice
    fail_at.unlink()
    at_stop = committed(cli.out)
    assert len(at_stop) == len(set(at_stop)) and set(at_stop) < set(window_sums(N))
    run_to_the_end(stop_cluster, cli, savepoint)
    assert committed(cli.out) == window_sums(N)
