"""The chaos checker's look at what a run left behind: job states, committed output against the
failure-free one, in-progress and temporary files, ZooKeeper nodes, processes. Each check returns
a list of problems (empty: it held), so a run reports every broken promise at once."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from integration.chaos.measure import output_diff
from integration.chaos.workload import ChaosJob
from tests.oracles import committed

__all__ = ["check_jobs", "check_leftover_files", "check_processes", "check_zookeeper"]

#: names of files that are never meant to outlive the write that made them
_TEMPORARY = (".inprogress", ".tmp")


def check_jobs(jobs: Iterable[ChaosJob], states: dict[str, str]) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Every job FINISHED with exactly the failure-free output. Returns (problems, per job
    ``{"committed", "expected", "duplicates", "gaps"}``)."""
    problems: list[str] = []
    figures: dict[str, dict[str, Any]] = {}
    for job in jobs:
        state = states.get(job.job_id, "UNKNOWN")
        if state != "FINISHED":
            problems.append(f"job {job.name} ({job.job_id}) ended {state}, expected FINISHED")
        got = committed(job.out)
        expected = job.expected()
        dup, gaps = output_diff(got, expected)
        figures[job.name] = {"committed": len(got), "expected": len(expected), "duplicates": dup, "gaps": gaps}
        if dup or gaps:
            problems.append(
                f"job {job.name}: {len(got)} records committed, {len(expected)} expected: "
                f"{dup} duplicated or wrong, {gaps} missing"
            )
    return problems, figures


def _walk(root: Path) -> list[Path]:
    out: list[Path] = []
    for d, _dirs, files in os.walk(root):
        out += [Path(d) / f for f in files]
    return out


def check_leftover_files(jobs: Iterable[ChaosJob], checkpoint_roots: Iterable[Path]) -> list[str]:
    """No in-progress part file in a sink's directory and no temporary file on the checkpoint disk."""
    problems = []
    for job in jobs:
        stray = sorted(p.name for p in _walk(job.out) if p.name.endswith(_TEMPORARY))
        if stray:
            problems.append(f"job {job.name}: {len(stray)} in-progress files left in {job.out}: {stray[:5]}")
    for root in checkpoint_roots:
        files = _walk(root) if root.exists() else []
        stray = sorted(str(p.relative_to(root)) for p in files if any(t in p.name for t in _TEMPORARY))
        if stray:
            problems.append(f"{len(stray)} temporary files left under {root}: {stray[:5]}")
    return problems


def orphaned_checkpoints(keys: Iterable[str]) -> list[str]:
    """The ``<job>/chk-<n>`` directories among file paths or object keys (of jobs that finished:
    none should be left). A JobMaster deposed while it completed a checkpoint writes its
    ``_metadata`` but never gets its pointer into ZooKeeper, and deletes nothing (no file goes
    that a pointer may name); no one else knows of that checkpoint, so it stays."""
    out = set()
    for k in keys:
        head, sep, tail = k.partition("/chk-")
        if sep:
            out.add(f"{head.rsplit('/', 1)[-1]}/chk-{tail.split('/', 1)[0]}")
    return sorted(out)


def check_zookeeper(quorum: str, paths: Iterable[str]) -> list[str]:
    """None of ``paths`` (a finished job's nodes, a stopped session's root) exists."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=quorum, timeout=10)
    client.start(30)
    try:
        return [f"ZooKeeper node {p} left: {_tree(client, p)}" for p in paths if client.exists(p)]
    finally:
        client.stop()
        client.close()


def _tree(client: Any, path: str, depth: int = 3) -> Any:
    """The children of ``path`` as a nested dict (what a leak left, for the report)."""
    try:
        children = client.get_children(path)
    except Exception:  # noqa: BLE001 - gone meanwhile
        return {}
    return {c: (_tree(client, f"{path}/{c}", depth - 1) if depth > 1 else "...") for c in children}


def check_processes(pids: Iterable[int], marker: str) -> list[str]:
    """None of ``pids`` runs, and no process names ``marker`` (the run's directory) in its command line."""
    import psutil

    problems = []
    for pid in sorted(set(pids)):
        try:
            p = psutil.Process(pid)
            cmdline = " ".join(p.cmdline())
            # a pid of ours that is gone may name another process by now: only ours count
            if p.status() != psutil.STATUS_ZOMBIE and marker in cmdline:
                problems.append(f"process {pid} still runs: {cmdline[:200]}")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    me = os.getpid()
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        info: dict[str, Any] = p.info
        if info["pid"] == me or info["pid"] in pids or info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if marker in " ".join(info["cmdline"] or []):
            problems.append(f"process {info['pid']} of this run still runs: {' '.join(info['cmdline'])[:200]}")
    return problems
