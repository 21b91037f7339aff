"""``yarnflink logs``: the log (or stdout) of the master or of a TaskExecutor.

``--stdout`` without ``-t`` shows the master's stdout and every TaskExecutor's (what the job's
user functions print lands there), each under a ``==> id <==`` header.

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


NL = "\n"


def joined(parts: list[tuple[str, str]], lines: int | None) -> str:
    """Several processes' output, each (its last ``lines``) under a ``==> name <==`` header as
    ``tail`` shows several files; the empty ones are left out."""
    shown = [(name, tail(text, lines)) for name, text in parts if text]
    if len(shown) == 1:
        return shown[0][1]
    blocks = [f"==> {name} <==\n{text if text.endswith(NL) else text + NL}" for name, text in shown]
    return "".join(blocks)


# ---------------------------------------------------------------------------- over REST
def rest_log(rest: RestClient, taskexecutor: str | None, stdout: bool) -> str:
    kind = "stdout" if stdout else "log"
    if taskexecutor is None:
        return rest.get_text(f"/jobmanager/{kind}")
    tm = _pick([t["id"] for t in rest.taskmanagers()], taskexecutor)
    return rest.get_text(f"/taskmanagers/{tm}/{kind}")


def rest_all_stdout(rest: RestClient) -> list[tuple[str, str]]:
    """The master's stdout, then every TaskExecutor's: where what user functions print lands."""
    parts = [("master", rest.get_text("/jobmanager/stdout"))]
    for tm in sorted(t["id"] for t in rest.taskmanagers()):
        try:
            parts.append((tm, rest.get_text(f"/taskmanagers/{tm}/stdout")))
        except RestClientError:  # a TaskExecutor that just went, or one without a .out file
            continue
    return parts


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


def local_all_stdout(workdir: Path) -> list[tuple[str, str]]:
    if not workdir.is_dir():
        raise LogsError(f"no cluster directory {workdir}")
    parts: list[tuple[str, str]] = []
    try:
        parts.append(("master", local_log(workdir, None, True)))
    except LogsError:  # a cluster whose master wrote no .out file
        pass
    for tm in _local_taskexecutors(workdir):
        path = workdir / f"{tm}.out"
        if path.is_file():
            parts.append((tm, path.read_text(errors="replace")))
    return parts


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
    every_stdout = args.stdout and args.taskexecutor is None and not args.list
    parts: list[tuple[str, str]] | None = None
    if workdir is not None:
        listing = local_list(workdir) if args.list else None
        if every_stdout:
            parts = local_all_stdout(workdir)
        text = None if args.list or every_stdout else local_log(workdir, args.taskexecutor, args.stdout)
    else:
        assert rest_url is not None
        with RestClient(rest_url) as rest:
            listing = rest_list(rest) if args.list else None
            if every_stdout:
                parts = rest_all_stdout(rest)
            text = None if args.list or every_stdout else rest_log(rest, args.taskexecutor, args.stdout)
    if parts is not None:
        out.write(joined(parts, args.lines))
        out.flush()
        return
    if listing is not None:
        width = max((len(p) for p, _, _ in listing), default=6)
        for process, name, size in listing:
            print(f"{process:<{width}}  {name}  {size} bytes", file=out)
        return
    assert text is not None
    out.write(tail(text, args.lines))
    out.flush()
