"""What yarnflink cannot do is refused at the call, naming the call and what to use instead."""

import pytest

from pyflink.common import SimpleStringSchema
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import FileSink, FileSource, FlinkKafkaConsumer, JdbcSink, KafkaSource
from pyflink.datastream.connectors.elasticsearch import Elasticsearch7SinkBuilder
from pyflink.datastream.connectors.file_system import BucketAssigner
from pyflink.datastream.connectors.pulsar import PulsarSource
from pyflink.table import StreamTableEnvironment, TableEnvironment
from yarnflink.api.common import UnsupportedFeatureError


@pytest.fixture
def env():
    return StreamExecutionEnvironment()


@pytest.mark.parametrize(
    ("call", "names", "instead"),
    [
        (lambda env: KafkaSource.builder(), "KafkaSource.builder()", "FileSource"),
        (lambda env: FlinkKafkaConsumer("t", None, {}), "FlinkKafkaConsumer()", "spark"),
        (lambda env: PulsarSource.builder(), "PulsarSource.builder()", "FileSink"),
        (lambda env: Elasticsearch7SinkBuilder(), "Elasticsearch7SinkBuilder()", "FileSink"),
        (lambda env: JdbcSink.sink("insert", None), "JdbcSink.sink()", "spark"),
        (lambda env: SimpleStringSchema(), "SimpleStringSchema()", "FileSource"),
        (lambda env: StreamTableEnvironment.create(env), "StreamTableEnvironment.create()", "spark_sql"),
        (lambda env: TableEnvironment.create(None), "TableEnvironment.create()", "spark_sql"),
        (lambda env: env.add_jars("file:///x.jar"), "add_jars()", "spark.jars"),
        (lambda env: env.add_classpaths("file:///x.jar"), "add_classpaths()", "Spark step"),
        (lambda env: env.add_source(object()), "add_source()", "from_source"),
        (lambda env: env.create_input(object()), "create_input()", "from_source"),
        (lambda env: env.from_collection([1]).add_sink(object()), "add_sink()", "sink_to"),
        (lambda env: env.from_collection([1]).partition_custom(None, None), "partition_custom()", "key_by"),
    ],
)
def test_each_refusal_names_the_call_and_the_alternative(env, call, names, instead):
    with pytest.raises(UnsupportedFeatureError) as e:
        call(env)
    assert names in str(e.value) and "not supported by yarnflink" in str(e.value)
    assert instead.lower() in str(e.value).lower()
    assert isinstance(e.value, NotImplementedError)


def test_file_connector_features_yarnflink_lacks_are_refused_at_the_builder(tmp_path):
    from pyflink.common import Encoder
    from pyflink.datastream.connectors import StreamFormat

    builder = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path))
    with pytest.raises(NotImplementedError, match="bounded.*process_static_file_set"):
        builder.monitor_continuously(1000)
    with pytest.raises(ValueError, match="one path"):
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), "/a", "/b")
    sink = FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder())
    with pytest.raises(NotImplementedError, match="base_path_bucket_assigner"):
        sink.with_bucket_assigner(BucketAssigner.date_time_bucket_assigner())
    with pytest.raises(NotImplementedError, match="compaction"):
        sink.enable_compact(None, None)


def test_refusals_happen_at_the_call_not_at_execute(env):
    ds = env.from_collection([1, 2])
    with pytest.raises(UnsupportedFeatureError):
        ds.add_sink(object())
    # the program can go on: nothing half-built is left behind
    ds.print()
    assert [n.name for n in env.get_stream_graph().nodes.values()] == ["Source: Collection", "Sink: Print to Std. Out"]


def test_checkpoint_config_and_state_backends_write_the_configuration(env):
    from pyflink.datastream import (
        CheckpointingMode,
        EmbeddedRocksDBStateBackend,
        FileSystemCheckpointStorage,
        HashMapStateBackend,
    )

    env.enable_checkpointing(1000, CheckpointingMode.AT_LEAST_ONCE)
    assert env.get_checkpoint_interval() == 1000
    cc = env.get_checkpoint_config()
    cc.set_min_pause_between_checkpoints(500)
    cc.set_checkpoint_storage(FileSystemCheckpointStorage("file:///tmp/chk"))
    env.set_state_backend(HashMapStateBackend())
    conf = env.get_config().to_dict()
    assert conf["execution.checkpointing.mode"] == "AT_LEAST_ONCE"
    assert conf["execution.checkpointing.min-pause"] == "500 ms"
    assert conf["execution.checkpointing.dir"] == "file:///tmp/chk"
    assert conf["state.backend.type"] == "hashmap"
    env.set_state_backend(EmbeddedRocksDBStateBackend())
    assert env.get_config().to_dict()["state.backend.type"] == "rocksdb"
    with pytest.raises(UnsupportedFeatureError, match="enable_incremental_checkpointing=True"):
        EmbeddedRocksDBStateBackend(True)
