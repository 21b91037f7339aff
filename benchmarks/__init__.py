"""Benchmarks of yarnflink (not shipped with the package): ``scripts/bench --suite NAME`` runs
``python -m benchmarks.NAME`` from the repository's root; docs/PERFORMANCE.md has the figures."""
