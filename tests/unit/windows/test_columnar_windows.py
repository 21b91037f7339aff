"""``window(...).sum/min/max``: the vectorized path (Arrow batches) and the per-record path (Python
rows) give the same outputs, timestamps and order, with lateness, late data, checkpoints and
rescaling; each scenario runs on both paths."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from yarnflink.common.keygroups import key_group_range
from yarnflink.common.records import Batch, records_to_arrow
from yarnflink.operators import specs as S
from yarnflink.operators.window_columns import FieldAggregator
from yarnflink.operators.windows import (
    FIRE_ROWS,
    SideOutputRecord,
    SlidingEventTimeWindows,
    Time,
    TumblingEventTimeWindows,
    WindowSpec,
)
from yarnflink.state import TaskStateManager
from yarnflink.state.task_state import snapshot_operators

from .helpers import open_operator, wm

PATHS = ["vec", "rec"]
TUMBLING = TumblingEventTimeWindows.of(Time.seconds(10))
SLIDING = SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(4))


def spec(assigner: Any, agg: str = "sum", lateness: int = 0, tag: str | None = None) -> WindowSpec:
    return WindowSpec(assigner, S.KeySelectorSpec(field=0), "reduce", FieldAggregator(agg, 1), None, lateness, tag)


def events(path: str, *items: tuple) -> Batch:
    """Records ``(key, value, timestamp)``, timestamps attached; Arrow-only on the ``vec`` path."""
    ts = np.array([t for _, _, t in items], dtype=np.int64)
    if path == "vec":
        return Batch(rb=records_to_arrow(list(items)), timestamps=ts)
    return Batch(list(items), None, ts)


def run(path: str, sp: WindowSpec, script: list, **kw: Any) -> tuple[Any, list]:
    op, out = open_operator(sp, **kw)
    for step in script:
        if step == "end":
            op.end_input()
        elif isinstance(step, int):
            op.process_watermark(wm(step))
        else:
            op.process_batch(events(path, *step))
    assert op.mode == path
    return op, out.log


@pytest.mark.parametrize("path", PATHS)
def test_tumbling_sum_fires_per_watermark_in_the_per_record_order(path: str) -> None:
    script = [
        [("b", 1, 1_000), ("a", 2, 2_000), ("a", 3, 9_999), ("c", 4, 10_000), ("b", 5, 25_000)],
        [("a", 10, 3_000), ("c", 1, 11_000)],
        9_998,
        9_999,
        [("c", 2, 12_000)],
        "end",
    ]
    _, log = run(path, spec(TUMBLING), script)
    assert log == [
        ("wm", wm(9_998)),
        ("rows", [("b", 1, 1_000), ("a", 15, 2_000)], [9_999, 9_999]),
        ("wm", wm(9_999)),
        ("rows", [("c", 7, 10_000), ("b", 5, 25_000)], [19_999, 29_999]),
    ]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("agg", ["sum", "min", "max"])
def test_sliding_windows_and_float_values(path: str, agg: str) -> None:
    script = [
        [("a", 0.1, 1_000), ("b", 2.5, 6_000), ("a", 0.2, 7_000)],
        [("a", 0.7, 12_000), ("b", -1.0, 3_000)],
        "end",
    ]
    _, log = run(path, spec(SLIDING, agg), script)
    _, expected = run("rec", spec(SLIDING, agg), script)
    assert log == expected
    if agg == "sum":
        assert ("a", 0.1 + 0.2, 1_000) in [r for e in log for r in e[1]]  # the same float, summed in the same order


@pytest.mark.parametrize("path", PATHS)
def test_allowed_lateness_fires_again_and_late_data_goes_to_the_side_output(path: str) -> None:
    script = [
        [("a", 1, 1_000)],
        12_000,  # fires [0, 10000); kept until 14999
        [("a", 2, 3_000), ("b", 7, 5_000), ("a", 4, 20_000)],  # late but within the allowed lateness
        14_999,  # cleanup
        [("a", 5, 4_000), ("b", 6, 21_000)],
        "end",
    ]
    op, log = run(path, spec(TUMBLING, lateness=5_000, tag="late"), script)
    assert log == [
        ("rows", [("a", 1, 1_000)], [9_999]),
        ("wm", wm(12_000)),
        ("rows", [("a", 3, 1_000), ("b", 7, 5_000)], [9_999, 9_999]),
        ("wm", wm(14_999)),
        ("rows", [SideOutputRecord("late", ("a", 5, 4_000))], [4_000]),
        ("rows", [("a", 4, 20_000), ("b", 6, 21_000)], [29_999, 29_999]),
    ]
    assert op.num_late_records_dropped == 0
    op, _ = run(path, spec(TUMBLING), [50_000, [("a", 1, 1_000), ("a", 2, 60_000)], "end"])
    assert op.num_late_records_dropped == 1


def _snapshot_and_restore(first: str, second: str, sp: WindowSpec, parallelism: int = 1) -> list:
    before = [[("a", 1, 1_000), ("b", 2, 1_500), ("c", 4, 12_000)], [("a", 3, 3_000)], 2_000]
    after = [[("b", 4, 9_000), ("a", 5, 20_000)], "end"]
    op, _ = run(first, sp, before, state=TaskStateManager(), name="window")
    snapshot = snapshot_operators([("window", op)], 1, 0).result()
    assert op.backend.num_entries() == 0 or first == "rec"  # the vectorized path wrote and removed them
    rows = []
    for i in range(parallelism):
        groups = key_group_range(128, parallelism, i)
        mine = [[e for e in step if e[0] in _keys_in(groups)] if isinstance(step, list) else step for step in after]
        mine = [s for s in mine if s != []]
        if not any(isinstance(s, list) for s in mine):
            mine.insert(0, [])  # a batch decides the path
        op, out = open_operator(
            sp, state=TaskStateManager(restored=snapshot), name="window", subtask=i, parallelism=parallelism
        )
        for step in mine:
            if step == "end":
                op.end_input()
            elif isinstance(step, int):
                op.process_watermark(wm(step))
            elif step:
                op.process_batch(events(second, *step))
                assert op.mode == second
        rows += [(r, t) for e in out.log if e[0] == "rows" for r, t in zip(e[1], e[2])]
    return sorted(rows)


def _keys_in(groups: range) -> set:
    from yarnflink.common.keygroups import key_group_of

    return {k for k in "abc" if key_group_of(k, 128) in groups}


@pytest.mark.parametrize("first", PATHS)
@pytest.mark.parametrize("second", PATHS)
def test_checkpoints_restore_on_either_path_and_rescale(first: str, second: str) -> None:
    expected = [
        (("a", 4, 1_000), 9_999),
        (("a", 5, 20_000), 29_999),
        (("b", 6, 1_500), 9_999),
        (("c", 4, 12_000), 19_999),
    ]
    assert _snapshot_and_restore(first, second, spec(TUMBLING)) == expected
    assert _snapshot_and_restore(first, second, spec(TUMBLING), parallelism=2) == expected


def test_a_batch_the_vectorized_path_cannot_take_moves_the_state_to_the_per_record_path() -> None:
    op, out = open_operator(spec(TUMBLING))
    op.process_batch(events("vec", ("a", 1, 1_000), ("b", 2, 2_000)))
    assert op.mode == "vec"
    op.process_batch(events("vec", ("a", 3, 3_000), (7, 1, 3_000)))  # mixed key types: pickled
    assert op.mode == "rec" and op.columnar is None
    op.end_input()
    assert out.rows == [("a", 4, 1_000), ("b", 2, 2_000), (7, 1, 3_000)]


def test_the_vectorized_path_emits_arrow_batches() -> None:
    op, out = open_operator(spec(TUMBLING))
    emitted: list[Batch] = []
    out.emit = emitted.append  # type: ignore[method-assign]
    op.process_batch(events("vec", *[(k % 3, k, k * 1_000) for k in range(30)]))
    op.end_input()
    assert all(b.has_arrow and not b.has_rows for b in emitted) and len(emitted) == 1
    assert emitted[0].rows()[:3] == [(0, 0 + 3 + 6 + 9, 0), (1, 1 + 4 + 7, 1_000), (2, 2 + 5 + 8, 2_000)]


def test_a_watermark_closing_many_windows_frees_each_window_before_making_the_next_ones_rows() -> None:
    # a watermark far behind the data (one source ahead of the other) holds many windows; when it
    # jumps, the windows go out in batches of at most FIRE_ROWS rows, and a window's state is gone
    # before the batches after its own are made: never all the state and all the output at once
    op, out = open_operator(spec(TUMBLING))
    keys = 40_000  # two windows are more than FIRE_ROWS rows
    windows = 5
    k = np.arange(keys, dtype=np.int64)
    for w in range(windows):
        rb = records_to_arrow([(0, 0, 0)])  # schema only
        rb = type(rb).from_arrays([k, k % 7, np.full(keys, w * 10_000)], schema=rb.schema)
        op.process_batch(Batch(rb=rb, timestamps=np.full(keys, w * 10_000, dtype=np.int64)))
    assert op.mode == "vec" and len(op.columnar.buckets) == windows
    emitted: list[tuple[int, int]] = []  # (rows, windows still held) at each emit
    out.emit = lambda b: emitted.append((len(b), len(op.columnar.buckets)))  # type: ignore[method-assign]
    op.process_watermark(wm(windows * 10_000))
    assert sum(n for n, _ in emitted) == keys * windows
    assert all(n <= FIRE_ROWS for n, _ in emitted) and len(emitted) == windows
    # a window's batch goes out once the next window's rows are made (and its state dropped)
    assert [held for _, held in emitted] == [3, 2, 1, 0, 0]


def test_the_per_record_path_sends_the_windows_of_one_watermark_as_they_are_made() -> None:
    op, out = open_operator(spec(TUMBLING))
    keys, windows = 40_000, 5
    for w in range(windows):
        op.process_batch(events("rec", *[(k, k % 7, w * 10_000) for k in range(keys)]))
    assert op.mode == "rec" and len(op.buffers.buckets) == windows
    emitted: list[tuple[int, int]] = []  # (rows, windows still held) at each emit
    out.emit = lambda b: emitted.append((len(b), len(op.buffers.buckets)))  # type: ignore[method-assign]
    op.process_watermark(wm(windows * 10_000))
    assert sum(n for n, _ in emitted) == keys * windows
    assert len(emitted) > 1 and all(n < FIRE_ROWS + keys for n, _ in emitted) and emitted[0][1] > 0
