"""``window(EventTimeSessionWindows...).sum/min/max``: the vectorized path (Arrow batches) and the
per-record path (Python rows) give the same outputs, timestamps and order, with allowed lateness,
late data, checkpoints and rescaling; each scenario runs on both paths, and random streams are
compared between them."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from yarnflink.common.keygroups import key_group_of, key_group_range
from yarnflink.common.records import Batch, records_to_arrow
from yarnflink.operators import specs as S
from yarnflink.operators.window_columns import FieldAggregator
from yarnflink.operators.windows import EventTimeSessionWindows, SideOutputRecord, Time, WindowSpec
from yarnflink.state import TaskStateManager
from yarnflink.state.task_state import snapshot_operators

from .helpers import open_operator, wm

PATHS = ["vec", "rec"]
GAP = EventTimeSessionWindows.with_gap(Time.seconds(3))


def spec(agg: str = "sum", lateness: int = 0, tag: str | None = None, gap: Any = GAP) -> WindowSpec:
    return WindowSpec(gap, S.KeySelectorSpec(field=0), "reduce", FieldAggregator(agg, 1), None, lateness, tag)


def events(path: str, *items: tuple) -> Batch:
    ts = np.array([t for _, _, t in items], dtype=np.int64)
    if path == "vec":
        return Batch(rb=records_to_arrow(list(items)), timestamps=ts)
    return Batch(list(items), None, ts)


def run(path: str, sp: WindowSpec, script: list, mode: str | None = None, **kw: Any) -> tuple[Any, list]:
    op, out = open_operator(sp, **kw)
    for step in script:
        if step == "end":
            op.end_input()
        elif isinstance(step, int):
            op.process_watermark(wm(step))
        else:
            op.process_batch(events(path, *step))
    assert op.mode == (mode or path)
    return op, out.log


@pytest.mark.parametrize("path", PATHS)
def test_sessions_grow_break_at_the_gap_and_fire_by_end_then_timer_order(path: str) -> None:
    script = [
        [("a", 1, 1_000), ("b", 2, 1_000), ("a", 3, 2_000), ("c", 4, 2_500), ("a", 5, 9_000)],
        [("b", 10, 4_000), ("a", 7, 9_500), ("c", 1, 2_500)],  # b: touches [1000, 4000); c: inside
        5_499,
        5_500,
        [("c", 2, 9_000)],
        "end",
    ]
    _, log = run(path, spec(), script)
    _, expected = run("rec", spec(), script)
    assert log == expected
    flat = [(r, t) for e in log if e[0] == "rows" for r, t in zip(e[1], e[2])]
    assert flat == [
        (("a", 4, 1_000), 4_999),
        (("c", 5, 2_500), 5_499),
        (("b", 12, 1_000), 6_999),
        (("c", 2, 9_000), 11_999),
        (("a", 12, 9_000), 12_499),
    ]


@pytest.mark.parametrize("path", PATHS)
def test_equal_ends_fire_in_the_order_their_extent_last_changed(path: str) -> None:
    script = [
        [("a", 1, 1_000), ("b", 1, 1_000), ("c", 1, 2_000)],
        [("b", 1, 2_000), ("a", 1, 2_000)],  # b's session [1000, 5000) now ends with a's and c's
        "end",
    ]
    _, log = run(path, spec(), script)
    assert [r[0] for e in log if e[0] == "rows" for r in e[1]] == ["c", "b", "a"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("agg", ["sum", "min", "max"])
def test_float_values_equal_the_per_record_fold(path: str, agg: str) -> None:
    script = [
        [("a", 0.1, 1_000), ("b", 2.5, 6_000), ("a", 0.2, 2_000)],
        [("a", 0.7, 3_000), ("b", -1.0, 7_000), ("a", 0.3, 20_000)],
        "end",
    ]
    _, log = run(path, spec(agg), script)
    _, expected = run("rec", spec(agg), script)
    assert log == expected


@pytest.mark.parametrize("path", PATHS)
def test_allowed_lateness_fires_again_and_late_data_goes_to_the_side_output(path: str) -> None:
    script = [
        [("a", 1, 1_000), ("b", 2, 1_000)],
        6_000,  # fires both sessions [1000, 4000); kept until 3999 + 5000
        [("c", 5, 1_500), ("a", 2, 4_000)],  # c: a late session within the lateness fires at once;
        # a: touches [1000, 4000) and moves its end past the watermark: fires again later
        8_999,  # cleanup of b and c
        [("b", 7, 500), ("d", 1, 9_000)],  # b: late (its session is gone)
        "end",
    ]
    op, log = run(path, spec(lateness=5_000, tag="late"), script)
    assert log == [
        ("rows", [("a", 1, 1_000), ("b", 2, 1_000)], [3_999, 3_999]),
        ("wm", wm(6_000)),
        ("rows", [("c", 5, 1_500)], [4_499]),
        ("rows", [("a", 3, 1_000)], [6_999]),
        ("wm", wm(8_999)),
        ("rows", [SideOutputRecord("late", ("b", 7, 500))], [500]),
        ("rows", [("d", 1, 9_000)], [11_999]),
    ]
    assert op.num_late_records_dropped == 0
    op, _ = run(path, spec(), [50_000, [("a", 1, 1_000), ("a", 2, 60_000)], "end"])
    assert op.num_late_records_dropped == 1


def test_a_batch_out_of_order_within_a_key_moves_the_state_to_the_per_record_path() -> None:
    script = [[("a", 1, 5_000), ("b", 2, 1_000)], [("a", 3, 1_000), ("a", 4, 3_500)], "end"]
    _, log = run("vec", spec(), script, mode="rec")
    _, expected = run("rec", spec(), script)
    assert log == expected and [r for e in log for r in e[1]] == [
        ("b", 2, 1_000),
        ("a", 8, 1_000),
    ]  # the earlier session's row


def _random_script(rng: random.Random, in_order: bool, lateness: int) -> list:
    script: list = []
    clock = {k: 0 for k in range(6)}
    watermark = 0
    for _ in range(rng.randint(3, 8)):
        batch = []
        for _ in range(rng.randint(1, 30)):
            k = rng.randrange(6)
            step = rng.choice([0, 200, 500, 1_000, 2_900, 3_000, 3_001, 7_000])
            clock[k] += step
            t = clock[k] if in_order else max(0, clock[k] - rng.choice([0, 0, 4_000]))
            batch.append((k, rng.randint(-5, 9), t))
        script.append(batch)
        if rng.random() < 0.6:
            watermark = max(watermark, min(clock.values()) + rng.choice([-3_000, 0, 2_000, 6_000]))
            script.append(watermark)
    script.append("end")
    return script


@pytest.mark.parametrize("in_order", [True, False])
def test_random_streams_give_the_per_record_paths_output(in_order: bool) -> None:
    rng = random.Random(20)
    vec_runs = 0
    for _ in range(60):
        lateness = rng.choice([0, 0, 2_000])
        agg = rng.choice(["sum", "min", "max"])
        script = _random_script(rng, in_order, lateness)
        sp = spec(agg, lateness, rng.choice([None, "late"]))
        op_v, log_v = _run_any("vec", sp, script)
        _, log_r = run("rec", sp, script)
        assert log_v == log_r, script
        vec_runs += op_v.mode == "vec"
    assert vec_runs > 20 if in_order else True


def _run_any(path: str, sp: WindowSpec, script: list) -> tuple[Any, list]:
    op, out = open_operator(sp)
    for step in script:
        if step == "end":
            op.end_input()
        elif isinstance(step, int):
            op.process_watermark(wm(step))
        else:
            op.process_batch(events(path, *step))
    return op, out.log


def _snapshot_and_restore(first: str, second: str, sp: WindowSpec, parallelism: int = 1) -> list:
    before = [[("a", 1, 1_000), ("b", 2, 1_500), ("c", 4, 12_000)], [("a", 3, 3_000)], 2_000]
    after = [[("b", 4, 4_000), ("a", 5, 20_000), ("c", 1, 13_000)], "end"]
    op, _ = run(first, sp, before, state=TaskStateManager(), name="window")
    snapshot = snapshot_operators([("window", op)], 1, 0).result()
    assert op.backend.num_entries() == 0 or first == "rec"  # the vectorized path wrote and removed them
    rows = []
    for i in range(parallelism):
        groups = key_group_range(128, parallelism, i)
        keys = {k for k in "abc" if key_group_of(k, 128) in groups}
        mine = [[e for e in s if e[0] in keys] if isinstance(s, list) else s for s in after]
        mine = [s for s in mine if s != []]
        if not any(isinstance(s, list) for s in mine):
            mine.insert(0, [])
        op, out = open_operator(
            sp, state=TaskStateManager(restored=snapshot), name="window", subtask=i, parallelism=parallelism
        )
        for step in mine:
            if step == "end":
                op.end_input()
            elif step:
                op.process_batch(events(second, *step))
                assert op.mode == second
        rows += [(r, t) for e in out.log if e[0] == "rows" for r, t in zip(e[1], e[2])]
    return rows


@pytest.mark.parametrize("first", PATHS)
@pytest.mark.parametrize("second", PATHS)
def test_checkpoints_restore_on_either_path_and_rescale(first: str, second: str) -> None:
    expected = [
        (("a", 4, 1_000), 5_999),
        (("b", 6, 1_500), 6_999),
        (("c", 5, 12_000), 15_999),
        (("a", 5, 20_000), 22_999),
    ]
    assert _snapshot_and_restore(first, second, spec()) == expected
    assert sorted(_snapshot_and_restore(first, second, spec(), parallelism=2)) == sorted(expected)


def test_the_vectorized_path_emits_one_arrow_batch_per_watermark() -> None:
    op, out = open_operator(spec())
    emitted: list[Batch] = []
    out.emit = emitted.append  # type: ignore[method-assign]
    op.process_batch(events("vec", *[(k % 3, k, k * 1_000) for k in range(30)]))
    op.end_input()
    assert op.mode == "vec" and len(emitted) == 1 and emitted[0].has_arrow and not emitted[0].has_rows
    assert emitted[0].rows() == [
        (0, sum(range(0, 30, 3)), 0),
        (1, sum(range(1, 30, 3)), 1_000),
        (2, sum(range(2, 30, 3)), 2_000),
    ]


@pytest.mark.parametrize("first", PATHS)
def test_a_restored_operator_whose_first_batch_the_vectorized_path_cannot_take(first: str) -> None:
    before = [[("a", 1, 1_000), ("b", 2, 1_500)], [("a", 3, 3_000)]]
    op, _ = run(first, spec(), before, state=TaskStateManager(), name="window")
    snapshot = snapshot_operators([("window", op)], 1, 0).result()
    logs = []
    for path in PATHS:
        op, out = open_operator(spec(), state=TaskStateManager(restored=snapshot), name="window")
        op.process_batch(events(path, ("a", 4, 8_000), ("a", 5, 5_500)))  # out of order: per record
        assert op.mode == "rec" and op.columnar is None
        op.end_input()
        logs.append(out.log)
    assert logs[0] == logs[1] and [r for e in logs[0] for r in e[1]] == [("b", 2, 1_500), ("a", 13, 1_000)]
