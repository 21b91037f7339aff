"""PyFlink programs run unchanged (issue 19): the same program under ``python job.py`` (an
embedded per-job cluster), ``yarnflink run`` on the shared cluster and ``yarnflink info``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import Cluster

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]

JOB = textwrap.dedent(
    """
    import sys
    from typing import Iterable

    from pyflink.common import Encoder, Types, WatermarkStrategy
    from pyflink.common.watermark_strategy import TimestampAssigner
    from pyflink.datastream import ProcessWindowFunction, StreamExecutionEnvironment, WindowFunction
    from pyflink.datastream.connectors import FileSink, OutputFileConfig, RollingPolicy
    from pyflink.datastream.window import (
        CountWindow, EventTimeSessionWindows, SessionWindowTimeGapExtractor, TimeWindow,
    )


    class Ts(TimestampAssigner):
        def extract_timestamp(self, value, record_timestamp) -> int:
            return int(value[1])


    class Gap(SessionWindowTimeGapExtractor):
        def extract(self, element: tuple) -> int:
            return element[1]


    class PerSession(ProcessWindowFunction[tuple, tuple, str, TimeWindow]):
        def process(self, key: str, context: ProcessWindowFunction.Context[TimeWindow],
                    elements: Iterable[tuple]) -> Iterable[tuple]:
            return [(key, context.window().start, context.window().end, len([e for e in elements]))]


    class SumWindow(WindowFunction[tuple, tuple, str, CountWindow]):
        def apply(self, key: str, window: CountWindow, inputs: Iterable[tuple]):
            return [(key, sum(i[0] for i in inputs))]


    out = sys.argv[1]
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    people = env.from_collection(
        [(1, "ann"), (2, "bob")], type_info=Types.ROW_NAMED(["id", "info"], [Types.INT(), Types.STRING()])
    )
    people.map(lambda r: (r.info, r["id"] * 10), output_type=Types.TUPLE([Types.STRING(), Types.INT()])).sink_to(
        FileSink.for_row_format(out, Encoder.simple_string_encoder())
        .with_output_file_config(OutputFileConfig.builder().with_part_prefix("people").with_part_suffix(".txt").build())
        .with_rolling_policy(RollingPolicy.default_rolling_policy())
        .build()
    )
    env.execute("people")

    sessions = (
        env.from_collection([("hi", 1), ("hi", 2), ("hi", 3), ("hi", 4), ("hi", 9), ("hi", 9), ("hi", 15)],
                            type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
        .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Ts()))
        .key_by(lambda x: x[0], key_type=Types.STRING())
        .window(EventTimeSessionWindows.with_dynamic_gap(Gap()))
        .process(PerSession(), Types.TUPLE([Types.STRING(), Types.INT(), Types.INT(), Types.INT()]))
    )
    counts = (
        env.from_collection([(1, "hi"), (2, "hello"), (3, "hi"), (4, "hello"), (5, "hi"), (6, "hello"), (6, "hello")])
        .key_by(lambda x: x[1])
        .count_window(3)
        .apply(SumWindow(), Types.TUPLE([Types.STRING(), Types.INT()]))
    )
    with sessions.union(counts).execute_and_collect() as results:
        for r in sorted(results, key=str):
            print("collected", r)
    """
)

EXPECTED_COLLECTED = [
    "collected ('hello', 12)",
    "collected ('hi', 1, 8, 4)",
    "collected ('hi', 9)",
    "collected ('hi', 9, 30, 3)",
]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def _check(stdout: str, out: Path) -> None:
    assert [line for line in stdout.splitlines() if line.startswith("collected")] == EXPECTED_COLLECTED
    assert (out / "people-0-0.txt").read_text() == "(ann,10)\n(bob,20)\n"


def test_python_job_py_runs_a_pyflink_program_on_an_embedded_cluster(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    r = subprocess.run(
        [sys.executable, str(job), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
        env=_env(YARNFLINK_SESSIONS_DIR=str(tmp_path / "sessions")),  # no session: a per-job cluster
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stderr
    _check(r.stdout, tmp_path / "out")


def test_yarnflink_run_and_info_run_the_same_program(cluster: Cluster, tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    env = _env(YARNFLINK_REST_TOKEN=cluster.rest.headers["authorization"].split(" ", 1)[1])
    cli = [sys.executable, "-m", "yarnflink.cli.main"]
    r = subprocess.run(
        [*cli, "run", "-m", cluster.rest_url, str(job), str(tmp_path / "out")],
        capture_output=True, text=True, timeout=240, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    _check(r.stdout, tmp_path / "out")
    info = subprocess.run(
        [*cli, "info", str(job), str(tmp_path / "out-info")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert info.returncode == 0, info.stderr
    assert "File Sink" in info.stdout and "Collection" in info.stdout
