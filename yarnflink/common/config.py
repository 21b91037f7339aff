"""Configuration with Flink's keys: the mechanism.

Options are declared beside the components that own them, as ``ConfigOption`` constants grouped in
classes named as in Flink (``yarnflink/checkpoint/options.py``: ``CheckpointingOptions.INTERVAL``;
``yarnflink/dispatcher/options.py``: ``RestOptions.PORT``; ...), and read through them:
``config.get(CheckpointingOptions.INTERVAL)``, or ``CheckpointingOptions.INTERVAL.read(values)`` for a
configuration shipped as a plain ``key -> str`` dict. ``yarnflink.options`` registers every one of
them in ``OPTIONS`` (an ``OptionRegistry``), which validates keys, lists the options for the REST
API and the docs, and suggests the closest key in unknown-key errors. This module imports no
component. Keys under ``PASSTHROUGH_PREFIXES`` are accepted without validation.

A ``Configuration`` stores strings (``key -> str``, as written by the user or canonicalised from
a typed value) and parses on ``get``:

* ``duration``: ``"10 s"``, ``"100ms"``, ``"5 min"``, ``"1 h"``; a plain number is milliseconds;
  ``get`` returns a ``datetime.timedelta``.
* ``memory``: ``"1728m"``, ``"1 gb"``, ``"64 kb"`` (binary units, as Flink: 1m = 1 MiB); a plain
  number is bytes; ``get`` returns an ``int`` number of bytes.
* ``enum``: case-insensitive, ``get`` returns the canonical choice.

``load_configuration`` reads ``yarnflink.yaml`` (flat ``key: value`` lines and/or nested maps, which
are flattened with dots as in Flink 1.19+'s ``config.yaml``) and then applies ``-D key=value``
overrides.
"""

from __future__ import annotations

import datetime
import difflib
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

__all__ = [
    "ConfigError",
    "ConfigOption",
    "Configuration",
    "OPTIONS",
    "OptionRegistry",
    "PASSTHROUGH_PREFIXES",
    "CONF_FILE_NAME",
    "CONF_DIR_ENV",
    "load_configuration",
    "parse_duration",
    "parse_memory",
    "format_duration",
    "format_memory",
    "option",
    "is_known_key",
]

CONF_FILE_NAME = "yarnflink.yaml"
CONF_DIR_ENV = "YARNFLINK_CONF_DIR"
DEFAULT_CONF_DIR = "conf"

#: Keys starting with one of these are stored as given, never validated.
PASSTHROUGH_PREFIXES: tuple[str, ...] = (
    "spark.",
    "env.java.",
    "metrics.",
    "yarnflink.test.",
    "containerized.master.env.",
    "containerized.taskmanager.env.",
)

OPTION_TYPES = ("int", "float", "bool", "str", "duration", "memory", "enum")
_PY_TYPES = {int: "int", float: "float", bool: "bool", str: "str"}


class ConfigError(ValueError):
    """A configuration key or value is invalid; the message says which and where it came from."""


# ----------------------------------------------------------------------------- parsing
_NUMBER_UNIT = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([^\s0-9.]*)\s*$")

_DURATION_UNITS_NS: dict[str, int] = {}
for _names, _ns in (
    (("ns", "nano", "nanos", "nanosecond", "nanoseconds"), 1),
    (("us", "µs", "micro", "micros", "microsecond", "microseconds"), 1_000),
    (("ms", "milli", "millis", "millisecond", "milliseconds"), 1_000_000),
    (("s", "sec", "secs", "second", "seconds"), 1_000_000_000),
    (("m", "min", "mins", "minute", "minutes"), 60 * 1_000_000_000),
    (("h", "hour", "hours"), 3600 * 1_000_000_000),
    (("d", "day", "days"), 86400 * 1_000_000_000),
):
    for _n in _names:
        _DURATION_UNITS_NS[_n] = _ns

_MEMORY_UNITS: dict[str, int] = {}
for _memory_names, _mult in (
    (("", "b", "bytes"), 1),
    (("k", "kb", "kib", "kibibytes"), 1 << 10),
    (("m", "mb", "mib", "mebibytes"), 1 << 20),
    (("g", "gb", "gib", "gibibytes"), 1 << 30),
    (("t", "tb", "tib", "tebibytes"), 1 << 40),
):
    for _n in _memory_names:
        _MEMORY_UNITS[_n] = _mult


