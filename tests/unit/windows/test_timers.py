"""KeyedProcessFunction with keyed state and event-/processing-time timers, checkpointed together."""

from __future__ import annotations

import pytest

from yarnflink.operators import specs as S
from yarnflink.operators.functions import KeyedProcessFunction, ProcessFunction
from yarnflink.operators.timers import KeyedProcessOperator, TimeDomain
from yarnflink.state import ListStateDescriptor, StateTtlConfig, TaskStateManager, ValueStateDescriptor
from yarnflink.state.task_state import snapshot_operators

from .helpers import Clock, batch, events, open_operator, wm


class CountWithTimeout(KeyedProcessFunction):
    """Flink's documentation example: count per key, emit (key, count) when a key saw no record
    for 1 s of event time."""

    def open(self, runtime_context):  # type: ignore[no-untyped-def]
        self.state = runtime_context.get_state(ValueStateDescriptor("state"))

    def process_element(self, value, ctx):  # type: ignore[no-untyped-def]
        count, _ = self.state.value() or (0, 0)
        self.state.update((count + 1, ctx.timestamp()))
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 1_000)
        return []

    def on_timer(self, timestamp, ctx):  # type: ignore[no-untyped-def]
        count, last = self.state.value()
        if timestamp == last + 1_000:
            yield (ctx.get_current_key(), count, ctx.time_domain(), ctx.timer_service().current_watermark())


def keyed(fn) -> S.ProcessSpec:  # type: ignore[no-untyped-def]
    return S.ProcessSpec(fn=fn, key_selector=S.KeySelectorSpec(field=0))


def test_event_time_timers_fire_in_order_when_the_watermark_passes() -> None:
    op, out = open_operator(keyed(CountWithTimeout()))
    assert isinstance(op, KeyedProcessOperator)
    op.process_batch(events(("a", 0, 1_000), ("b", 0, 1_200), ("a", 0, 1_500)))
    op.process_watermark(wm(2_200))  # a's first timer (2000) fires but is stale; b's (2200) emits
    assert out.timestamped == [(("b", 1, TimeDomain.EVENT_TIME, 2_200), 2_200)]
    out.clear()
    op.end_input()  # the final watermark fires a's last timer
    assert out.rows == [("a", 2, TimeDomain.EVENT_TIME, 2**63 - 1)]


def test_processing_time_timers_and_state_ttl() -> None:
    class Remind(KeyedProcessFunction):
        def open(self, runtime_context):  # type: ignore[no-untyped-def]
            d = ListStateDescriptor("seen")
            d.enable_time_to_live(StateTtlConfig.new_builder(500).build())
            self.seen = runtime_context.get_list_state(d)

        def process_element(self, value, ctx):  # type: ignore[no-untyped-def]
            self.seen.add(value[1])
            ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 300)
            return [(value[0], "in", ctx.timestamp())]

        def on_timer(self, timestamp, ctx):  # type: ignore[no-untyped-def]
            return [(ctx.get_current_key(), timestamp, ctx.time_domain(), self.seen.get())]

    clock = Clock(10_000)
    op, out = open_operator(keyed(Remind()), clock)
    op.process_batch(batch([("a", 1)]))
    clock.t = 10_200
    op.process_batch(batch([("a", 2)]))
    assert op.next_processing_time() == 10_300
    op.on_processing_time(10_300)
    clock.t = 10_600  # element 1 is 600 ms old: expired
    op.on_processing_time(10_600)
    assert out.timestamped == [
        (("a", "in", None), None),
        (("a", "in", None), None),
        (("a", 10_300, TimeDomain.PROCESSING_TIME, [1, 2]), None),
        (("a", 10_500, TimeDomain.PROCESSING_TIME, [2]), None),
    ]


def test_timers_and_state_are_checkpointed_and_restored() -> None:
    mgr = TaskStateManager()
    op, out = open_operator(keyed(CountWithTimeout()), state=mgr, name="counter")
    op.process_batch(events(("a", 0, 1_000), ("b", 0, 1_200), ("a", 0, 1_500)))
    snapshot = snapshot_operators([("counter", op)], 1, 0).result()
    op.close()
    restored, out2 = open_operator(keyed(CountWithTimeout()), state=TaskStateManager(restored=snapshot), name="counter")
    restored.process_batch(events(("b", 0, 1_900)))
    restored.end_input()
    assert sorted(out2.rows) == [("a", 2, TimeDomain.EVENT_TIME, 2**63 - 1), ("b", 2, TimeDomain.EVENT_TIME, 2**63 - 1)]


def test_non_keyed_process_functions_see_timestamps_but_have_no_timers_or_keyed_state() -> None:
    class Stamp(ProcessFunction):
        def process_element(self, value, ctx):  # type: ignore[no-untyped-def]
            yield (value, ctx.timestamp(), ctx.timer_service().current_watermark())

    op, out = open_operator(S.ProcessSpec(fn=Stamp()))
    op.process_watermark(wm(5))
    op.process_batch(batch(["x"], [42]))
    assert out.timestamped == [(("x", 42, 5), 42)]

    class Bad(ProcessFunction):
        def open(self, runtime_context):  # type: ignore[no-untyped-def]
            runtime_context.get_state(ValueStateDescriptor("nope"))

    with pytest.raises(RuntimeError, match="keyed state is only available"):
        open_operator(S.ProcessSpec(fn=Bad()))

    class Timer(ProcessFunction):
        def process_element(self, value, ctx):  # type: ignore[no-untyped-def]
            ctx.timer_service().register_event_time_timer(1)

    op, _ = open_operator(S.ProcessSpec(fn=Timer()))
    with pytest.raises(RuntimeError, match="timers can only be used on a keyed stream"):
        op.process_batch(batch(["x"], [1]))
