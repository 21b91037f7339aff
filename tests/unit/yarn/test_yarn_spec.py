from __future__ import annotations

from pathlib import Path

import pytest
import skein

from yarnflink.common.config import Configuration, load_configuration
from yarnflink.deployment.yarn import YarnDeploymentError
from yarnflink.deployment.yarn.spec import (
    CONF_FILE,
    TASKEXECUTOR_SERVICE,
    ClusterRequest,
    build_application_spec,
    check_staging_filesystem,
    default_filesystem,
    job_files,
    ship_configuration,
)


def _spec(config: Configuration, request: ClusterRequest, tmp_path: Path) -> skein.ApplicationSpec:
    _, files = ship_configuration(config, tmp_path / "staging")
    if request.job_file:
        files.update(job_files(request.job_file))
    spec = build_application_spec(config, request, files)
    assert skein.ApplicationSpec.from_dict(spec.to_dict()) == spec  # skein validates it
    return spec


def test_session_spec_master_script_and_taskexecutor_service(tmp_path: Path) -> None:
    config = Configuration(
        {
            "taskmanager.numberOfTaskSlots": "4",
            "jobmanager.memory.process.size": "2g",
            "yarn.application.queue": "etl",
            "yarn.application-attempts": "3",
        }
    )
    spec = _spec(config, ClusterRequest(mode="session", taskexecutors=3), tmp_path)
    assert spec.name == "yarnflink session" and spec.queue == "etl" and spec.max_attempts == 3
    assert "yarnflink" in spec.tags
    assert spec.master.resources.memory == 2048
    assert "master start --yarn --conf yarnflink-conf.yaml --local-taskexecutors 3" in spec.master.script
    assert "--per-job" not in spec.master.script
    te = spec.services[TASKEXECUTOR_SERVICE]
    assert te.instances == 0  # the driver adds them one by one
    assert (te.resources.memory, te.resources.vcores) == (1728, 4)  # taskmanager.memory.process.size, slots
    assert '--resource-id "$YARNFLINK_RESOURCE_ID"' in te.script and "python3 -m yarnflink" in te.script
    assert CONF_FILE in spec.master.files and CONF_FILE in te.files
    assert len(spec.services) == 1


def test_vcores_name_and_python_from_archive(tmp_path: Path) -> None:
    config = Configuration(
        {
            "yarn.containers.vcores": "2",
            "yarn.application.name": "etl",
            "taskmanager.memory.process.size": "4g",
            "yarn.ship-archives": "hdfs:///envs/py311.tar.gz",
        }
    )
    spec = _spec(config, ClusterRequest(mode="per-job"), tmp_path)
    te = spec.services[TASKEXECUTOR_SERVICE]
    assert (te.resources.memory, te.resources.vcores) == (4096, 2) and spec.name == "etl"
    assert te.files["py311"].type == skein.model.FileType.ARCHIVE
    assert te.script.splitlines()[-1].startswith("exec ./py311/bin/python -m yarnflink")
    assert "--per-job" in spec.master.script


def test_python_executable_wins(tmp_path: Path) -> None:
    config = Configuration({"yarn.python.executable": "/opt/py/bin/python3"})
    spec = _spec(config, ClusterRequest(), tmp_path)
    assert spec.master.script.splitlines()[-1].startswith("exec /opt/py/bin/python3 -m yarnflink.cli.main master start")