def parse_duration(text: str | int | float | datetime.timedelta) -> datetime.timedelta:
    """``"10 s"``, ``"100ms"``, ``"5 min"``; a plain number (or an int) is milliseconds."""
    if isinstance(text, datetime.timedelta):
        return text
    if isinstance(text, bool):
        raise ValueError("not a duration")
    if isinstance(text, (int, float)):
        if text < 0 or not math.isfinite(text):
            raise ValueError("negative duration")
        return datetime.timedelta(milliseconds=text)
    m = _NUMBER_UNIT.match(str(text))
    if not m:
        raise ValueError(f"not a duration: {text!r}")
    amount, unit = float(m.group(1)), m.group(2).lower()
    if unit == "":
        unit = "ms"
    if unit not in _DURATION_UNITS_NS:
        raise ValueError(f"unknown time unit {m.group(2)!r}")
    return datetime.timedelta(microseconds=amount * _DURATION_UNITS_NS[unit] / 1000)


def parse_memory(text: str | int) -> int:
    """``"1728m"``, ``"1 gb"``, ``"64 kb"`` (binary units); a plain number is bytes. Returns bytes."""
    if isinstance(text, bool):
        raise ValueError("not a memory size")
    if isinstance(text, int):
        if text < 0:
            raise ValueError("negative memory size")
        return text
    m = _NUMBER_UNIT.match(str(text))
    if not m:
        raise ValueError(f"not a memory size: {text!r}")
    amount, unit = float(m.group(1)), m.group(2).lower()
    if unit not in _MEMORY_UNITS:
        raise ValueError(f"unknown memory unit {m.group(2)!r}")
    return int(round(amount * _MEMORY_UNITS[unit]))


