"""The decision-making core imports no I/O library (DESIGN principle 3)."""

import subprocess
import sys
import textwrap

PURE_MODULES = [
    "yarnflink.resourcemanager.slotmanager",
    "yarnflink.resourcemanager.resources",
    "yarnflink.resourcemanager.heartbeat",
    "yarnflink.jobmaster.slotpool",
    "yarnflink.jobmaster.reconciliation",
    "yarnflink.highavailability.epoch",
    "yarnflink.executiongraph.executiongraph",
    "yarnflink.scheduler.slotsharing",
    "yarnflink.scheduler.regions",
    "yarnflink.scheduler.strategy",
    "yarnflink.scheduler.failover",
    "yarnflink.scheduler.restart",
    "yarnflink.scheduler.scheduler",
    "yarnflink.scheduler.adaptive",
    "yarnflink.scheduler.adaptive_batch",
    "yarnflink.scheduler.speculative",
    "yarnflink.taskexecutor.slottable",
    "yarnflink.taskexecutor.leadership",
    "yarnflink.taskexecutor.cancellation",
    "yarnflink.jobgraph.jobgraph",
    "yarnflink.checkpoint.coordinator",
    "yarnflink.checkpoint.barriers",
    "yarnflink.checkpoint.assignment",
    "yarnflink.checkpoint.metadata",
    "yarnflink.checkpoint.cleanup",
    "yarnflink.state",
    "yarnflink.operators.watermarks",
    "yarnflink.metrics.checkpoint_stats",
    "yarnflink.operators.windows",
]
FORBIDDEN = ["grpc", "kazoo", "skein", "fsspec", "pyspark"]


def test_core_modules_import_without_io_libraries() -> None:
    code = textwrap.dedent(f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split('.')[0] in {FORBIDDEN!r}:
                    raise ImportError('forbidden import in the pure core: ' + name)
        sys.meta_path.insert(0, Block())
        for m in {PURE_MODULES!r}:
            __import__(m)
        print('ok')
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
