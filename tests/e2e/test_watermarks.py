"""Watermarks crossing tasks and processes: real master and TaskExecutor processes on loopback.

The source waits before its last record until the test releases it, so a window result can only
be seen before that if the watermark crossed the keyed exchange (between TaskExecutors) while the
source was still running -- not just the end of input.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from yarnflink import (
    Duration,
    ProcessWindowFunction,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from yarnflink.api.connectors import DiscardingSink, FileSource
from yarnflink.operators.windows import OutputTag

from .conftest import wait_until

pytestmark = pytest.mark.e2e
# the functions below run in the TaskExecutors, which cannot import this test module
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Gate:
    """The slow part of the source: a little pause per record, and the record ``hold_at``
    waits until the test creates the release file."""

    def __init__(self, release: str, hold_at: int) -> None:
        self.release = release
        self.hold_at = hold_at

    def __call__(self, e: Any) -> Any:
        time.sleep(0.02)
        if e["i"] == self.hold_at:
            deadline = time.monotonic() + 300
            while not os.path.exists(self.release) and time.monotonic() < deadline:
                time.sleep(0.02)
        return e


class Append:
    """A side-effect sink: one JSON line per record (the test reads it while the job runs)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, x: Any) -> Any:
        with open(self.path, "a") as f:
            f.write(json.dumps(x) + "\n")
        return x


class CountWindow(ProcessWindowFunction):
    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        w = context.window()
        yield [key, w.start, w.end, sum(1 for _ in elements)]


def _seen(client: Any, path: Path, row: list) -> bool:
    status = client.get_job_status()
    if status in ("FAILED", "CANCELED"):
        raise AssertionError(f"the job is {status}")
    return row in _lines(path)


def _lines(path: Path) -> list:
    if not path.exists():
        return []
    text = path.read_text()
    # only whole lines: the sink (another process) may be half-way through appending one
    text = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _write_events(directory: Path, events: list[dict]) -> None:
    directory.mkdir()
    for n, e in enumerate(events):  # one file per record: the source emits one batch per record
        (directory / f"part-{n:04d}.jsonl").write_text(json.dumps(e) + "\n")


def test_event_time_windows_fire_across_taskexecutors_while_the_source_runs(executor, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    n = 40
    events = [{"k": "ab"[i % 2], "t": i * 1000, "i": i} for i in range(n)]
    events[25] = {"k": "a", "t": 1000, "i": 25}  # late: window [0, 5000) has fired by then
    _write_events(tmp_path / "in", events)
    release, results, late_out = tmp_path / "release", tmp_path / "results", tmp_path / "late"

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.get_config().set("pipeline.auto-watermark-interval", "50 ms")
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _ts: e["t"])
    late = OutputTag("late")
    timed = (
        env.from_source(FileSource(str(tmp_path / "in"), format="jsonl"), name="events")
        .set_parallelism(1)
        .map(Gate(str(release), hold_at=n - 1))
        .set_parallelism(1)
        .assign_timestamps_and_watermarks(strategy)
        .set_parallelism(1)
    )
    windows = (
        timed.key_by(lambda e: e["k"])
        .window(TumblingEventTimeWindows.of(Time.seconds(5)))
        .side_output_late_data(late)
        .process(CountWindow())
    )
    windows.map(Append(str(results))).sink_to(DiscardingSink())
    windows.get_side_output(late).map(Append(str(late_out))).sink_to(DiscardingSink())
    client = env.execute_async("windows fire while the source runs")
    try:
        wait_until(
            lambda: _seen(client, results, ["b", 0, 5000, 2]),
            timeout=120,
            message="the first window's result while the source is held",
        )
        wait_until(lambda: _lines(late_out), timeout=60, message="the late record in the side output")
        assert not release.exists()
        assert client.get_job_status() == "RUNNING"  # the source has not ended: held at its last record
        assert _lines(late_out) == [{"k": "a", "t": 1000, "i": 25}]
        early = _lines(results)
    finally:
        release.touch()
    client.get_job_execution_result()
    got = sorted(map(tuple, _lines(results)))
    expected: dict = {}
    for e in events:
        if e["i"] != 25:
            start = e["t"] // 5000 * 5000
            expected[(e["k"], start, start + 5000)] = expected.get((e["k"], start, start + 5000), 0) + 1
    assert got == sorted((k, s, t, c) for (k, s, t), c in expected.items())
    assert len(early) >= 2  # results of several windows were out before the end of input


def test_an_idle_partition_does_not_hold_back_windows_downstream(executor, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Every record has the same key, so one of the two assigner subtasks after the first keyed
    exchange never sees a record; ``with_idleness`` marks its partition idle and the windows after
    the second exchange fire anyway while the source is held."""
    n = 30
    events = [{"k": "only", "t": i * 1000, "i": i} for i in range(n)]
    _write_events(tmp_path / "in", events)
    release, results = tmp_path / "release", tmp_path / "results"

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.get_config().set("pipeline.auto-watermark-interval", "50 ms")
    strategy = (
        WatermarkStrategy.for_monotonous_timestamps()
        .with_timestamp_assigner(lambda e, _ts: e["t"])
        .with_idleness(Duration.of_millis(500))
    )
    (
        env.from_source(FileSource(str(tmp_path / "in"), format="jsonl"), name="events")
        .set_parallelism(1)
        .map(Gate(str(release), hold_at=n - 1))
        .set_parallelism(1)
        .key_by(lambda e: e["k"])
        .map(lambda e: e)  # two subtasks, one of them without input
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda e: e["i"] % 2)
        .window(TumblingEventTimeWindows.of(Time.seconds(5)))
        .process(CountWindow())
        .map(Append(str(results)))
        .sink_to(DiscardingSink())
    )
    client = env.execute_async("an idle partition")
    try:
        wait_until(
            lambda: _seen(client, results, [0, 0, 5000, 3]),
            timeout=120,
            message="a window result while one partition is idle and the source is held",
        )
        assert client.get_job_status() == "RUNNING"
    finally:
        release.touch()
    client.get_job_execution_result()
    assert len(_lines(results)) == 12  # 6 windows x 2 keys
