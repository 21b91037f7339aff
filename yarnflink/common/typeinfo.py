"""Type information (PyFlink's ``Types``): what a stream's records are.

yarnflink's records are plain Python values whatever their type, so a type information does two
things only, both where PyFlink's type changes what the user sees:

* ``from_python(value)``: the record a typed operator hands on (PyFlink decodes it with the type's
  serializer): a ``ROW`` / ``ROW_NAMED`` type turns tuples and lists into ``Row`` records with
  field names, ``TUPLE`` turns rows and lists into tuples, ``FLOAT``/``DOUBLE`` turn ints into
  floats; other values pass unchanged.
* ``to_string(value)``: how ``print()`` and a FileSink's string encoder show a typed record, as
  Flink's Java ``toString`` does (``(hi,1)`` for a tuple, ``+I[1, hi]`` for a row, ``true``,
  ``1.0E7``); untyped records (``None`` or ``PICKLED_BYTE_ARRAY``) print as ``str(value)``. One
  exception, PyFlink's own: ``print()`` of a ``ROW`` / ``ROW_NAMED`` stream formats each Row in
  Python (``RowTypeInfo.print_string``: ``+I[BERLIN,54.5]``).
"""

from __future__ import annotations

import datetime
import decimal
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from yarnflink.common.row import Row


