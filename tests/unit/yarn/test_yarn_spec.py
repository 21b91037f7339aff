from __future__ import annotations

from pathlib import Path

import pytest
import skein

from yarnflink.common.config import Configuration, load_configuration
from yarnflink.deployment.yarn import YarnDeploymentError
from yarnflink.deployment.yarn.spec import (
    CONF_FILE,
    STANDBY_SERVICE,
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
    assert STANDBY_SERVICE not in spec.services


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
    assert te.script.startswith("./py311/bin/python -m yarnflink")
    assert "--per-job" in spec.master.script


def test_python_executable_wins(tmp_path: Path) -> None:
    config = Configuration({"yarn.python.executable": "/opt/py/bin/python3"})
    spec = _spec(config, ClusterRequest(), tmp_path)
    assert spec.master.script.startswith("/opt/py/bin/python3 -m yarnflink.cli.main master start")


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


def test_standby_masters_need_zookeeper_ha(tmp_path: Path) -> None:
    with pytest.raises(YarnDeploymentError, match="ZooKeeper"):
        _spec(Configuration(), ClusterRequest(standby=2), tmp_path)
    config = Configuration({"high-availability.type": "zookeeper", "high-availability.zookeeper.quorum": "zk:2181"})
    spec = _spec(config, ClusterRequest(standby=2), tmp_path)
    standby = spec.services[STANDBY_SERVICE]
    assert standby.instances == 2 and "--yarn-standby" in standby.script


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
    args = build_parser().parse_args(shlex.split(script)[3:])
    assert (args.yarn, args.yarn_standby, args.conf, args.local_taskexecutors) == (True, True, CONF_FILE, 2)
    assert (args.application, args.application_arg) == ("j.py", ["a"])
    te = taskexecutor_script(Configuration()).replace('"$YARNFLINK_RM_ADDRESS"', "am:6123")
    args = build_parser().parse_args(shlex.split(te.replace('"$YARNFLINK_RESOURCE_ID"', "te-1"))[3:])
    assert (args.master, args.resource_id, args.conf) == ("am:6123", "te-1", CONF_FILE)