def format_duration(value: datetime.timedelta) -> str:
    """Shortest exact form: ``"100 ms"``, ``"10 s"``, ``"5 min"``."""
    ns = (value // datetime.timedelta(microseconds=1)) * 1000
    for unit, size in (
        ("d", 86400 * 10**9),
        ("h", 3600 * 10**9),
        ("min", 60 * 10**9),
        ("s", 10**9),
        ("ms", 10**6),
        ("us", 10**3),
    ):
        if ns and ns % size == 0:
            return f"{ns // size} {unit}"
    return f"{ns} ns" if ns else "0 ms"


def format_memory(num_bytes: int) -> str:
    """Shortest exact form: ``"1728m"`` style, e.g. ``"1728 mb"``, ``"1 gb"``, ``"100 bytes"``."""
    for unit, size in (("tb", 1 << 40), ("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10)):
        if num_bytes and num_bytes % size == 0:
            return f"{num_bytes // size} {unit}"
    return f"{num_bytes} bytes"


_TRUE = {"true"}
_FALSE = {"false"}


# ----------------------------------------------------------------------------- options
@dataclass(frozen=True)
class ConfigOption:
    """One configuration key: its type, default and description.

    ``type`` is one of ``int, float, bool, str, duration, memory, enum`` (the Python types
    ``int/float/bool/str`` are accepted too). ``default`` may be given typed or as a string
    (``"100 ms"``); it is stored typed. ``choices`` (enum) are canonical spellings, matched
    case-insensitively.
    """

    key: str
    type: Any
    default: Any
    description: str
    choices: tuple[str, ...] | None = None
    min_value: float | None = None
    max_value: float | None = None
    deprecated_keys: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        t = _PY_TYPES.get(self.type, self.type)
        if t not in OPTION_TYPES:
            raise TypeError(f"ConfigOption {self.key!r}: unknown type {self.type!r}")
        object.__setattr__(self, "type", t)
        if t == "enum":
            if not self.choices:
                raise TypeError(f"ConfigOption {self.key!r}: enum needs choices")
            object.__setattr__(self, "choices", tuple(self.choices))
        if self.default is not None:
            object.__setattr__(self, "default", self.parse(self.default))

    # typed value <- string (or typed) value; raises ConfigError
    def parse(self, raw: Any, source: str | None = None) -> Any:
        try:
            value = self._parse(raw)
        except (ValueError, TypeError, OverflowError):
            raise ConfigError(
                f"invalid value {_show(raw)} for {self.key!r}: expected {self.expectation()}" + _from(source)
            ) from None
        if self.min_value is not None and value < self.min_value:
            raise ConfigError(
                f"invalid value {_show(raw)} for {self.key!r}: must be at least {_num(self.min_value)}" + _from(source)
            )
        if self.max_value is not None and value > self.max_value:
            raise ConfigError(
                f"invalid value {_show(raw)} for {self.key!r}: must be at most {_num(self.max_value)}" + _from(source)
            )
        return value

    def _parse(self, raw: Any) -> Any:
        t = self.type
        if t == "int":
            if isinstance(raw, bool):
                raise ValueError
            if isinstance(raw, int):
                return raw
            if isinstance(raw, float):
                if raw.is_integer():
                    return int(raw)
                raise ValueError
            return int(str(raw).strip())
        if t == "float":
            if isinstance(raw, bool):
                raise ValueError
            v = float(raw if isinstance(raw, (int, float)) else str(raw).strip())
            if not math.isfinite(v):
                raise ValueError
            return v
        if t == "bool":
            if isinstance(raw, bool):
                return raw
            s = str(raw).strip().lower()
            if s in _TRUE:
                return True
            if s in _FALSE:
                return False
            raise ValueError
        if t == "str":
            if isinstance(raw, (dict, list, tuple, set)):
                raise ValueError
            return str(raw)
        if t == "duration":
            return parse_duration(raw)
        if t == "memory":
            return parse_memory(raw)
        # enum
        s = str(getattr(raw, "name", raw)).strip()
        for c in self.choices or ():
            if c.lower() == s.lower():
                return c
        raise ValueError

    def to_string(self, value: Any, source: str | None = None) -> str:
        """Canonical string for a typed or string value (validated)."""
        if isinstance(value, str):
            self.parse(value, source)
            return value
        typed = self.parse(value, source)
        if self.type == "bool":
            return "true" if typed else "false"
        if self.type == "duration":
            return format_duration(typed)
        if self.type == "memory":
            return format_memory(typed)
        return str(typed)

    def expectation(self) -> str:
        return {
            "int": "an integer",
            "float": "a number",
            "bool": "true or false",
            "str": "a string",
            "duration": "a duration such as '10 s', '100 ms' or '5 min' (a plain number is milliseconds)",
            "memory": "a memory size such as '1728m', '512 mb' or '1 gb' (a plain number is bytes)",
            "enum": "one of " + ", ".join(self.choices or ()),
        }[self.type]

    def default_string(self) -> str | None:
        """The default as a user would write it (None if no default)."""
        if self.default is None:
            return None
        return self.to_string(self.default)

    def describe(self) -> dict[str, Any]:
        """JSON-friendly description (for REST ``/config`` and docs)."""
        d: dict[str, Any] = {
            "key": self.key,
            "type": self.type,
            "default": self.default_string(),
            "description": self.description,
        }
        if self.choices:
            d["choices"] = list(self.choices)
        return d

    def read(self, values: Mapping[str, Any] | Configuration, source: str | None = None) -> Any:
        """Typed value of this option in a plain ``key -> value`` mapping (a job or task
        configuration shipped as a dict) or in a ``Configuration``: the entry parsed, else the
        default. A bad value raises ``ConfigError`` naming the key."""
        if isinstance(values, Configuration):
            return values.get(self)
        if self.key in values:
            return self.parse(values[self.key], source)
        return self.default


def _show(raw: Any) -> str:
    return repr(raw if isinstance(raw, str) else str(raw))


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _from(source: str | None) -> str:
    return f" (from {source})" if source else ""


class OptionRegistry(Mapping[str, ConfigOption]):
    """Every option a process knows, by key: what ``Configuration`` validates keys against, what the
    REST API and the docs list, and where unknown-key errors find their suggestion.

    The options themselves are declared beside the components that own them
    (``yarnflink/<package>/options.py``, as classes of ``ConfigOption`` constants such as
    ``CheckpointingOptions``); ``yarnflink.options`` registers all of them in ``OPTIONS``. This
    module imports none of them, so every package can import it.
    """

    def __init__(self, passthrough_prefixes: tuple[str, ...] = PASSTHROUGH_PREFIXES) -> None:
        self._options: dict[str, ConfigOption] = {}
        self.passthrough_prefixes = passthrough_prefixes

    def register(self, *groups: type) -> None:
        """Add the ``ConfigOption`` constants of each class in ``groups`` (in declaration order)."""
        for group in groups:
            for value in vars(group).values():
                if isinstance(value, ConfigOption):
                    self.add(value)

    def add(self, opt: ConfigOption) -> None:
        known = self._options.get(opt.key)
        if known is opt:
            return
        if known is not None:
            raise RuntimeError(f"duplicate option {opt.key}")
        self._options[opt.key] = opt

    def __getitem__(self, key: str) -> ConfigOption:
        return self._options[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._options)

    def __len__(self) -> int:
        return len(self._options)

    def is_known_key(self, key: str) -> bool:
        return key in self._options or key.startswith(self.passthrough_prefixes)

    def unknown_key_error(self, key: str, source: str | None = None) -> ConfigError:
        msg = f"unknown configuration key {key!r}{_from(source)}"
        match = difflib.get_close_matches(key, list(self._options), n=1, cutoff=0.6)
        if not match:
            # also try case-insensitively (taskmanager.numberoftaskslots)
            lowered = {k.lower(): k for k in self._options}
            m2 = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.6)
            match = [lowered[m2[0]]] if m2 else []
        if match:
            msg += f"; did you mean {match[0]!r}?"
        else:
            msg += (
                "; known keys are listed in yarnflink.options (keys starting with "
                + ", ".join(repr(p) for p in self.passthrough_prefixes)
                + " are passed through)"
            )
        return ConfigError(msg)


#: The process's registry. Empty until ``yarnflink.options`` is imported, which ``import yarnflink``
#: does first thing, so it is complete whenever any yarnflink module is in use.
OPTIONS = OptionRegistry()


def option(key: str) -> ConfigOption:
    """The registered option for ``key`` (KeyError if unknown)."""
    return OPTIONS[key]


def is_known_key(key: str) -> bool:
    return OPTIONS.is_known_key(key)


# ----------------------------------------------------------------------------- Configuration
_MISSING: Any = object()
OptionOrKey = Union[ConfigOption, str]


class Configuration:
    """String-valued key/value configuration, parsed on ``get`` according to ``OPTIONS``.

    ``set`` and ``from_dict`` validate: unknown keys (outside ``PASSTHROUGH_PREFIXES``) and
    unparsable values raise ``ConfigError``.
    """

    def __init__(self, values: Mapping[str, Any] | None = None, *, source: str | None = None):
        self._data: dict[str, str] = {}
        if values:
            for k, v in values.items():
                self.set(k, v, source=source)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, values: Mapping[str, Any], *, source: str | None = None) -> Configuration:
        return cls(values, source=source)

    def copy(self) -> Configuration:
        c = Configuration()
        c._data = dict(self._data)
        return c

    def update(self, other: Configuration | Mapping[str, Any], *, source: str | None = None) -> Configuration:
        """Apply ``other``'s entries on top of this configuration (in place); returns self."""
        if isinstance(other, Configuration):
            self._data.update(other._data)
        else:
            for k, v in other.items():
                self.set(k, v, source=source)
        return self

    def merged(self, other: Configuration | Mapping[str, Any]) -> Configuration:
        """A new configuration: this one overridden by ``other``."""
        return self.copy().update(other)

    # ------------------------------------------------------------------ access
    @staticmethod
    def _resolve(key: OptionOrKey) -> tuple[str, ConfigOption | None]:
        if isinstance(key, ConfigOption):
            return key.key, key
        if not isinstance(key, str):
            raise TypeError(f"configuration key must be a string or ConfigOption, got {type(key).__name__}")
        return key, OPTIONS.get(key)

    def set(self, key: OptionOrKey, value: Any, *, source: str | None = None) -> Configuration:
        """Set ``key`` (a ConfigOption or key string) to ``value`` (typed or string); validated.
        Returns self, so calls can be chained."""
        k, opt = self._resolve(key)
        if opt is None:
            if not k.startswith(PASSTHROUGH_PREFIXES):
                raise OPTIONS.unknown_key_error(k, source)
            self._data[k] = _plain_string(value)
            return self
        if value is None:
            raise ConfigError(f"invalid value None for {k!r}: expected {opt.expectation()}{_from(source)}")
        self._data[k] = opt.to_string(value, source)
        return self

    def get(self, key: OptionOrKey, default: Any = _MISSING) -> Any:
        """Typed value of ``key``: the set value parsed, else ``default`` if given, else the
        option's default. Unregistered (pass-through) keys return the raw string."""
        k, opt = self._resolve(key)
        if k in self._data:
            if opt is None:
                return self._data[k]
            return opt.parse(self._data[k])
        if default is not _MISSING:
            return default
        return opt.default if opt is not None else None

    def get_string(self, key: OptionOrKey, default: str | None = None) -> str | None:
        """The raw string (as set), or the option's default as a string, or ``default``."""
        k, opt = self._resolve(key)
        if k in self._data:
            return self._data[k]
        if default is not None:
            return default
        return opt.default_string() if opt is not None else None

    def get_seconds(self, key: OptionOrKey) -> float | None:
        """A duration option in seconds (float)."""
        v = self.get(key)
        return None if v is None else v.total_seconds()

    def contains(self, key: OptionOrKey) -> bool:
        """True if ``key`` was set explicitly."""
        return self._resolve(key)[0] in self._data

    __contains__ = contains

    def remove(self, key: OptionOrKey) -> bool:
        return self._data.pop(self._resolve(key)[0], None) is not None

    def to_dict(self, include_defaults: bool = False) -> dict[str, str]:
        """Explicitly set entries as ``str -> str`` (plus every option's default if asked)."""
        out: dict[str, str] = {}
        if include_defaults:
            for k, o in OPTIONS.items():
                d = o.default_string()
                if d is not None:
                    out[k] = d
        out.update(self._data)
        return out

    def keys(self) -> Iterable[str]:
        return self._data.keys()

    def items(self) -> Iterable[tuple[str, str]]:
        return self._data.items()

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Configuration) and other._data == self._data

    def __repr__(self) -> str:
        return f"Configuration({self._data!r})"