def java_double_string(x: float) -> str:
    """Java's ``Double.toString``: plain from 1e-3 up to 1e7, else ``d.dddE±n``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        s = repr(float(x))
        if "e" in s or "E" in s:  # repr uses exponents below 1e-4 only; not in this range
            s = format(decimal.Decimal(s), "f")
        return s if "." in s else s + ".0"
    sign, digits, exp = decimal.Decimal(repr(float(x))).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    e = int(exp) + len(digits) - 1
    mantissa = ds[0] + "." + (ds[1:] or "0")
    return ("-" if sign else "") + f"{mantissa}E{e}"


def to_float32(x: float) -> float:
    """``x`` rounded to the nearest 32-bit float."""
    if math.isnan(x) or math.isinf(x):
        return x
    try:
        return float(struct.unpack("f", struct.pack("f", x))[0])
    except OverflowError:
        return math.copysign(math.inf, x)


def float32_shortest(x: float) -> float:
    """The shortest decimal that rounds to the same 32-bit float as ``x`` (what Java prints)."""
    f = to_float32(x)
    if math.isnan(f) or math.isinf(f) or f == 0:
        return f
    for digits in range(1, 10):
        candidate = float(f"{f:.{digits}g}")
        if to_float32(candidate) == f:
            return candidate
    return f


def java_string(value: Any) -> str:
    """Java's ``String.valueOf`` of a Python value with no type information of its own."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_string(value)
    if isinstance(value, Row):
        return value.get_row_kind().short_string() + "[" + ", ".join(java_string(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ",".join(java_string(v) for v in value) + ")"
    if isinstance(value, list):
        return "[" + ", ".join(java_string(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{java_string(k)}={java_string(v)}" for k, v in value.items()) + "}"
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    return str(value)


class TypeInformation:
    """Base of every type information."""

    def from_python(self, value: Any) -> Any:
        return value

    def to_string(self, value: Any) -> str:
        return java_string(value)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash(repr(self))


class BasicTypeInfo(TypeInformation):
    """STRING, INT, LONG, DOUBLE, ... (``Types.INT()``)."""

    def __init__(self, name: str):
        self.name = name

    def from_python(self, value: Any) -> Any:
        if self.name == "FLOAT" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return to_float32(float(value))  # PyFlink's FLOAT is a 32-bit float
        if self.name == "DOUBLE" and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value

    def to_string(self, value: Any) -> str:
        if value is None:
            return "null"
        if self.name == "FLOAT" and isinstance(value, (int, float)):
            return java_double_string(float32_shortest(float(value)))  # Java's Float.toString
        if self.name == "DOUBLE" and isinstance(value, (int, float)):
            return java_double_string(float(value))
        if self.name == "SQL_TIMESTAMP" and isinstance(value, datetime.datetime):
            s = value.strftime("%Y-%m-%d %H:%M:%S")
            frac = f"{value.microsecond:06d}".rstrip("0") or "0"
            return f"{s}.{frac}"
        return java_string(value)

    def __repr__(self) -> str:
        return f"Types.{self.name}()"


class PickledBytesTypeInfo(TypeInformation):
    """Any Python object (PyFlink's default when no type is given): printed with ``str()``."""

    def to_string(self, value: Any) -> str:
        return value if isinstance(value, str) else str(value)

    def __repr__(self) -> str:
        return "Types.PICKLED_BYTE_ARRAY()"


def _field_types(field_types: Any, what: str) -> list[TypeInformation]:
    if not isinstance(field_types, (list, tuple)) or not all(isinstance(t, TypeInformation) for t in field_types):
        raise TypeError(
            f"{what} needs a list of type informations such as [Types.INT(), Types.STRING()], got {field_types!r}"
        )
    return list(field_types)


def _values_of(value: Any, n: int, what: str) -> list[Any]:
    if isinstance(value, (tuple, list, Row)):
        values = list(value)
    elif isinstance(value, dict):
        values = list(value.values())
    else:
        raise TypeError(
            f"a {what} record must be a tuple, list or Row of {n} fields, got {type(value).__name__} {value!r}"
        )
    if len(values) != n:
        raise ValueError(f"a {what} record needs {n} fields, got {len(values)}: {value!r}")
    return values


class TupleTypeInfo(TypeInformation):
    def __init__(self, field_types: Sequence[TypeInformation]):
        self.field_types = _field_types(field_types, "Types.TUPLE()")

    def from_python(self, value: Any) -> Any:
        values = _values_of(value, len(self.field_types), "Types.TUPLE()")
        return tuple(t.from_python(v) for t, v in zip(self.field_types, values))

    def to_string(self, value: Any) -> str:
        if not isinstance(value, (tuple, list, Row)) or len(value) != len(self.field_types):
            return java_string(value)
        return "(" + ",".join(t.to_string(v) for t, v in zip(self.field_types, value)) + ")"

    def __repr__(self) -> str:
        return f"Types.TUPLE({self.field_types!r})"


class RowTypeInfo(TypeInformation):
    def __init__(self, field_types: Sequence[TypeInformation], field_names: Sequence[str] | None = None):
        self.field_types = _field_types(field_types, "Types.ROW()")
        if field_names is not None:
            names = list(field_names)
            if not all(isinstance(n, str) and n for n in names):
                raise TypeError(f"Types.ROW_NAMED() needs field names as non-empty strings, got {names!r}")
            if len(names) != len(self.field_types) or len(set(names)) != len(names):
                raise ValueError(
                    f"Types.ROW_NAMED(): {len(names)} distinct names for {len(self.field_types)} types needed, "
                    f"got {names!r}"
                )
            self.field_names = names
        else:
            self.field_names = [f"f{i}" for i in range(len(self.field_types))]

    def get_field_names(self) -> list[str]:
        return list(self.field_names)

    def get_field_index(self, field_name: str) -> int:
        return self.field_names.index(field_name)

    def get_field_types(self) -> list[TypeInformation]:
        return list(self.field_types)

    def from_python(self, value: Any) -> Any:
        if isinstance(value, dict):
            value = [value[n] if n in value else None for n in self.field_names]
        values = _values_of(value, len(self.field_types), "Types.ROW()")
        row = Row(*(t.from_python(v) for t, v in zip(self.field_types, values)))
        row.set_field_names(self.field_names)
        if isinstance(value, Row):
            row.set_row_kind(value.get_row_kind())
        return row

    def to_string(self, value: Any) -> str:
        if not isinstance(value, (tuple, list, Row)) or len(value) != len(self.field_types):
            return java_string(value)
        kind = value.get_row_kind().short_string() if isinstance(value, Row) else "+I"
        return kind + "[" + ", ".join(t.to_string(v) for t, v in zip(self.field_types, value)) + "]"

    def print_string(self, value: Any) -> str:
        """How PyFlink's ``print()`` shows a record of this type: it formats a Row in Python
        before the Java sink sees it, as ``<kind>[<str(field)>,...]`` (``+I[BERLIN,54.5]``,
        ``+I[True,None]``), not as Java's ``Row.toString`` (``+I[BERLIN, 54.5]``), which a
        FileSink's ``simple_string_encoder`` writes."""
        if not isinstance(value, (tuple, list, Row)):
            return java_string(value)
        kind = value.get_row_kind().short_string() if isinstance(value, Row) else "+I"
        return kind + "[" + ",".join(str(v) for v in value) + "]"

    def __repr__(self) -> str:
        return f"Types.ROW_NAMED({self.field_names!r}, {self.field_types!r})"


class ListTypeInfo(TypeInformation):
    """LIST, BASIC_ARRAY, PRIMITIVE_ARRAY, OBJECT_ARRAY: a list of elements of one type."""

    def __init__(self, name: str, element_type: TypeInformation):
        if not isinstance(element_type, TypeInformation):
            raise TypeError(f"Types.{name}() needs an element type such as Types.INT(), got {element_type!r}")
        self.name = name
        self.element_type = element_type

    def from_python(self, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return [self.element_type.from_python(v) for v in value]
        return value

    def to_string(self, value: Any) -> str:
        if not isinstance(value, (list, tuple)):
            return java_string(value)
        return "[" + ", ".join(self.element_type.to_string(v) for v in value) + "]"

    def __repr__(self) -> str:
        return f"Types.{self.name}({self.element_type!r})"


class MapTypeInfo(TypeInformation):
    def __init__(self, key_type: TypeInformation, value_type: TypeInformation):
        if not isinstance(key_type, TypeInformation) or not isinstance(value_type, TypeInformation):
            raise TypeError(f"Types.MAP() needs a key and a value type, got {key_type!r}, {value_type!r}")
        self.key_type = key_type
        self.value_type = value_type

    def from_python(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {self.key_type.from_python(k): self.value_type.from_python(v) for k, v in value.items()}
        return value

    def to_string(self, value: Any) -> str:
        if not isinstance(value, dict):
            return java_string(value)
        return (
            "{"
            + ", ".join(f"{self.key_type.to_string(k)}={self.value_type.to_string(v)}" for k, v in value.items())
            + "}"
        )

    def __repr__(self) -> str:
        return f"Types.MAP({self.key_type!r}, {self.value_type!r})"


_BASIC = (
    "STRING",
    "BYTE",
    "BOOLEAN",
    "SHORT",
    "INT",
    "LONG",
    "FLOAT",
    "DOUBLE",
    "CHAR",
    "BIG_INT",
    "BIG_DEC",
    "INSTANT",
    "SQL_DATE",
    "SQL_TIME",
    "SQL_TIMESTAMP",
    "LOCAL_DATE",
    "LOCAL_TIME",
    "LOCAL_DATE_TIME",
    "VOID",
)


@dataclass(frozen=True)
class _Basic:
    name: str

    def __call__(self) -> BasicTypeInfo:
        return BasicTypeInfo(self.name)


class Types:
    """PyFlink's ``Types``: ``Types.INT()``, ``Types.TUPLE([...])``, ``Types.ROW_NAMED([...], [...])``."""

    STRING = staticmethod(_Basic("STRING"))
    BYTE = staticmethod(_Basic("BYTE"))
    BOOLEAN = staticmethod(_Basic("BOOLEAN"))
    SHORT = staticmethod(_Basic("SHORT"))
    INT = staticmethod(_Basic("INT"))
    LONG = staticmethod(_Basic("LONG"))
    FLOAT = staticmethod(_Basic("FLOAT"))
    DOUBLE = staticmethod(_Basic("DOUBLE"))
    CHAR = staticmethod(_Basic("CHAR"))
    BIG_INT = staticmethod(_Basic("BIG_INT"))
    BIG_DEC = staticmethod(_Basic("BIG_DEC"))
    INSTANT = staticmethod(_Basic("INSTANT"))
    SQL_DATE = staticmethod(_Basic("SQL_DATE"))
    SQL_TIME = staticmethod(_Basic("SQL_TIME"))
    SQL_TIMESTAMP = staticmethod(_Basic("SQL_TIMESTAMP"))
    LOCAL_DATE = staticmethod(_Basic("LOCAL_DATE"))
    LOCAL_TIME = staticmethod(_Basic("LOCAL_TIME"))
    LOCAL_DATE_TIME = staticmethod(_Basic("LOCAL_DATE_TIME"))
    VOID = staticmethod(_Basic("VOID"))

    @staticmethod
    def PICKLED_BYTE_ARRAY() -> PickledBytesTypeInfo:  # noqa: N802 - PyFlink's name
        return PickledBytesTypeInfo()

    @staticmethod
    def TUPLE(field_types: Sequence[TypeInformation]) -> TupleTypeInfo:  # noqa: N802
        return TupleTypeInfo(field_types)

    @staticmethod
    def ROW(field_types: Sequence[TypeInformation]) -> RowTypeInfo:  # noqa: N802
        return RowTypeInfo(field_types)

    @staticmethod
    def ROW_NAMED(field_names: Sequence[str], field_types: Sequence[TypeInformation]) -> RowTypeInfo:  # noqa: N802
        return RowTypeInfo(field_types, field_names)

    @staticmethod
    def LIST(element_type_info: TypeInformation) -> ListTypeInfo:  # noqa: N802
        return ListTypeInfo("LIST", element_type_info)

    @staticmethod
    def BASIC_ARRAY(element_type: TypeInformation) -> ListTypeInfo:  # noqa: N802
        return ListTypeInfo("BASIC_ARRAY", element_type)

    @staticmethod
    def PRIMITIVE_ARRAY(element_type: TypeInformation) -> ListTypeInfo:  # noqa: N802
        return ListTypeInfo("PRIMITIVE_ARRAY", element_type)

    @staticmethod
    def OBJECT_ARRAY(element_type: TypeInformation) -> ListTypeInfo:  # noqa: N802
        return ListTypeInfo("OBJECT_ARRAY", element_type)

    @staticmethod
    def MAP(key_type_info: TypeInformation, value_type_info: TypeInformation) -> MapTypeInfo:  # noqa: N802
        return MapTypeInfo(key_type_info, value_type_info)


def check_type_info(type_info: Any, what: str) -> TypeInformation | None:
    """None or a TypeInformation (a clear error for anything else, e.g. ``Types.INT`` uncalled)."""
    if type_info is None or isinstance(type_info, TypeInformation):
        return type_info
    if isinstance(type_info, _Basic):
        raise TypeError(f"{what}: call the type, Types.{type_info.name}(), not Types.{type_info.name}")
    raise TypeError(
        f"{what}: expected a type information such as Types.INT(), got {type(type_info).__name__} {type_info!r}"
    )


def needs_conversion(type_info: TypeInformation | None) -> bool:
    """Whether records of this type differ from what a function returned (rows, tuples, floats)."""
    return isinstance(type_info, (RowTypeInfo, TupleTypeInfo, ListTypeInfo, MapTypeInfo)) or (
        isinstance(type_info, BasicTypeInfo) and type_info.name in ("FLOAT", "DOUBLE")
    )
