"""Put on the PYTHONPATH of the chaos run's cluster processes (integration/chaos/runner.py): makes
``chaosfile://`` (integration/chaos/faultfs.py, the checkpoint disk that the injector can make full,
read-only or slow) known to fsspec in every process. The class loads on the first use."""

import os

if os.environ.get("YARNFLINK_CHAOS_FS_CONTROL"):
    try:
        import fsspec

        fsspec.register_implementation("chaosfile", "integration.chaos.faultfs.ChaosFileSystem", clobber=True)
    except ImportError:
        pass