def test_configuration_and_security_material_travel(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    config = Configuration({"security.ssl.internal.ca": str(ca), "parallelism.default": "7"})
    shipped, files = ship_configuration(config, tmp_path / "staging")
    assert shipped.get("security.ssl.internal.ca") == "security-ca.pem" and files["security-ca.pem"] == str(ca)
    loaded = load_configuration(files[CONF_FILE], [])  # what `--conf yarnflink-conf.yaml` reads in a container
    assert loaded.get("security.ssl.internal.ca") == "security-ca.pem" and loaded.get("parallelism.default") == 7


def test_application_mode_ships_job_and_local_modules(tmp_path: Path) -> None:
    job = tmp_path / "job" / "wordcount.py"
    job.parent.mkdir()
    job.write_text("import helpers\n")
    (job.parent / "helpers.py").write_text("X = 1\n")
    request = ClusterRequest(mode="application", job_file=str(job), job_args=["--in", "a b"])
    spec = _spec(Configuration(), request, tmp_path)
    assert {"wordcount.py", "helpers.py"} <= set(spec.master.files)
    assert "--application wordcount.py --application-arg --in --application-arg 'a b'" in spec.master.script


def test_standby_masters_are_refused_on_yarn_with_the_reason(tmp_path: Path) -> None:
    """A standby container dies with the attempt (skein's master script is the leader); YARN's next
    attempt is the standby on YARN."""
    config = Configuration({"high-availability.type": "zookeeper", "high-availability.zookeeper.quorum": "zk:2181"})
    with pytest.raises(YarnDeploymentError, match="yarn.application-attempts"):
        _spec(config, ClusterRequest(standby=2), tmp_path)


def test_taskexecutor_restarts_are_the_resource_managers_not_skeins(tmp_path: Path) -> None:
    spec = _spec(Configuration(), ClusterRequest(), tmp_path)
    assert spec.services[TASKEXECUTOR_SERVICE].max_restarts == 0


def test_containers_get_the_hadoop_classpath_from_the_node_or_the_configuration(tmp_path: Path) -> None:
    config = Configuration(
        {
            "containerized.master.env.CLASSPATH": "/opt/hadoop/etc:/opt/hadoop/share/*",
            "containerized.taskmanager.env.ARROW_LIBHDFS_DIR": "/opt/hadoop/lib/native",
        }
    )
    spec = _spec(config, ClusterRequest(), tmp_path)
    te = spec.services[TASKEXECUTOR_SERVICE]
    # skein drops CLASSPATH from the master's script: it travels under another name
    assert spec.master.env["YARNFLINK_CLASSPATH"] == "/opt/hadoop/etc:/opt/hadoop/share/*"
    assert "CLASSPATH" not in spec.master.env and "ARROW_LIBHDFS_DIR" not in spec.master.env
    assert te.env["ARROW_LIBHDFS_DIR"] == "/opt/hadoop/lib/native" and "YARNFLINK_CLASSPATH" not in te.env
    for script in (spec.master.script, te.script):
        assert "classpath --glob" in script and 'export CLASSPATH="$YARNFLINK_CLASSPATH"' in script
    with pytest.raises(YarnDeploymentError, match="not an environment variable name"):
        _spec(Configuration({"containerized.master.env.A-B": "x"}), ClusterRequest(), tmp_path)


def _run_prelude(tmp_path: Path, env: dict[str, str]) -> str:
    import subprocess

    from yarnflink.deployment.yarn.spec import HADOOP_CLASSPATH_PRELUDE

    out = subprocess.run(
        ["bash", "-c", HADOOP_CLASSPATH_PRELUDE + 'echo "$CLASSPATH|$HADOOP_HOME"'],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_the_script_prelude_asks_the_nodes_hadoop_for_its_classpath(tmp_path: Path) -> None:
    hadoop = tmp_path / "hadoop" / "bin"
    hadoop.mkdir(parents=True)
    (hadoop / "hadoop").write_text('#!/bin/sh\n[ "$1 $2" = "classpath --glob" ] && echo /h/a.jar:/h/b.jar\n')
    (hadoop / "hadoop").chmod(0o755)
    home = str(tmp_path / "hadoop")
    # as a NodeManager starts a container: HADOOP_COMMON_HOME, no CLASSPATH, hadoop not on PATH
    assert _run_prelude(tmp_path, {"HADOOP_COMMON_HOME": home}) == f"/h/a.jar:/h/b.jar|{home}"
    assert _run_prelude(tmp_path, {"HADOOP_COMMON_HOME": home, "YARNFLINK_CLASSPATH": "/c"}) == f"/c|{home}"
    assert _run_prelude(tmp_path, {}) == "|"  # no Hadoop on the node: nothing to add


def test_unknown_mode_and_missing_job_file(tmp_path: Path) -> None:
    with pytest.raises(YarnDeploymentError):
        build_application_spec(Configuration(), ClusterRequest(mode="bogus"), {})
    with pytest.raises(YarnDeploymentError, match="does not exist"):
        job_files(str(tmp_path / "nope.py"))


def _core_site(d: Path, fs: str | None) -> str:
    prop = f"<property><name>fs.defaultFS</name><value>{fs}</value></property>" if fs else ""
    (d / "core-site.xml").write_text(f"<configuration>{prop}</configuration>")
    return str(d)


def test_staging_filesystem_must_not_be_local(tmp_path: Path) -> None:
    assert default_filesystem(None) is None
    check_staging_filesystem(_core_site(tmp_path, "hdfs://nn:8020"))
    with pytest.raises(YarnDeploymentError, match="hdfs://"):
        check_staging_filesystem(_core_site(tmp_path, "file:///"))
    with pytest.raises(YarnDeploymentError):
        check_staging_filesystem(_core_site(tmp_path, None))  # Hadoop's default is file:///


def test_container_scripts_parse_with_the_yarnflink_command_line() -> None:
    import shlex

    from yarnflink.cli.main import build_parser
    from yarnflink.deployment.yarn.spec import master_script, taskexecutor_script

    script = master_script(
        Configuration(),
        ClusterRequest(mode="application", taskexecutors=2, job_file="j.py", job_args=["a"]),
        standby=True,
    )
    args = build_parser().parse_args(shlex.split(script.splitlines()[-1])[4:])
    assert (args.yarn, args.yarn_standby, args.conf, args.local_taskexecutors) == (True, True, CONF_FILE, 2)
    assert (args.application, args.application_arg) == ("j.py", ["a"])
    te = taskexecutor_script(Configuration()).splitlines()[-1].replace('"$YARNFLINK_RM_ADDRESS"', "am:6123")
    args = build_parser().parse_args(shlex.split(te.replace('"$YARNFLINK_RESOURCE_ID"', "te-1"))[4:])
    assert (args.master, args.resource_id, args.conf, args.yarn) == ("am:6123", "te-1", CONF_FILE, True)


def test_attempts_above_the_resource_managers_maximum_are_warned(tmp_path: Path) -> None:
    from yarnflink.deployment.yarn.spec import attempts_warning

    three = Configuration({"yarn.application-attempts": "3"})
    assert "at most 2 times" in (attempts_warning(three, None) or "")  # YARN's default
    (tmp_path / "yarn-site.xml").write_text(
        "<configuration><property><name>yarn.resourcemanager.am.max-attempts</name><value>4</value>"
        "</property></configuration>"
    )
    assert attempts_warning(three, str(tmp_path)) is None
    five = Configuration({"yarn.application-attempts": "5"})
    assert "yarn-site.xml" in (attempts_warning(five, str(tmp_path)) or "")
    assert attempts_warning(Configuration(), None) is None
