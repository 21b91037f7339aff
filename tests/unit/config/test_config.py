"""Configuration: typed options, parsing, YAML loading, -D overrides, error messages."""

import datetime

import pytest

from yarnflink.common.config import (
    OPTIONS,
    ConfigError,
    ConfigOption,
    Configuration,
    load_configuration,
    parse_duration,
    parse_memory,
)
from yarnflink.dispatcher.options import RestOptions
from yarnflink.jobgraph.options import CoreOptions
from yarnflink.resourcemanager.options import HeartbeatManagerOptions

td = datetime.timedelta


@pytest.mark.parametrize(
    "text,expected",
    [
        ("10 s", td(seconds=10)),
        ("100ms", td(milliseconds=100)),
        ("5 min", td(minutes=5)),
        ("2h", td(hours=2)),
        ("1 d", td(days=1)),
        ("100", td(milliseconds=100)),
        (250, td(milliseconds=250)),
        ("1.5 s", td(milliseconds=1500)),
        ("30 SECONDS", td(seconds=30)),
        ("7 m", td(minutes=7)),
        ("500 us", td(microseconds=500)),
    ],
)
def test_durations(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["abc", "10 fortnights", "-5 s", "s", "", "1 2 s"])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1728m", 1728 << 20),
        ("1 gb", 1 << 30),
        ("64 kb", 64 << 10),
        ("8 mb", 8 << 20),
        ("100", 100),
        ("100 bytes", 100),
        ("2T", 2 << 40),
        ("0.5 g", 512 << 20),
        (4096, 4096),
    ],
)
def test_memory(text, expected):
    assert parse_memory(text) == expected


@pytest.mark.parametrize("text", ["lots", "5 pb", "-1 mb", "mb"])
def test_bad_memory(text):
    with pytest.raises(ValueError):
        parse_memory(text)


def test_required_options_and_defaults():
    conf = Configuration()
    expected = {
        "parallelism.default": 1,
        "pipeline.max-parallelism": -1,
        "pipeline.operator-chaining.enabled": True,
        "execution.runtime-mode": "STREAMING",
        "execution.buffer-timeout": td(milliseconds=100),
        "taskmanager.numberOfTaskSlots": 1,
        "taskmanager.memory.process.size": 1728 << 20,
        "taskmanager.host": None,
        "taskmanager.data.port": 0,
        "taskmanager.rpc.port": 0,
        "jobmanager.rpc.address": "localhost",
        "jobmanager.rpc.port": 6123,
        "rest.address": "localhost",
        "rest.port": 8081,
        "rest.bind-address": None,
        "heartbeat.interval": td(seconds=10),
        "heartbeat.timeout": td(seconds=50),
        "slot.request.timeout": td(seconds=300),
        "taskmanager.network.memory.buffers-per-channel": 8,
        "taskmanager.network.memory.max-bytes-per-channel": 8 << 20,
        "local.number-taskmanager": 2,
        "rest.server.max-content-length": 100 << 20,
    }
    for key, value in expected.items():
        assert key in OPTIONS, key
        assert conf.get(key) == value, key
    assert "client.timeout" in OPTIONS
    for o in OPTIONS.values():
        assert o.description and o.key
        o.describe()


def test_typed_get_and_set():
    conf = Configuration()
    conf.set("parallelism.default", 4).set(HeartbeatManagerOptions.HEARTBEAT_TIMEOUT, "2 min").set("rest.port", "9000")
    conf.set("pipeline.operator-chaining.enabled", "FALSE")
    conf.set("taskmanager.memory.process.size", "1 gb")
    conf.set("execution.runtime-mode", "batch")
    assert conf.get(CoreOptions.DEFAULT_PARALLELISM) == 4
    assert conf.get("heartbeat.timeout") == td(minutes=2)
    assert conf.get_seconds("heartbeat.timeout") == 120.0
    assert conf.get("rest.port") == 9000
    assert conf.get("pipeline.operator-chaining.enabled") is False
    assert conf.get("taskmanager.memory.process.size") == 1 << 30
    assert conf.get("execution.runtime-mode") == "BATCH"
    assert conf.get("rest.address", "fallback") == "fallback"


def test_typed_values_are_stored_as_canonical_strings():
    conf = Configuration()
    conf.set("pipeline.operator-chaining.enabled", False)
    conf.set("heartbeat.interval", td(seconds=3))
    conf.set("parallelism.default", 7)
    conf.set("taskmanager.memory.process.size", 2 << 30)
    conf.set("heartbeat.timeout", "90 s")  # user strings are kept as written
    assert conf.to_dict() == {
        "pipeline.operator-chaining.enabled": "false",
        "heartbeat.interval": "3 s",
        "parallelism.default": "7",
        "taskmanager.memory.process.size": "2 gb",
        "heartbeat.timeout": "90 s",
    }
    assert Configuration.from_dict(conf.to_dict()) == conf


def test_unknown_key_with_suggestion():
    with pytest.raises(ConfigError) as e:
        Configuration().set("paralelism.default", 1, source="--conf my.yaml")
    assert str(e.value) == (
        "unknown configuration key 'paralelism.default' (from --conf my.yaml); did you mean 'parallelism.default'?"
    )


def test_unknown_key_without_close_match():
    with pytest.raises(ConfigError, match="unknown configuration key 'zzz'") as e:
        Configuration().set("zzz", 1)
    assert "did you mean" not in str(e.value)


