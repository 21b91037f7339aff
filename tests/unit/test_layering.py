"""Dependencies one way (issue 16, point 5): the import-linter contracts of pyproject.toml hold, and
no function hides an import of a yarnflink module (a function-local import is how a package cycle
hides; the only ones left defer a heavy optional dependency, listed in ``DEFERRED``)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The contracts that must exist (a contract removed from pyproject.toml fails here, not silently).
CONTRACTS = {
    "pure-cores",
    "client-below-deployment",
    "checkpoint-above-state",
    "jobmaster-scheduler-slotpool",
    "rpc-above-security",
    "grpc-in-rpc-only",
    "no-test-code",
}

#: (module file, imported module) -> why the import waits until the function runs.
DEFERRED: dict[tuple[str, str], str] = {
    ("yarnflink/highavailability/services.py", "yarnflink.highavailability.zookeeper.services"): (
        "kazoo loads only when ZooKeeper HA is configured"
    ),
    ("yarnflink/deployment/yarn/supervisor.py", "yarnflink.highavailability.zookeeper.session_file"): (
        "kazoo loads only when ZooKeeper HA is configured (the YARN master's watcher)"
    ),
    ("yarnflink/entrypoint/master.py", "yarnflink.highavailability.zookeeper.session_file"): (
        "kazoo loads only when ZooKeeper HA is configured (a YARN master records its session)"
    ),
    ("yarnflink/taskexecutor/taskexecutor.py", "yarnflink.taskexecutor.task"): (
        "the task runtime (operators, state, Arrow): a TaskExecutor registers first and loads it on a "
        "thread after (issue 20: start-up)"
    ),
    ("yarnflink/dispatcher/dispatcher.py", "yarnflink.jobmaster.jobmaster"): (
        "the JobMaster's modules (scheduler, checkpointing, operators, Arrow): a master serves REST "
        "first and loads them on a thread once up (issue 20: start-up)"
    ),
    ("yarnflink/entrypoint/local_master.py", "yarnflink.entrypoint.master"): (
        "a local master starts its ResourceManager and TaskExecutors first, then loads the rest "
        "(REST server, Dispatcher) while they start (issue 20: start-up)"
    ),
    ("yarnflink/cli/main.py", "yarnflink.api.environment"): (
        "the DataStream API (pyarrow, numpy): `yarnflink run` loads it on a thread while its per-job "
        "cluster starts; other commands do not need it"
    ),
    ("yarnflink/cli/main.py", "yarnflink.client.executor"): (
        "the job executor: `yarnflink run` loads it on a thread while its per-job cluster starts"
    ),
    ("yarnflink/cli/main.py", "yarnflink.entrypoint.application"): (
        "application mode only (it loads the DataStream API and the job executor)"
    ),
    ("yarnflink/cli/main.py", "yarnflink.entrypoint.master"): (
        "a master's modules (REST server, JobMaster) load in a master process only, not in every client"
    ),
    ("yarnflink/cli/main.py", "yarnflink.entrypoint.taskexecutor"): (
        "a TaskExecutor's modules load in a TaskExecutor process only, not in every client"
    ),
    ("yarnflink/entrypoint/master.py", "yarnflink.entrypoint.application"): (
        "the client and the DataStream API (httpx): an application master only"
    ),
    ("yarnflink/entrypoint/master.py", "yarnflink.deployment.yarn.master"): (
        "YARN only (PyYAML and the YARN driver): a local master starts without them"
    ),
    ("yarnflink/entrypoint/taskexecutor.py", "yarnflink.deployment.yarn.master"): (
        "YARN only (PyYAML and the YARN driver): a local TaskExecutor starts without them"
    ),
}


def test_the_import_contracts_hold() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint_imports, "import-linter is a dev dependency (pip install -e .[dev])"
    out = subprocess.run([lint_imports, "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout, out.stdout


def test_every_contract_is_configured() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert {c["id"] for c in config["contracts"]} >= CONTRACTS


def function_local_imports(source: str, package: str = "yarnflink") -> list[tuple[int, str]]:
    """(line, module) of every import of ``package`` (or a relative one) made inside a function."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, True)
                continue
            if in_function and isinstance(child, ast.ImportFrom):
                module = "." * child.level + (child.module or "")
                if child.level or module == package or module.startswith(package + "."):
                    found.append((child.lineno, module))
            elif in_function and isinstance(child, ast.Import):
                found.extend(
                    (child.lineno, a.name) for a in child.names if a.name == package or a.name.startswith(package + ".")
                )
            visit(child, in_function)

    visit(ast.parse(source), False)
    return found


def test_the_checker_sees_imports_in_functions_and_methods_only() -> None:
    source = (
        "import yarnflink.common\n"
        "from yarnflink.state import heap\n"
        "def f():\n"
        "    from yarnflink.checkpoint import storage\n"
        "    import json\n"
        "class C:\n"
        "    async def g(self):\n"
        "        if True:\n"
        "            import yarnflink.rpc.endpoint\n"
        "        from . import sibling\n"
    )
    assert function_local_imports(source) == [
        (4, "yarnflink.checkpoint"),
        (9, "yarnflink.rpc.endpoint"),
        (10, "."),
    ]


def test_no_function_hides_an_import_of_a_yarnflink_module() -> None:
    hidden = []
    for path in sorted((ROOT / "yarnflink").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("yarnflink/rpc/pb/"):
            continue  # generated
        for line, module in function_local_imports(path.read_text()):
            if (rel, module) not in DEFERRED:
                hidden.append(f"{rel}:{line}: {module}")
    assert not hidden, "function-local imports of yarnflink modules (import at module level):\n" + "\n".join(hidden)
