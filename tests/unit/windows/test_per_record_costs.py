"""The per-record path of tumbling / sliding event-time windows does no per-record work on window
objects, timers or key groups: no ``TimeWindow`` is created or hashed per record, no timer is
registered per record (the contents wait in plain dicts per window start; a watermark fires
them), and the key groups of a batch's keys are not computed (the dicts do not need them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from yarnflink.common.records import Batch
from yarnflink.operators import specs as S
from yarnflink.operators import windows as W
from yarnflink.operators.windows import SlidingEventTimeWindows, Time, TumblingEventTimeWindows, WindowSpec

from .helpers import open_operator, wm


@pytest.mark.parametrize(
    "assigner",
    [TumblingEventTimeWindows.of(Time.seconds(1)), SlidingEventTimeWindows.of(Time.seconds(2), Time.seconds(1))],
)
def test_no_window_object_timer_or_key_group_per_record(assigner: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    op, out = open_operator(
        WindowSpec(assigner, S.KeySelectorSpec(field=0), "reduce", lambda a, b: (a[0], a[1] + b[1]), None, 0, None)
    )
    calls = {"window": 0, "timer": 0, "key_groups": 0}
    real_init, real_kgs = W.TimeWindow.__init__, W.key_group_ids
    queue = op.timers.event_queue  # type: ignore[union-attr]
    real_add = queue.add

    def window_init(self: Any, *a: Any) -> None:
        calls["window"] += 1
        real_init(self, *a)

    def key_groups(*a: Any) -> Any:
        calls["key_groups"] += 1
        return real_kgs(*a)

    def timer(*a: Any) -> Any:
        calls["timer"] += 1
        return real_add(*a)

    monkeypatch.setattr(W.TimeWindow, "__init__", window_init)
    monkeypatch.setattr(W, "key_group_ids", key_groups)
    monkeypatch.setattr(queue, "add", timer)
    i = np.arange(5_000)
    rows = list(zip((i % 50).tolist(), i.tolist()))
    op.process_batch(Batch(rows, None, i))  # 5 s of data, 50 keys
    assert calls == {"window": 0, "timer": 0, "key_groups": 0}
    op.process_watermark(wm(10_000))
    assert calls["timer"] == 0 and calls["window"] <= 2 * 6 * 50  # one per (key, window) fired
    assert sum(r[1] for r in out.rows) == sum(range(5_000)) * (1 if assigner.size == 1_000 else 2)


def test_session_elements_inside_a_session_register_no_timers(monkeypatch: pytest.MonkeyPatch) -> None:
    gap = W.EventTimeSessionWindows.with_gap(Time.seconds(10))
    op, out = open_operator(WindowSpec(gap, S.KeySelectorSpec(field=0), "reduce", lambda a, b: (a[0], a[1] + b[1])))
    op.process_batch(Batch([("a", 1), ("a", 2)], None, np.array([1_000, 9_000])))  # session [1000, 19000)
    queue = op.timers.event_queue  # type: ignore[union-attr]
    calls: list[tuple] = []
    real_add = queue.add

    def add(*a: Any) -> bool:
        new = real_add(*a)
        calls.append((a[0], new))
        return new

    monkeypatch.setattr(queue, "add", add)
    op.process_batch(Batch([("a", i) for i in range(100)], None, np.arange(1_000, 9_000, 80)))  # inside it
    assert calls == []  # the session's timer exists already: not registered again per element
    op.process_batch(Batch([("a", 1)], None, np.array([9_500])))  # moves the end: the new window's timer
    assert [t for t, new in calls if new] == [19_499]
    op.end_input()
    assert out.timestamped == [(("a", 3 + sum(range(100)) + 1), 19_499)]
