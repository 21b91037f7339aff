"""PyFlink's FileSource / FileSink builders, NumberSequenceSource and from_source with a
watermark strategy, mapped onto yarnflink's specs; the text formats read and write lines."""

import numpy as np
import pytest

from pyflink.common import Encoder, Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import (
    FileSink,
    FileSource,
    NumberSequenceSource,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
)
from pyflink.datastream.formats.parquet import ParquetBulkWriters
from tests.unit.operators.helpers import ListOutput, make_ctx
from yarnflink.common.records import Batch
from yarnflink.operators.factory import create_operator
from yarnflink.operators.specs import FileSinkSpec, FileSourceSpec, MapSpec, SequenceSourceSpec
from yarnflink.operators.watermarks import TimestampsAndWatermarksSpec


@pytest.fixture
def env():
    return StreamExecutionEnvironment()


def specs(env):
    return [n.spec for n in env.get_stream_graph().nodes.values()]


def test_the_text_source_builder_reads_lines_as_strings(env, tmp_path):
    src = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path)).process_static_file_set()
    ds = env.from_source(src.build(), WatermarkStrategy.for_monotonous_timestamps(), "file_source")
    ds.print()
    source_spec = specs(env)[0]
    assert source_spec == FileSourceSpec(path=str(tmp_path), format="text")
    assert ds.get_type() == Types.STRING()
    assert env.get_stream_graph().nodes[1].name == "Source: file_source"


def test_the_text_source_operator_emits_one_string_per_line(tmp_path):
    (tmp_path / "a.txt").write_text("to be\nor not\n")
    (tmp_path / "b.txt").write_text("that is\n")
    op = create_operator(FileSourceSpec(path=str(tmp_path), format="text"))
    out = ListOutput()
    op.output = out
    op.open(make_ctx())
    rows = [r for b in op.batches() for r in b.rows()]
    assert rows == ["to be", "or not", "that is"]


def test_the_row_format_sink_builder_names_parts_and_writes_typed_records_as_java_strings(env, tmp_path):
    sink = (
        FileSink.for_row_format(base_path=str(tmp_path), encoder=Encoder.simple_string_encoder())
        .with_output_file_config(OutputFileConfig.builder().with_part_prefix("prefix").with_part_suffix(".ext").build())
        .with_rolling_policy(RollingPolicy.default_rolling_policy())
        .build()
    )
    env.from_collection([("a", 1)], type_info=Types.TUPLE([Types.STRING(), Types.INT()])).sink_to(sink)
    source, to_string, sink_spec = specs(env)
    assert sink_spec == FileSinkSpec(path=str(tmp_path), format="text", part_prefix="prefix", part_suffix=".ext")
    assert isinstance(to_string, MapSpec) and to_string.fn(("a", 1)) == "(a,1)"
    op = create_operator(sink_spec)
    op.open(make_ctx(subtask=1, parallelism=2))
    op.process_batch(Batch.from_rows(["(a,1)", "(b,2)"]))
    op.end_input()
    op.close()
    assert (tmp_path / "prefix-1-0.ext").read_text() == "(a,1)\n(b,2)\n"


def test_the_bulk_parquet_sink_writes_named_rows_as_columns(env, tmp_path):
    row_t = Types.ROW_NAMED(["id", "name"], [Types.INT(), Types.STRING()])
    ds = env.from_collection([(1, "a")], type_info=row_t)
    ds.sink_to(FileSink.for_bulk_format(str(tmp_path), ParquetBulkWriters.for_row_type(row_t)).build())
    _, as_dict, sink_spec = specs(env)
    assert sink_spec.format == "parquet" and sink_spec.part_suffix == ".parquet"
    assert as_dict.fn(row_t.from_python((1, "a"))) == {"id": 1, "name": "a"}


def test_number_sequence_source_and_any_source_object(env):
    env.from_source(NumberSequenceSource(1, 5), WatermarkStrategy.no_watermarks(), "numbers").print()

    class MySource:
        def to_spec(self):
            return SequenceSourceSpec(start=0, end=2)

    env.from_source(MySource(), source_name="mine").print()
    got = [s for s in specs(env) if isinstance(s, SequenceSourceSpec)]
    assert got == [SequenceSourceSpec(start=1, end=5), SequenceSourceSpec(start=0, end=2)]

    class NotASource:
        def to_spec(self):
            return MapSpec(fn=str)

    with pytest.raises(TypeError, match="must return a source spec"):
        env.from_source(NotASource())
    with pytest.raises(ValueError, match="start \\(3\\) must not be larger"):
        NumberSequenceSource(3, 1)


def test_from_source_honours_the_watermark_strategys_timestamp_assigner(env, tmp_path):
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, ts: len(v))
    ds = env.from_source(
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path)).build(), strategy, "src"
    )
    ds.print()
    source, wm, _ = specs(env)
    assert isinstance(wm, TimestampsAndWatermarksSpec) and wm.strategy is strategy
    op = create_operator(wm)
    out = ListOutput()
    op.output = out
    op.open(make_ctx())
    op.process_batch(Batch.from_rows(["ab", "abcd"]))
    assert np.asarray(out.batches[0].timestamps).tolist() == [2, 4]


def test_union_feeds_one_pass_through_operator_from_every_stream(env):
    a = env.from_collection([1], type_info=Types.INT())
    b = env.from_collection([2], type_info=Types.INT()).map(lambda x: x, output_type=Types.INT())
    u = a.union(b)
    u.print()
    graph = env.get_stream_graph()
    union_id = next(i for i, n in graph.nodes.items() if n.name == "Union")
    assert sorted(e.source_id for e in graph.edges if e.target_id == union_id) == [1, 3]  # the source, the map
    assert u.get_type() == Types.INT()
    with pytest.raises(TypeError, match="union\\(\\) needs DataStreams"):
        a.union([1])
    with pytest.raises(ValueError, match="same StreamExecutionEnvironment"):
        a.union(StreamExecutionEnvironment().from_collection([3]))
