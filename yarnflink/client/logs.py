"""``yarnflink logs``: the log (or stdout) of the master or of a TaskExecutor.

Logs live in the cluster's working directory: ``master.log`` / ``master.out`` and one
``<taskexecutor id>.log`` / ``.out`` per TaskExecutor. A running cluster serves them over REST
(``/jobmanager/log``, ``/taskmanagers/{id}/log``, ... as Flink does); a stopped session's or a
per-job cluster's are read from its directory.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, TextIO

from yarnflink.client.rest_client import RestClient, RestClientError
from yarnflink.client.sessions import find_session


class LogsError(Exception):
    """The log asked for does not exist; the message says what does."""


def tail(text: str, lines: int | None) -> str:
    if lines is None:
        return text
    if lines <= 0:
        return ""
    return "".join(text.splitlines(keepends=True)[-lines:])


def _matches(tm_id: str, wanted: str) -> bool:
    if wanted.isdigit():  # TaskExecutor number N: taskexecutor-N or taskexecutor-N-<suffix>
        return re.fullmatch(rf"taskexecutor-{int(wanted)}(-.*)?", tm_id) is not None
    return tm_id == wanted or tm_id.startswith(wanted)


def _pick(ids: list[str], wanted: str) -> str:
    exact = [i for i in ids if i == wanted]
    found = exact or [i for i in ids if _matches(i, wanted)]
    if len(found) == 1:
        return found[0]
    known = ", ".join(sorted(ids)) or "none"
    if not found:
        raise LogsError(f"no TaskExecutor {wanted!r}; the TaskExecutors are: {known}")
    raise LogsError(f"{wanted!r} matches several TaskExecutors: {', '.join(sorted(found))}")


# ---------------------------------------------------------------------------- over REST
def rest_log(rest: RestClient, taskexecutor: str | None, stdout: bool) -> str:
    kind = "stdout" if stdout else "log"
    if taskexecutor is None:
        return rest.get_text(f"/jobmanager/{kind}")
    tm = _pick([t["id"] for t in rest.taskmanagers()], taskexecutor)
    return rest.get_text(f"/taskmanagers/{tm}/{kind}")


def rest_list(rest: RestClient) -> list[tuple[str, str, int]]:
    """(process, file name, size) of every log file."""
    out = [("master", f["name"], int(f["size"])) for f in rest.get_json("/jobmanager/logs")["logs"]]
    for tm in rest.taskmanagers():
        try:
            logs = rest.get_json(f"/taskmanagers/{tm['id']}/logs")["logs"]
        except RestClientError:
            continue
        out.extend((tm["id"], f["name"], int(f["size"])) for f in logs)
    return out


# ---------------------------------------------------------------------------- in a directory
def _local_taskexecutors(workdir: Path) -> list[str]:
    return sorted({p.stem for p in workdir.glob("taskexecutor-*") if p.suffix in (".log", ".out")})


def local_log(workdir: Path, taskexecutor: str | None, stdout: bool) -> str:
    if not workdir.is_dir():
        raise LogsError(f"no cluster directory {workdir}")
    stem = "master" if taskexecutor is None else _pick(_local_taskexecutors(workdir), taskexecutor)
    path = workdir / f"{stem}.{'out' if stdout else 'log'}"
    if stem == "master" and not path.is_file():  # an HA session: master-<i>, the last one written
        masters = sorted(workdir.glob(f"master-*.{'out' if stdout else 'log'}"), key=lambda p: p.stat().st_mtime)
        path = masters[-1] if masters else path
    if not path.is_file():
        raise LogsError(f"{path} does not exist")
    return path.read_text(errors="replace")


def local_list(workdir: Path) -> list[tuple[str, str, int]]:
    files = sorted(p for p in workdir.glob("*") if p.suffix in (".log", ".out") and p.is_file())
    return [(p.stem, p.name, p.stat().st_size) for p in files]


# ---------------------------------------------------------------------------- the command
def run_logs(args: Any, rest_url: str | None, out: TextIO = sys.stdout) -> None:
    """``args``: taskexecutor, stdout, lines, list, workdir, session (see ``yarnflink logs -h``)."""
    workdir: Path | None = args.workdir
    if workdir is None and rest_url is None:
        session = find_session(args.session)
        if session is None:
            raise LogsError("no cluster: pass -m URL, --session ID or --workdir DIR (see 'yarnflink session list')")
        if session.alive:
            rest_url = session.rest_url
        else:
            workdir = Path(session.workdir)
    if workdir is not None:
        listing = local_list(workdir) if args.list else None
        text = None if args.list else local_log(workdir, args.taskexecutor, args.stdout)
    else:
        assert rest_url is not None
        with RestClient(rest_url) as rest:
            listing = rest_list(rest) if args.list else None
            text = None if args.list else rest_log(rest, args.taskexecutor, args.stdout)
    if listing is not None:
        width = max((len(p) for p, _, _ in listing), default=6)
        for process, name, size in listing:
            print(f"{process:<{width}}  {name}  {size} bytes", file=out)
        return
    assert text is not None
    out.write(tail(text, args.lines))
    out.flush()
