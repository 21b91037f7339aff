"""Only ``yarnflink/rpc/`` knows gRPC: no other module of the package imports grpc or the code
generated from proto/ (``yarnflink.rpc.pb``), not even inside a function or for type checking."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "yarnflink"
RPC = PACKAGE / "rpc"


def _forbidden(module: str) -> bool:
    return (
        module == "grpc"
        or module.startswith(("grpc.", "grpc_"))
        or module == "yarnflink.rpc.pb"
        or module.startswith("yarnflink.rpc.pb.")
    )


def grpc_imports(source: str) -> list[str]:
    """The forbidden modules ``source`` imports (``import x``, ``from x import y``, ``from
    yarnflink.rpc import pb``), wherever the import statement is."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _forbidden(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _forbidden(node.module):
                found.append(node.module)
            else:
                found += [f"{node.module}.{a.name}" for a in node.names if _forbidden(f"{node.module}.{a.name}")]
    return found


def test_no_module_outside_rpc_imports_grpc_or_generated_code() -> None:
    offenders = {
        str(path.relative_to(PACKAGE.parent)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if RPC not in path.parents
        for found in [grpc_imports(path.read_text(encoding="utf-8"))]
        if found
    }
    assert offenders == {}, f"grpc belongs in yarnflink/rpc/ only (the gateways' adapter): {offenders}"


def test_the_scan_sees_every_form_of_import() -> None:
    source = """
import grpc
import grpc.aio as aio
from grpc import StatusCode
from yarnflink.rpc.pb import common_pb2
from yarnflink.rpc import pb
import yarnflink.rpc.pb.jobmaster_pb2
from yarnflink.rpc.resolver import GatewayResolver

def later():
    import grpc_tools

if TYPE_CHECKING:
    from grpc.aio import Channel
"""
    assert sorted(grpc_imports(source)) == [
        "grpc",
        "grpc",
        "grpc.aio",
        "grpc.aio",
        "grpc_tools",
        "yarnflink.rpc.pb",
        "yarnflink.rpc.pb",
        "yarnflink.rpc.pb.jobmaster_pb2",
    ]


#: what an endpoint and its fakes need to talk about calls, without the transport
CONTRACTS = [
    "yarnflink.common.rpc_errors",
    "yarnflink.jobmaster.gateway",
    "yarnflink.resourcemanager.gateway",
    "yarnflink.taskexecutor.gateway",
    "yarnflink.dispatcher.gateway",
    "yarnflink.rpc.resolver",
]


def test_the_gateways_and_their_exceptions_import_without_grpc() -> None:
    code = textwrap.dedent(f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split('.')[0] == 'grpc' or name.startswith('yarnflink.rpc.pb'):
                    raise ImportError('gRPC imported by a gateway contract: ' + name)
        sys.meta_path.insert(0, Block())
        for m in {CONTRACTS!r}:
            __import__(m)
        print('ok')
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
