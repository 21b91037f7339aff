"""The event-time and window API (PyFlink's names) and the JobGraph it builds."""

from __future__ import annotations

import pytest

from yarnflink import (
    Duration,
    EventTimeSessionWindows,
    OutputTag,
    ProcessWindowFunction,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WatermarkStrategy,
)
from yarnflink.operators.windows import SideOutputSelectSpec, WindowSpec


def windowed(env: StreamExecutionEnvironment):  # type: ignore[no-untyped-def]
    strategy = (
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(2))
        .with_timestamp_assigner(lambda e, _: e[1])
        .with_idleness(Duration.of_minutes(1))
    )
    return (
        env.from_collection([("a", 1, 1)])
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(5)))
    )


def vertices(env: StreamExecutionEnvironment) -> list:
    jg = env.get_job_graph("t")
    return [(v.parallelism, [o.name for o in v.operators]) for v in jg.vertices]


def test_window_with_late_data_side_output_builds_chained_selectors() -> None:
    env = StreamExecutionEnvironment()
    env.set_parallelism(2)
    late = OutputTag("late")
    result = (
        windowed(env)
        .allowed_lateness(Time.seconds(1))
        .side_output_late_data(late)
        .reduce(lambda a, b: a)
        .set_parallelism(3)
        .name("five-second sums")
        .uid("sums")
    )
    result.map(lambda x: x).print()
    result.get_side_output(late).print()
    vs = vertices(env)
    assert vs[0] == (2, ["Source: Collection", "Timestamps/Watermarks"])
    assert vs[1][0] == 3 and vs[1][1][:2] == ["five-second sums", "Main Output"]
    assert "Side Output 'late'" in vs[1][1]  # chained behind the window operator
    spec = next(t.spec for t in env._transformations if isinstance(t.spec, WindowSpec))
    assert (spec.allowed_lateness_ms, spec.late_data_tag, spec.function_kind) == (1000, "late", "reduce")
    assert [t.uid for t in env._transformations if isinstance(t.spec, (WindowSpec, SideOutputSelectSpec))][:2] == [
        "sums",
        "sums-main-output",
    ]


def test_window_without_side_output_has_no_selector() -> None:
    env = StreamExecutionEnvironment()

    class F(ProcessWindowFunction):
        def process(self, key, context, elements):  # type: ignore[no-untyped-def]
            return []

    windowed(env).process(F()).print()
    assert not any(isinstance(t.spec, SideOutputSelectSpec) for t in env._transformations)


def test_api_errors_name_the_problem() -> None:
    env = StreamExecutionEnvironment()
    ks = env.from_collection([1]).key_by(lambda x: x)
    with pytest.raises(TypeError, match="window assigner"):
        ks.window("5 s")
    with pytest.raises(TypeError, match="WatermarkStrategy"):
        env.from_collection([1]).assign_timestamps_and_watermarks(lambda x: x)
    with pytest.raises(TypeError, match="AggregateFunction"):
        ks.window(TumblingEventTimeWindows.of(Time.seconds(1))).aggregate(lambda a, b: a)
    with pytest.raises(TypeError, match="merge"):

        class NoMerge:
            def create_accumulator(self):
                return 0  # noqa: E704

            def add(self, v, a):
                return a  # noqa: E704

            def get_result(self, a):
                return a  # noqa: E704

        ks.window(EventTimeSessionWindows.with_gap(Time.seconds(1))).aggregate(NoMerge())
    with pytest.raises(ValueError, match="only applies to event-time windows"):
        ks.window(TumblingProcessingTimeWindows.of(Time.seconds(1))).allowed_lateness(Time.seconds(1))
    with pytest.raises(TypeError, match="OutputTag"):
        ks.window(TumblingEventTimeWindows.of(Time.seconds(1))).side_output_late_data("late")
    with pytest.raises(NotImplementedError, match="custom window triggers"):
        ks.window(TumblingEventTimeWindows.of(Time.seconds(1))).trigger(object())