def test_bad_values():
    with pytest.raises(ConfigError) as e:
        Configuration().set("parallelism.default", "abc")
    assert str(e.value) == "invalid value 'abc' for 'parallelism.default': expected an integer"
    with pytest.raises(ConfigError, match="expected true or false"):
        Configuration().set("pipeline.operator-chaining.enabled", "yes please")
    with pytest.raises(ConfigError, match="expected a duration"):
        Configuration().set("heartbeat.interval", "soon")
    with pytest.raises(ConfigError, match="expected a memory size"):
        Configuration().set("taskmanager.memory.process.size", "big")
    with pytest.raises(ConfigError, match="must be at least 1"):
        Configuration().set("parallelism.default", 0)
    with pytest.raises(ConfigError, match="must be at most 65535"):
        Configuration().set("rest.port", 70000)
    with pytest.raises(ConfigError, match="expected an integer"):
        Configuration().set("rest.port", True)


def test_passthrough_prefixes_are_not_validated():
    conf = Configuration(
        {"spark.executor.memory": "2g", "env.java.opts": "-Xmx1g", "metrics.reporter.x": 1, "yarnflink.test.flag": True}
    )
    assert conf.get("spark.executor.memory") == "2g"
    assert conf.get("metrics.reporter.x") == "1"
    assert conf.get("yarnflink.test.flag") == "true"
    assert conf.get("metrics.unset") is None


def test_option_definition_validation():
    with pytest.raises(TypeError):
        ConfigOption("x.y", "complex", None, "d")
    with pytest.raises(TypeError):
        ConfigOption("x.y", "enum", None, "d")
    o = ConfigOption("x.y", int, "5", "d")
    assert o.type == "int" and o.default == 5


def test_contains_remove_copy_merge():
    a = Configuration({"rest.port": 1})
    b = a.copy().set("rest.port", 2)
    assert a.get("rest.port") == 1 and b.get("rest.port") == 2
    assert "rest.port" in a and RestOptions.ADDRESS not in a
    merged = a.merged({"rest.address": "h"})
    assert merged.to_dict() == {"rest.port": "1", "rest.address": "h"}
    assert a.remove("rest.port") and not a.contains("rest.port")
    assert a.get("rest.port") == 8081
    assert Configuration().to_dict(include_defaults=True)["execution.buffer-timeout"] == "100 ms"


# ----------------------------------------------------------------------------- loading
def write(path, text):
    path.write_text(text)
    return str(path)


def test_load_flat_and_nested_yaml(tmp_path):
    f = write(
        tmp_path / "my.yaml",
        "parallelism.default: 3\n"
        "taskmanager:\n"
        "  numberOfTaskSlots: 4\n"
        "  memory:\n"
        "    process.size: 2g\n"
        "rest: {port: 9091}\n"
        "pipeline.operator-chaining.enabled: false\n"
        "env.java.opts: [-Xmx1g, -Xms1g]\n",
    )
    conf = load_configuration(f)
    assert conf.get("parallelism.default") == 3
    assert conf.get("taskmanager.numberOfTaskSlots") == 4
    assert conf.get("taskmanager.memory.process.size") == 2 << 30
    assert conf.get("rest.port") == 9091
    assert conf.get("pipeline.operator-chaining.enabled") is False
    assert conf.get("env.java.opts") == "-Xmx1g;-Xms1g"


def test_dynamic_properties_override_the_file(tmp_path):
    f = write(tmp_path / "my.yaml", "parallelism.default: 3\nrest.port: 9091\n")
    conf = load_configuration(f, dynamic=["parallelism.default=5", "-Dheartbeat.timeout=1 min"])
    assert conf.get("parallelism.default") == 5
    assert conf.get("rest.port") == 9091
    assert conf.get("heartbeat.timeout") == td(minutes=1)


def test_default_conf_dir_env_var_and_cwd(tmp_path, monkeypatch):
    d = tmp_path / "cdir"
    d.mkdir()
    write(d / "yarnflink.yaml", "rest.port: 1234\n")
    monkeypatch.setenv("YARNFLINK_CONF_DIR", str(d))
    assert load_configuration().get("rest.port") == 1234
    monkeypatch.delenv("YARNFLINK_CONF_DIR")
    monkeypatch.chdir(tmp_path)
    assert load_configuration().get("rest.port") == 8081  # no conf/ here: defaults
    (tmp_path / "conf").mkdir()
    write(tmp_path / "conf" / "yarnflink.yaml", "rest.port: 4321\n")
    assert load_configuration().get("rest.port") == 4321
    assert load_configuration(conf_dir=str(d)).get("rest.port") == 1234


def test_errors_name_their_source(tmp_path):
    f = write(tmp_path / "my.yaml", "paralelism.default: 2\n")
    with pytest.raises(ConfigError) as e:
        load_configuration(f)
    assert str(e.value) == (
        f"unknown configuration key 'paralelism.default' (from --conf {f}); did you mean 'parallelism.default'?"
    )
    with pytest.raises(
        ConfigError, match=r"invalid value 'abc' for 'parallelism.default': expected an integer \(from -D\)"
    ):
        load_configuration(dynamic=["parallelism.default=abc"], conf_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="expected key=value"):
        load_configuration(dynamic=["parallelism.default"], conf_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="does not exist"):
        load_configuration(str(tmp_path / "missing.yaml"))


def test_bad_yaml_files(tmp_path):
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_configuration(write(tmp_path / "a.yaml", "a: [1\n"))
    with pytest.raises(ConfigError, match="map of configuration keys"):
        load_configuration(write(tmp_path / "b.yaml", "- 1\n- 2\n"))
    with pytest.raises(ConfigError, match="given twice"):
        load_configuration(write(tmp_path / "c.yaml", "rest.port: 1\nrest:\n  port: 2\n"))
    with pytest.raises(ConfigError, match="has no value"):
        load_configuration(write(tmp_path / "d.yaml", "rest.port:\n"))
    assert load_configuration(write(tmp_path / "e.yaml", "")).to_dict() == {}