def _plain_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ";".join(_plain_string(v) for v in value)
    if isinstance(value, datetime.timedelta):
        return format_duration(value)
    return str(value)


# ----------------------------------------------------------------------------- loading
def _flatten_yaml(data: Any, source: str) -> list[tuple[str, Any]]:
    if data is None:
        return []
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a map of configuration keys at the top level, got {type(data).__name__}")
    out: list[tuple[str, Any]] = []

    def walk(prefix: str, node: dict[Any, Any]) -> None:
        for k, v in node.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict):
                if not v:
                    raise ConfigError(f"{source}: key {key!r} has an empty map as value")
                walk(key, v)
            else:
                out.append((key, v))

    walk("", data)
    return out


def _yaml_scalar(key: str, value: Any, source: str) -> Any:
    if value is None:
        raise ConfigError(f"{source}: key {key!r} has no value")
    if isinstance(value, (list, tuple)):
        return ";".join(_plain_string(v) for v in value)
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return value


def read_yaml_file(path: str) -> list[tuple[str, Any]]:
    """Flattened ``(key, value)`` pairs of a yarnflink.yaml / Flink config.yaml file."""
    import yaml  # local: config is imported by light-weight modules

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except FileNotFoundError:
        raise ConfigError(f"configuration file {path!r} does not exist") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"configuration file {path!r} is not valid YAML: {e}") from None
    return _flatten_yaml(data, path)


