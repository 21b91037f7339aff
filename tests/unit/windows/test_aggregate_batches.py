"""``window(...).aggregate(fn)`` where ``fn`` has the batch form ``add_batch(rows, accumulator)``:
one call per (key, window) and Arrow batch, the same results, timestamps and order as ``add`` per
record; batches where a window may have fired (lateness, late data) go record by record."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from yarnflink.common.records import Batch, records_to_arrow
from yarnflink.operators import specs as S
from yarnflink.operators.windows import SlidingEventTimeWindows, Time, TumblingEventTimeWindows, WindowSpec
from yarnflink.state import AggregateFunction

from .helpers import open_operator, wm


class Total(AggregateFunction):
    """(count, sum of field 1); ``add_batch`` when ``batched``."""

    def __init__(self) -> None:
        self.adds = 0

    def create_accumulator(self) -> Any:
        return (0, 0)

    def add(self, value: Any, acc: Any) -> Any:
        self.adds += 1
        return (acc[0] + 1, acc[1] + value[1])

    def get_result(self, acc: Any) -> Any:
        return acc

    def merge(self, a: Any, b: Any) -> Any:
        return (a[0] + b[0], a[1] + b[1])


class BatchedTotal(Total):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def add_batch(self, rows: pa.RecordBatch, acc: Any) -> Any:
        self.batches.append(rows.num_rows)
        return (acc[0] + rows.num_rows, acc[1] + pc.sum(rows.column(1)).as_py())


def events(arrow: bool, *items: tuple) -> Batch:
    ts = np.array([t for _, _, t in items], dtype=np.int64)
    if arrow:
        return Batch(rb=records_to_arrow(list(items)), timestamps=ts)
    return Batch(list(items), None, ts)


def run(fn: Any, assigner: Any, script: list, arrow: bool, lateness: int = 0) -> list:
    op, out = open_operator(WindowSpec(assigner, S.KeySelectorSpec(field=0), "aggregate", fn, None, lateness, "late"))
    for step in script:
        if step == "end":
            op.end_input()
        elif isinstance(step, int):
            op.process_watermark(wm(step))
        else:
            op.process_batch(events(arrow, *step))
    return out.log


SCRIPT = [
    [("b", 1, 1_000), ("a", 2, 2_000), ("a", 3, 9_999), ("c", 4, 10_000), ("b", 5, 25_000), ("a", 1, 3_000)],
    [("a", 10, 3_000), ("c", 1, 11_000)],
    9_999,
    [("a", 7, 4_000), ("c", 2, 12_000)],  # [0, 10000) fired: record by record (lateness 5 s)
    "end",
]


@pytest.mark.parametrize(
    "assigner",
    [TumblingEventTimeWindows.of(Time.seconds(10)), SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(4))],
)
def test_add_batch_is_called_once_per_key_and_window_with_the_per_record_results(assigner: Any) -> None:
    batched = BatchedTotal()
    log = run(batched, assigner, SCRIPT, arrow=True, lateness=5_000)
    assert log == run(Total(), assigner, SCRIPT, arrow=False, lateness=5_000)
    tumbling = isinstance(assigner, TumblingEventTimeWindows) and not isinstance(assigner, SlidingEventTimeWindows)
    # only the batch after the first firing went record by record: one add per (element, window)
    assert batched.adds == (2 if tumbling else 6)
    # before: one add_batch per (key, window) of each batch, in the order of their first elements
    expected: list[int] = []
    for step in SCRIPT[:2]:
        groups: dict[tuple, int] = {}  # (window, key) -> rows, in the order of first elements
        for key, _, t in step:
            for w in assigner.assign_windows(t):
                groups[(w, key)] = groups.get((w, key), 0) + 1
        expected += list(groups.values())
    assert batched.batches == expected
    if tumbling:
        assert expected == [1, 3, 1, 1, 1, 1]


def test_python_rows_still_go_through_add() -> None:
    batched = BatchedTotal()
    run(batched, TumblingEventTimeWindows.of(Time.seconds(10)), SCRIPT[:2] + ["end"], arrow=False)
    assert batched.batches == [] and batched.adds == 8
