"""``Row``: a record with positional fields and optional names (PyFlink's ``pyflink.common.Row``).

``Row(1, "x")`` has positions only; ``Row(id=1, info="x")`` names its fields (sorted by name, as
PyFlink does); ``Types.ROW_NAMED(["id", "info"], ...)`` turns tuples into named rows. Fields are
read as ``row.info``, ``row["info"]`` or ``row[1]``; ``Row("id", "info")`` used as a class builds
named rows: ``Person = Row("name", "age"); Person("Alice", 11)``.

Rows travel between operators pickled (yarnflink's record model keeps tuples and dicts columnar;
a Row is neither, so its names survive the network).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from typing import Any


class RowKind(enum.Enum):
    """The change a row stands for; the DataStream API only makes INSERT rows."""

    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    def short_string(self) -> str:
        return ("+I", "-U", "+U", "-D")[self.value]


def _make_row(names: Sequence[str] | None, values: Sequence[Any], kind: RowKind) -> Row:
    row = Row(*values)
    if names is not None:
        row.set_field_names(list(names))
    row.set_row_kind(kind)
    return row


class Row:
    """A row of values, optionally with field names."""

    __slots__ = ("_values", "_fields", "_row_kind")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError("a Row takes positional values or named values, not both")
        fields: list[str] | None = None
        if kwargs:
            fields = sorted(kwargs)
            values = [kwargs[n] for n in fields]
        else:
            values = list(args)
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_fields", fields)
        object.__setattr__(self, "_row_kind", RowKind.INSERT)

    # ------------------------------------------------------------------ names and kind
    def set_field_names(self, field_names: Sequence[str]) -> None:
        names = list(field_names)
        if not all(isinstance(n, str) for n in names):
            raise TypeError(f"Row field names must be strings, got {names!r}")
        object.__setattr__(self, "_fields", names)

    def get_field_names(self) -> list[str] | None:
        return list(self._fields) if self._fields is not None else None

    def get_row_kind(self) -> RowKind:
        return self._row_kind

    def set_row_kind(self, row_kind: RowKind) -> None:
        if not isinstance(row_kind, RowKind):
            raise TypeError(f"set_row_kind() needs a RowKind, got {row_kind!r}")
        object.__setattr__(self, "_row_kind", row_kind)

    def as_dict(self, recursive: bool = False) -> dict[str, Any]:
        if self._fields is None:
            raise TypeError("as_dict() needs a Row with field names")

        def conv(v: Any) -> Any:
            if not recursive:
                return v
            if isinstance(v, Row):
                return v.as_dict(True)
            if isinstance(v, list):
                return [conv(x) for x in v]
            if isinstance(v, dict):
                return {k: conv(x) for k, x in v.items()}
            return v

        return {k: conv(v) for k, v in zip(self._fields, self._values)}

    # ------------------------------------------------------------------ access
    def _index(self, name: str) -> int:
        if self._fields is None or name not in self._fields:
            raise KeyError(name)
        return self._fields.index(name)

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, (int, slice)):
            return self._values[item]
        return self._values[self._index(item)]

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, (int, slice)):
            self._values[key] = value
        else:
            self._values[self._index(key)] = value

    def __getattr__(self, item: str) -> Any:
        if item.startswith("_"):
            raise AttributeError(item)
        fields = object.__getattribute__(self, "_fields")
        if fields is None or item not in fields:
            raise AttributeError(f"Row has no field {item!r} (fields: {fields})")
        return self._values[fields.index(item)]

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"a Row's fields are set with row[{key!r}] = value")

    def __call__(self, *args: Any) -> Row:
        """A Row of names used as a class: ``Person = Row("name", "age"); Person("Alice", 11)``."""
        if len(args) > len(self):
            raise ValueError(f"cannot create a Row with fields {self!r}: expected {len(self)} values, got {args!r}")
        return _make_row([str(v) for v in self._values], args, self._row_kind)

    def __contains__(self, item: Any) -> bool:
        return item in self._values  # PyFlink's rule: values, not names

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Row)
            and self._fields == other._fields
            and self._row_kind == other._row_kind
            and self._values == other._values
        )

    def __hash__(self) -> int:
        return hash(tuple(self._values))

    def __reduce__(self) -> Any:
        return _make_row, (self._fields, tuple(self._values), self._row_kind)

    def __repr__(self) -> str:
        if self._fields is not None:
            return "Row(" + ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self._values)) + ")"
        return "<Row(" + ", ".join(repr(v) for v in self._values) + ")>"