def parse_dynamic_property(entry: str) -> tuple[str, str]:
    """``"key=value"`` (or ``"-Dkey=value"``) -> ``(key, value)``."""
    s = entry.strip()
    if s.startswith("-D"):
        s = s[2:]
    key, sep, value = s.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"invalid dynamic property {entry!r} (from -D): expected key=value")
    return key, value.strip()


def load_configuration(
    conf_file: str | None = None,
    dynamic: Sequence[str] = (),
    conf_dir: str | None = None,
) -> Configuration:
    """Configuration from a YAML file plus ``-D key=value`` overrides (which win).

    ``conf_file`` (``--conf``) must exist. Without it, ``<conf_dir>/yarnflink.yaml`` is read if it
    exists, where ``conf_dir`` defaults to ``$YARNFLINK_CONF_DIR``, else ``conf/`` relative to the
    current directory.
    """
    conf = Configuration()
    if conf_file is not None:
        path, source = os.fspath(conf_file), f"--conf {os.fspath(conf_file)}"
    else:
        d = conf_dir or os.environ.get(CONF_DIR_ENV) or DEFAULT_CONF_DIR
        path = os.path.join(os.fspath(d), CONF_FILE_NAME)
        source = path
        if not os.path.isfile(path):
            path = None  # type: ignore[assignment]
    if path is not None:
        seen: set[str] = set()
        for key, value in read_yaml_file(path):
            if key in seen:
                raise ConfigError(f"configuration key {key!r} is given twice (from {source})")
            seen.add(key)
            conf.set(key, _yaml_scalar(key, value, source), source=source)
    for entry in dynamic:
        key, value = parse_dynamic_property(entry)
        conf.set(key, value, source="-D")
    return conf
