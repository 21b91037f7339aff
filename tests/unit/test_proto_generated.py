"""The committed protobuf/gRPC code must be exactly what scripts/gen-proto makes from proto/."""

import filecmp
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_matches_proto_sources(tmp_path: Path) -> None:
    subprocess.run(
        [str(ROOT / "scripts" / "gen-proto"), str(tmp_path)],
        check=True,
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
    )
    fresh = tmp_path / "yarnflink" / "rpc" / "pb"
    committed = ROOT / "yarnflink" / "rpc" / "pb"
    names = sorted(p.name for p in fresh.iterdir() if p.is_file())
    assert names == sorted(p.name for p in committed.iterdir() if p.is_file() and p.suffix in (".py", ".pyi"))
    _, mismatch, errors = filecmp.cmpfiles(fresh, committed, names, shallow=False)
    assert not mismatch and not errors, f"run scripts/gen-proto: {mismatch or errors} differ from proto/"


def test_every_gateway_service_is_defined() -> None:
    from yarnflink.rpc.pb import jobmaster_pb2, resourcemanager_pb2, taskexecutor_pb2

    services = {
        *resourcemanager_pb2.DESCRIPTOR.services_by_name,
        *jobmaster_pb2.DESCRIPTOR.services_by_name,
        *taskexecutor_pb2.DESCRIPTOR.services_by_name,
    }
    assert services == {"ResourceManagerGateway", "JobMasterGateway", "TaskExecutorGateway"}
