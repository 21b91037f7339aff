"""Jobs across a real master and two TaskExecutor processes, checked for exact results."""

from __future__ import annotations

import collections
import glob
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from yarnflink import FileSink, RuntimeExecutionMode, StreamExecutionEnvironment
from yarnflink.client.executor import JobExecutionException

from .conftest import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

WORDS = [f"w{i}" for i in range(1000)]


def read_jsonl(path: Path) -> list:
    out = []
    for f in sorted(glob.glob(os.path.join(path, "part-*"))):
        with open(f) as fh:
            out.extend(json.loads(line) for line in fh)
    return out


def test_word_count_over_a_million_words_across_task_executors(cluster: Cluster, executor, tmp_path: Path) -> None:
    # 100k lines x 10 words; word i*k % 1000 -> known counts
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    lines = env.from_sequence(0, 99_999).map(lambda i: " ".join(WORDS[(i * 7 + k * 13) % 1000] for k in range(10)))
    counts = lines.flat_map(lambda line: [(w, 1) for w in line.split()]).key_by(lambda t: t[0]).sum(1)
    counts.sink_to(FileSink(str(tmp_path / "out"), format="jsonl"))
    result = env.execute("wordcount")
    details = cluster.rest.job(result.get_job_id())
    keyed = [v for v in details["vertices"] if "Keyed" in v["name"] or "Aggregation" in v["name"]][0]
    # the keyed exchange crossed processes: its two subtasks ran on different TaskExecutors
    assert len({s["taskmanager-id"] for s in keyed["subtasks"]}) == 2

    expected = collections.Counter(WORDS[(i * 7 + k * 13) % 1000] for i in range(100_000) for k in range(10))
    got = read_jsonl(tmp_path / "out")
    assert sum(n for _, n in got) == 1_000_000
    assert dict((w, n) for w, n in got) == dict(expected)
    assert len(got) == len(expected)  # BATCH: exactly one final record per key
    # the keyed exchange really crossed TaskExecutors: both subtasks wrote a part file
    assert len(glob.glob(str(tmp_path / "out" / "part-*"))) == 2


def test_streaming_keyed_reduce_emits_every_update(cluster: Cluster, executor) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    data = [("a", 1), ("b", 10), ("a", 2), ("a", 3), ("b", 20)]
    out = list(
        env.from_collection(data)
        .set_parallelism(1)
        .key_by(lambda t: t[0])
        .reduce(lambda x, y: (x[0], x[1] + y[1]))
        .execute_and_collect()
    )
    by_key = collections.defaultdict(list)
    for k, v in out:
        by_key[k].append(v)
    assert by_key == {"a": [1, 3, 6], "b": [10, 30]}


def test_broadcast_state_reaches_every_subtask_of_a_keyed_broadcast_process(cluster: Cluster, executor) -> None:
    """The rules (one subtask) are broadcast to both subtasks of the keyed operator, across
    TaskExecutors; each applies its own copy to the keys it owns. The elements wait in keyed
    state for a timer that fires at the end of both inputs, when the rules are in."""
    from yarnflink.api import KeyedBroadcastProcessFunction, ListStateDescriptor, MapStateDescriptor

    rules_desc = MapStateDescriptor("rules", None, None)

    class Apply(KeyedBroadcastProcessFunction):
        def open(self, runtime_context):
            self.subtask = runtime_context.get_index_of_this_subtask()
            self.pending = runtime_context.get_list_state(ListStateDescriptor("pending"))

        def process_element(self, value, ctx):
            self.pending.add(value[1])
            ctx.timer_service().register_event_time_timer(1)

        def process_broadcast_element(self, value, ctx):
            ctx.get_broadcast_state(rules_desc).put(value[0], value[1])

        def on_timer(self, timestamp, ctx):
            limit = ctx.get_broadcast_state(rules_desc).get("limit")
            for v in self.pending.get():
                if v >= limit:
                    yield ctx.get_current_key(), v, self.subtask

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    events = env.from_collection([(f"k{i % 20}", i) for i in range(200)]).key_by(lambda v: v[0])
    rules = env.from_collection([("limit", 150)]).set_parallelism(1)
    out = list(events.connect(rules.broadcast(rules_desc)).process(Apply()).execute_and_collect())
    assert sorted((k, v) for k, v, _ in out) == sorted((f"k{i % 20}", i) for i in range(150, 200))
    assert {s for _, _, s in out} == {0, 1}  # both subtasks had the rule


def test_batch_functions_and_vectorized_keyed_sum(cluster: Cluster, executor) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)

    def to_pairs(rb: pa.RecordBatch) -> pa.RecordBatch:
        v = rb.column(0)
        return pa.record_batch([pc.bit_wise_and(v, 15), v], names=["f0", "f1"])

    out = list(env.from_sequence(1, 200_000).map_batches(to_pairs).key_by(0).sum(1).execute_and_collect())
    assert len(out) == 200_000  # STREAMING: one running total per input
    finals: dict = {}
    for k, total in out:
        finals[k] = max(finals.get(k, 0), total)
    assert finals == {k: sum(i for i in range(1, 200_001) if i & 15 == k) for k in range(16)}


def test_partitionings_and_min_max(cluster: Cluster, executor) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    src = env.from_sequence(1, 1000)
    assert sorted(src.rebalance().map(lambda x: x * 2).execute_and_collect()) == [x * 2 for x in range(1, 1001)]
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    got = list(env.from_sequence(1, 10).broadcast().map(lambda x: x).set_parallelism(2).execute_and_collect())
    assert sorted(got) == sorted(list(range(1, 11)) * 2)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    got = list(
        env.from_collection([("x", 5), ("y", 1), ("x", 2), ("y", 9)])
        .shuffle()
        .key_by(lambda t: t[0])
        .max(1)
        .execute_and_collect()
    )
    assert sorted(got) == [("x", 5), ("y", 9)]


def test_file_source_to_parquet_sink(cluster: Cluster, executor, tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    for i in range(4):
        with open(src / f"part-{i}.jsonl", "w") as f:
            for j in range(100):
                f.write(json.dumps({"user": f"u{j % 5}", "n": i * 100 + j}) + "\n")
    from yarnflink import FileSource

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_source(FileSource(str(src), format="jsonl")).filter(lambda r: r["n"] % 2 == 0).sink_to(
        FileSink(str(tmp_path / "out"), format="parquet")
    )
    env.execute("files")
    import pyarrow.parquet as pq

    tables = [pq.read_table(p) for p in sorted(glob.glob(str(tmp_path / "out" / "part-*")))]
    ns = sorted(n for t in tables for n in t.column("n").to_pylist())
    assert ns == list(range(0, 400, 2))


def test_user_function_exception_fails_the_job_with_its_traceback(cluster: Cluster, executor) -> None:
    def explode(x: int) -> int:
        if x == 777:
            raise ValueError("bad record 777")
        return x

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_sequence(1, 1000).map(explode).print()
    with pytest.raises(JobExecutionException) as info:
        env.execute("exploding")
    assert "ValueError: bad record 777" in info.value.cause
    assert "in explode" in info.value.cause  # the Python traceback, with the user's frame
    exc = cluster.rest.exceptions(info.value.job_id)
    assert "bad record 777" in exc["root-exception"]
    entry = exc["exceptionHistory"]["entries"][-1]
    assert entry["exceptionName"] == "ValueError" and entry["taskName"]
    assert cluster.rest.job(info.value.job_id)["state"] == "FAILED"
    # the master keeps serving
    assert cluster.rest.overview()["taskmanagers"] == 2
