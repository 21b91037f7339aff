"""Cheap start-up (issue 20, point 4): each process loads only what it uses. ``import yarnflink``
registers every option but loads no DataStream API, Arrow or RPC; a TaskExecutor loads no pandas,
REST server, client or command line; the packages' lazy re-exports all resolve."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import types

import pytest

from yarnflink.common.lazy import lazy_exports

LAZY_PACKAGES = (
    "yarnflink",
    "yarnflink.api",
    "yarnflink.checkpoint",
    "yarnflink.highavailability",
    "yarnflink.network",
    "yarnflink.state",
    "yarnflink.state_processor",
    "yarnflink.streaming",
)


def loaded_after(statement: str, watched: tuple[str, ...]) -> list[str]:
    """The modules of ``watched`` a fresh interpreter holds after running ``statement``."""
    code = f"import json, sys\n{statement}\nprint(json.dumps([m for m in {list(watched)!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout.splitlines()[-1]))


def test_importing_the_package_registers_every_option_and_loads_no_api_arrow_or_rpc() -> None:
    statement = (
        "import yarnflink\n"
        "from yarnflink.common.config import OPTIONS\n"
        "assert 'execution.checkpointing.interval' in OPTIONS and 'taskmanager.numberOfTaskSlots' in OPTIONS"
    )
    heavy = ("yarnflink.api.datastream", "yarnflink.operators.windows", "pyarrow", "pandas", "numpy", "grpc")
    assert loaded_after(statement, heavy) == []


def test_a_task_executor_loads_no_pandas_rest_server_client_or_command_line() -> None:
    heavy = (
        "pandas",
        "yaml",  # YARN only
        "yarnflink.deployment.yarn.master",
        # the task runtime loads on a thread once the TaskExecutor registered (_preload_task_runtime)
        "yarnflink.taskexecutor.task",
        "yarnflink.operators.chain",
        "yarnflink.state.heap",
        "pyspark",
        "fastapi",
        "uvicorn",
        "httpx",
        "yarnflink.cli.main",
        "yarnflink.client.executor",
        "yarnflink.api.datastream",
        "yarnflink.dispatcher.rest",
    )
    assert loaded_after("import yarnflink.entrypoint.taskexecutor", heavy) == []


def test_the_master_loads_no_pandas_pyspark_client_datastream_api_or_yarn() -> None:
    heavy = (
        "pandas",
        "pyspark",
        "httpx",  # the client: an application master only
        "yarnflink.client.executor",
        "yarnflink.api.datastream",
        "yarnflink.entrypoint.application",
        "yarnflink.cli.main",
        "yarnflink.taskexecutor.taskexecutor",
        "yaml",  # YARN only
        "yarnflink.deployment.yarn.master",
        # the JobMaster loads on a thread once the Dispatcher serves (or at the first job)
        "yarnflink.jobmaster.jobmaster",
        "yarnflink.scheduler.scheduler",
        "yarnflink.operators.chain",
    )
    assert loaded_after("import yarnflink.entrypoint.master", heavy) == []


def test_the_command_line_loads_no_master_or_task_executor() -> None:
    heavy = (
        "fastapi",
        "uvicorn",
        "grpc",
        "yarnflink.entrypoint.master",
        "yarnflink.dispatcher.dispatcher",
        "yarnflink.jobmaster.jobmaster",
        "yarnflink.entrypoint.taskexecutor",
        "yarnflink.taskexecutor.taskexecutor",
        # `yarnflink run` loads these on a thread while its per-job cluster starts (RUN_MODULES)
        "yarnflink.api.datastream",
        "yarnflink.client.executor",
        "yarnflink.entrypoint.application",
    )
    assert loaded_after("import yarnflink.cli.main", heavy) == []


def test_the_process_metrics_do_not_load_pyarrow() -> None:
    statement = (
        "from yarnflink.metrics.process import process_metrics\n"
        "from yarnflink.metrics import names\n"
        "assert process_metrics().snapshot()[names.MEMORY_ARROW] == 0.0"
    )
    assert loaded_after(statement, ("pyarrow",)) == []


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_lazy_re_export_resolves_and_is_listed(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, (package, name)
    assert set(module.__all__) <= set(dir(module))
    exec(f"from {package} import {', '.join(module.__all__)}", {})
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018


def test_lazy_exports_load_on_first_use_and_refuse_a_name_exported_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = types.ModuleType("lazy_exports_probe")
    monkeypatch.setitem(sys.modules, probe.__name__, probe)
    getattr_, dir_ = lazy_exports(probe.__name__, {"json": ("dumps",)})
    assert "dumps" in dir_() and not hasattr(probe, "dumps")
    assert getattr_("dumps") is json.dumps
    assert probe.dumps is json.dumps  # cached: the next read does not come through __getattr__
    with pytest.raises(AttributeError):
        getattr_("loads")
    with pytest.raises(ValueError, match="both"):
        lazy_exports("p", {"a": ("x",), "b": ("x",)})
