"""Options live beside their components and are read through their typed constants.

Every option is a ``ConfigOption`` constant in an options class of ``yarnflink/<package>/options.py``,
registered by ``yarnflink.options``; code reads it as ``config.get(CheckpointingOptions.INTERVAL)`` or
``CheckpointingOptions.INTERVAL.read(values)``, never by spelling its key.
"""

from __future__ import annotations

import ast
import datetime
import importlib
import inspect
from pathlib import Path

import pytest

import yarnflink
from yarnflink.checkpoint.options import CheckpointingOptions
from yarnflink.common.config import OPTIONS, ConfigError, ConfigOption, Configuration, OptionRegistry
from yarnflink.options import OPTION_GROUPS

PACKAGE = Path(yarnflink.__file__).parent
ROOT = PACKAGE.parent

#: Files or directories (relative to the repository) whose key literals are justified, with the reason.
#: Keys under PASSTHROUGH_PREFIXES that no option declares (``spark.master``, ``env.java.opts``) are
#: not registered keys, so they need no entry here.
EXCEPTIONS: dict[str, str] = {}


def _options_modules() -> set[Path]:
    files = {Path(inspect.getfile(group)) for group in OPTION_GROUPS}
    return files | {PACKAGE / "options.py", PACKAGE / "common" / "config.py"}


def _exempt(path: Path) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    return any(rel == e or rel.startswith(e + "/") for e in EXCEPTIONS)


def _allowed_strings(tree: ast.AST) -> set[int]:
    """ids of docstrings and of ``help=`` texts: prose may name a key."""
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                allowed.add(id(first.value))
        elif isinstance(node, ast.keyword) and node.arg == "help":
            allowed.update(id(n) for n in ast.walk(node.value))
    return allowed


def key_literals(source: str, name: str, keys: set[str]) -> list[str]:
    """``name:line: 'key'`` for each literal equal to one of ``keys`` outside docstrings and help texts."""
    tree = ast.parse(source, name)
    allowed = _allowed_strings(tree)
    return [
        f"{name}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in keys and id(node) not in allowed
    ]


def test_no_key_is_spelled_outside_the_options_modules() -> None:
    keys = set(OPTIONS)
    skip = _options_modules()
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path not in skip and not _exempt(path):
            found += key_literals(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)), keys)
    assert not found, "read these keys through their ConfigOption constants:\n" + "\n".join(found)


def test_the_scan_finds_a_spelled_key_but_not_prose() -> None:
    source = (
        '"""Reads execution.checkpointing.interval, "execution.checkpointing.interval"."""\n'
        'parser.add_argument("--interval", help="execution.checkpointing.interval")\n'
        'interval = config.get("execution.checkpointing.interval")\n'
    )
    assert key_literals(source, "probe.py", set(OPTIONS)) == ["probe.py:3: 'execution.checkpointing.interval'"]


def test_options_modules_import_only_the_mechanism() -> None:
    # so that any package may import any component's options without an import cycle
    for path in sorted(_options_modules() - {PACKAGE / "options.py", PACKAGE / "common" / "config.py"}):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(a.name for a in node.names)
        assert {m for m in imported if m.startswith("yarnflink")} <= {"yarnflink.common.config"}, path


def test_every_declared_option_is_registered() -> None:
    registered = set(OPTION_GROUPS)
    for path in sorted(PACKAGE.rglob("options.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if name == "yarnflink.options":
            continue
        module = importlib.import_module(name)
        for group in vars(module).values():
            if inspect.isclass(group) and group.__module__ == name:
                if any(isinstance(v, ConfigOption) for v in vars(group).values()):
                    assert group in registered, f"{name}.{group.__name__} is missing from OPTION_GROUPS"
    for group in OPTION_GROUPS:
        for value in vars(group).values():
            if isinstance(value, ConfigOption):
                assert OPTIONS[value.key] is value


def test_an_option_reads_a_plain_dict_configuration() -> None:
    # task and job configurations travel as key -> str dicts
    interval = CheckpointingOptions.INTERVAL
    assert interval.read({"execution.checkpointing.interval": "10 s"}) == datetime.timedelta(seconds=10)
    assert interval.read({}) is None
    assert CheckpointingOptions.MAX_CONCURRENT_CHECKPOINTS.read({}) == 1
    assert CheckpointingOptions.INTERVAL.read(Configuration({"execution.checkpointing.interval": "1 min"})) == (
        datetime.timedelta(minutes=1)
    )
    with pytest.raises(ConfigError) as e:
        interval.read({"execution.checkpointing.interval": "soon"}, "job configuration")
    assert str(e.value).startswith("invalid value 'soon' for 'execution.checkpointing.interval': expected a duration")
    assert str(e.value).endswith("(from job configuration)")


def test_a_registry_refuses_two_options_with_one_key() -> None:
    class One:
        A = ConfigOption("x.a", "int", 1, "first")

    class Other:
        A = ConfigOption("x.a", "int", 2, "second")

    registry = OptionRegistry()
    registry.register(One, One)  # the same constant twice is harmless
    assert list(registry) == ["x.a"] and registry["x.a"] is One.A
    with pytest.raises(RuntimeError, match="duplicate option x.a"):
        registry.register(Other)
    assert registry.is_known_key("spark.executor.memory") and not registry.is_known_key("x.b")
    assert (
        str(registry.unknown_key_error("x.aa", "-D"))
        == "unknown configuration key 'x.aa' (from -D); did you mean 'x.a'?"
    )
