"""Batch scheduling (issue 3, item 6): a BATCH job's exchanges are blocking, its pipelined regions
are deployed in topological order from the sources once their inputs are complete, and slots are
reused region after region -- so a job with more tasks than slots finishes."""

from __future__ import annotations

import collections
import glob
import itertools
import json
import os
from pathlib import Path

import pytest

from yarnflink import FileSink, RuntimeExecutionMode, StreamExecutionEnvironment

from .conftest import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def test_six_vertices_at_parallelism_four_run_region_after_region_on_four_slots(
    cluster: Cluster, executor, tmp_path: Path
) -> None:
    assert cluster.rest.overview()["slots-total"] == 4
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(4)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    (
        env.from_sequence(0, 39_999)
        .map(lambda x: x * 2)
        .name("Double")  # 1: source + map
        .rebalance()
        .map(lambda x: (x % 100, x))
        .name("Pair")  # 2
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))  # 3: one total per key
        .rebalance()
        .map(lambda t: (t[0], t[1] // 2))
        .name("Halve")  # 4
        .shuffle()
        .filter(lambda t: t[0] % 2 == 0)
        .name("Even")  # 5
        .rebalance()
        .map(lambda t: [t[0], t[1]])
        .name("Out")  # 6: map + sink
        .sink_to(FileSink(str(tmp_path / "out"), format="jsonl"))
    )
    result = env.execute("six vertices")
    details = cluster.rest.job(result.get_job_id())
    vertices = details["vertices"]
    assert len(vertices) == 6 and details["state"] == "FINISHED"
    assert all(s["status"] == "FINISHED" and s["attempt"] == 0 for v in vertices for s in v["subtasks"])
    # 24 tasks ran in the 4 slots: regions reused the slots of the regions before them
    allocations = {s["allocation-id"] for v in vertices for s in v["subtasks"]}
    assert len(allocations) <= 4
    # blocking exchanges: each vertex started after the one before it had ended
    for before, after in itertools.pairwise(vertices):
        assert after["start-time"] >= before["end-time"], (before["name"], after["name"])
    totals: collections.Counter[int] = collections.Counter()
    for x in range(40_000):
        totals[(2 * x) % 100] += x
    got = []
    for f in sorted(glob.glob(os.path.join(tmp_path / "out", "part-*"))):
        with open(f) as fh:
            got.extend(tuple(json.loads(line)) for line in fh)
    assert sorted(got) == sorted((k, v) for k, v in totals.items() if k % 2 == 0)
