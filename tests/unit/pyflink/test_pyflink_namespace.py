"""The pyflink namespace: PyFlink's module paths import, their names are yarnflink's API, function
classes are generic, and apache-flink in the same environment is never shadowed silently."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import pyflink
from yarnflink.api import environment
from yarnflink.api.pyflink_conflict import ApacheFlinkGuard, apache_flink_installed, install_guard, remove_guard

ROOT = Path(__file__).resolve().parents[3]

MODULES = {
    "pyflink.common": ["Types", "Row", "RowKind", "WatermarkStrategy", "Duration", "Time", "Encoder", "Configuration"],
    "pyflink.common.typeinfo": ["Types", "TypeInformation", "RowTypeInfo"],
    "pyflink.common.watermark_strategy": ["WatermarkStrategy", "TimestampAssigner"],
    "pyflink.datastream": [
        "StreamExecutionEnvironment",
        "DataStream",
        "KeyedStream",
        "WindowedStream",
        "RuntimeExecutionMode",
        "ProcessWindowFunction",
        "WindowFunction",
        "KeyedProcessFunction",
        "MapFunction",
        "TimeWindow",
        "CountWindow",
        "OutputTag",
        "CheckpointingMode",
    ],
    "pyflink.datastream.functions": ["ProcessFunction", "AggregateFunction", "RuntimeContext", "CoMapFunction"],
    "pyflink.datastream.state": ["ValueStateDescriptor", "ValueState", "MapStateDescriptor", "StateTtlConfig"],
    "pyflink.datastream.window": [
        "TumblingEventTimeWindows",
        "EventTimeSessionWindows",
        "SessionWindowTimeGapExtractor",
        "CountWindow",
    ],
    "pyflink.datastream.output_tag": ["OutputTag"],
    "pyflink.datastream.connectors": [
        "FileSource",
        "FileSink",
        "StreamFormat",
        "OutputFileConfig",
        "RollingPolicy",
        "NumberSequenceSource",
        "KafkaSource",
    ],
    "pyflink.datastream.connectors.file_system": ["FileSource", "FileSink", "BucketAssigner"],
    "pyflink.datastream.connectors.number_seq": ["NumberSequenceSource"],
    "pyflink.datastream.formats.parquet": ["ParquetBulkWriters", "ParquetColumnarRowInputFormat"],
    "pyflink.table": ["StreamTableEnvironment"],
}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_pyflinks_module_paths_import_with_their_names(module):
    mod = importlib.import_module(module)
    missing = [n for n in MODULES[module] if not hasattr(mod, n)]
    assert not missing
    assert sorted(set(getattr(mod, "__all__", []))) == sorted(getattr(mod, "__all__", []))


def test_the_namespace_is_a_facade_over_yarnflinks_api():
    from pyflink.datastream import StreamExecutionEnvironment
    from yarnflink.api import StreamExecutionEnvironment as Ours

    assert StreamExecutionEnvironment is Ours
    assert pyflink.__yarnflink__


def test_function_classes_are_generic_as_pyflinks():
    from pyflink.common import Types
    from pyflink.datastream import KeyedProcessFunction, ProcessWindowFunction, WindowFunction
    from pyflink.datastream.functions import AggregateFunction
    from pyflink.datastream.window import CountWindow, TimeWindow

    class Count(ProcessWindowFunction[tuple, tuple, str, TimeWindow]):
        def process(self, key, context: ProcessWindowFunction.Context[TimeWindow], elements):
            return [(key, len(list(elements)))]

    class Sum(WindowFunction[tuple, tuple, str, CountWindow]):
        pass

    assert issubclass(Count, ProcessWindowFunction) and issubclass(Sum, WindowFunction)
    assert KeyedProcessFunction[str, int, int] is KeyedProcessFunction
    assert KeyedProcessFunction.Context[int] is KeyedProcessFunction.Context
    assert AggregateFunction[int, int, int] is AggregateFunction
    assert Count().process("k", None, [1, 2]) == [("k", 2)] and Types.INT()


def test_importing_pyflink_installs_the_embedded_cluster_as_the_fallback_executor():
    assert environment._fallback_factory is not None
    assert environment._fallback_factory.__name__ == "_embedded_cluster_executor"


def test_importing_pyflink_loads_no_client_until_a_job_runs():
    code = "import sys, pyflink.datastream; print('yarnflink.client.executor' in sys.modules, 'httpx' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


def test_without_apache_flink_no_guard_is_installed():
    assert apache_flink_installed() is None
    assert install_guard() is None


def test_the_guard_refuses_import_pyflink_naming_both():
    guard = ApacheFlinkGuard("2.3.0", "/venv/lib/site-packages")
    sys.meta_path.insert(0, guard)
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k == "pyflink" or k.startswith("pyflink.")}
    try:
        with pytest.raises(ImportError, match=r"apache-flink 2.3.0 .*yarnflink.*pip uninstall apache-flink"):
            importlib.import_module("pyflink.datastream")
    finally:
        remove_guard(guard)
        sys.modules.update(saved)
    assert guard not in sys.meta_path


def test_with_apache_flinks_metadata_installed_import_pyflink_fails_naming_both(tmp_path):
    # what `pip install apache-flink` leaves besides its files: the distribution's metadata
    dist = tmp_path / "apache_flink-2.3.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: apache-flink\nVersion: 2.3.0\n")
    out = subprocess.run(
        [sys.executable, "-c", "import pyflink.datastream"],
        env={"PYTHONPATH": f"{ROOT}:{tmp_path}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    assert "apache-flink 2.3.0" in out.stderr and "yarnflink" in out.stderr
