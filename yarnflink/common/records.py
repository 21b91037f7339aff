"""The record model: users' records are plain Python values; batches of them travel between
chained operators as a :class:`Batch` and across the network as a ``pyarrow.RecordBatch``.

Conventions for converting a list of records to Arrow (``records_to_arrow``); the kind is stored in
the schema metadata under ``yarnflink.kind`` so the reverse conversion is exact:

* ``scalar`` -- every record is a scalar of one primitive type (int, float, str, bytes, bool,
  datetime/date/time/timedelta; ``None`` allowed anywhere): one column ``f0``.
* ``tuple``  -- every record is a tuple of the same length n whose i-th items all have one
  primitive type: columns ``f0 .. f{n-1}``; records come back as tuples.
* ``row``    -- every record is a dict with the same (string) keys whose values per key have one
  primitive type: one column per key (order of the first record); records come back as dicts.
* ``pickle`` -- anything else (mixed types, lists, nested containers, arbitrary objects, ints that
  do not fit int64, numpy scalars): one binary column ``f0`` of pickled records (cloudpickle when
  plain pickle fails). Always works, always exact.

An empty list converts to a zero-row ``scalar`` batch with an ``f0`` column of type null.

A RecordBatch without kind metadata (e.g. built by a user's ``map_batches``), or whose kind does
not fit its columns (``scalar``/``pickle`` need exactly ``["f0"]``, ``tuple`` needs
``["f0", ..., "f{n-1}"]``), is read as: columns exactly ``["f0"]`` -> scalar; exactly
``["f0", ..., "f{n-1}"]`` (n >= 2) -> tuple; else row (dicts). Nulls read back as ``None``.
(``map_batches`` also drops a kind inherited from its input when the columns changed.)

Columns are checked to hold one Python type because Arrow would otherwise silently coerce
(``[1, 2.5]`` becomes double and ``1`` would come back as ``1.0``); such batches are pickled.

A field reference (``Field``) is an ``int`` (tuple position / column index) or a ``str`` (dict key
/ column name). ``column_of`` resolves it against a RecordBatch; ``get_field`` /
``field_getter`` / ``replace_field`` against Python records, with the same meaning:

* tuple / list records: ``i`` or ``"f{i}"`` is position i;
* dict records: ``"name"`` is the key; an int is the key itself if present, else the position
  (in the dict's key order, which is the column order of its Arrow form);
* any other (scalar) record: field ``0`` / ``"f0"`` is the value itself (Flink's rule for
  atomic types).
"""

from __future__ import annotations

import datetime
import io
import pickle
from collections.abc import Callable
from operator import itemgetter
from typing import Any, NoReturn, Union

import cloudpickle
import pyarrow as pa

from yarnflink.common.row import Row

Field = Union[int, str]

KIND_KEY = b"yarnflink.kind"
TIMESTAMPS_KEY = b"yarnflink.timestamps"
TIMESTAMPS_COLUMN = "__yarnflink_timestamp"
KIND_SCALAR = "scalar"
KIND_TUPLE = "tuple"
KIND_ROW = "row"
KIND_PICKLE = "pickle"
KINDS = (KIND_SCALAR, KIND_TUPLE, KIND_ROW, KIND_PICKLE)

_NoneType = type(None)
#: Python types Arrow round-trips exactly when a column holds only one of them (plus None).
PRIMITIVE_TYPES = frozenset(
    {
        int,
        float,
        str,
        bytes,
        bool,
        datetime.datetime,
        datetime.date,
        datetime.time,
        datetime.timedelta,
    }
)

_META = {k: {KIND_KEY: k.encode()} for k in KINDS}


class FieldError(LookupError):
    """A field reference does not exist in a record / RecordBatch."""


# =============================================================================== Batch
class Batch:
    """A batch of records in one or both forms: a list of Python records and/or an Arrow
    RecordBatch. Each conversion is done at most once and cached. Treat both forms as
    immutable (they may be shared by several downstream operators)."""

    __slots__ = ("_rows", "_rb", "_ts", "_ts_col")

    def __init__(
        self,
        rows: list | None = None,
        rb: pa.RecordBatch | None = None,
        timestamps: Any = None,
        timestamp_column: int | None = None,
    ):
        """``timestamp_column``: the index of an int64 column of ``rb`` (no nulls) that holds
        exactly the ``timestamps`` (as ``with_timestamp_column`` assigns them): sent to another
        task, the timestamps are then that column, not a copy (``network_arrow``)."""
        if rows is None and rb is None:
            rows = []
        self._rows = rows
        self._rb = rb
        self._ts = timestamps  # event-time timestamps (int64 numpy array, ms) or None
        self._ts_col = timestamp_column if rb is not None and timestamps is not None else None

    @staticmethod
    def from_rows(rows: list) -> Batch:
        if not isinstance(rows, list):
            rows = list(rows)
        return Batch(rows=rows)

    @staticmethod
    def from_arrow(rb: pa.RecordBatch) -> Batch:
        if isinstance(rb, pa.Table):
            rb = table_to_batch(rb)
        elif not isinstance(rb, pa.RecordBatch):
            raise TypeError(f"Batch.from_arrow expects a pyarrow.RecordBatch, got {type(rb).__name__}")
        md = rb.schema.metadata
        if md and TIMESTAMPS_KEY in md:
            flag = md[TIMESTAMPS_KEY]
            if flag.startswith(b"="):  # the timestamps are one of the columns (see network_arrow)
                i = int(flag[1:])
                rest = {k: v for k, v in md.items() if k != TIMESTAMPS_KEY}
                rb = rb.replace_schema_metadata(rest or None)
                return Batch(rb=rb, timestamps=rb.column(i).to_numpy(zero_copy_only=False), timestamp_column=i)
            rb, ts = split_timestamps(rb)  # an extra column (see wire_arrow)
            return Batch(rb=rb, timestamps=ts)
        return Batch(rb=rb)

    @property
    def timestamps(self) -> Any:
        """Per-record event-time timestamps (int64 numpy array, ms) or None."""
        return self._ts

    def wire_arrow(self) -> pa.RecordBatch:
        """The Arrow form to send to another task: with timestamps, as an extra column that
        ``from_arrow`` strips again."""
        rb = self.arrow()
        if self._ts is None:
            return rb
        md = dict(rb.schema.metadata or {})
        md[TIMESTAMPS_KEY] = b"1"
        rb = rb.append_column(TIMESTAMPS_COLUMN, pa.array(self._ts, type=pa.int64()))
        return rb.replace_schema_metadata(md)

    def network_arrow(self) -> pa.RecordBatch:
        """The Arrow form to send to another task (``from_arrow`` reads it): as ``wire_arrow``,
        but timestamps that are one of the batch's columns travel as a mark in the schema's
        metadata naming that column, not as a second copy."""
        if self._ts is None or self._ts_col is None:
            return self.wire_arrow()
        rb = self.arrow()
        md = dict(rb.schema.metadata or {})
        md[TIMESTAMPS_KEY] = b"=%d" % self._ts_col
        return rb.replace_schema_metadata(md)

    @property
    def has_rows(self) -> bool:
        """True when the Python-record form is available without conversion."""
        return self._rows is not None

    @property
    def has_arrow(self) -> bool:
        """True when the Arrow form is available without conversion."""
        return self._rb is not None

    def rows(self) -> list:
        if self._rows is None:
            self._rows = arrow_to_records(self._rb)
        return self._rows

    def arrow(self) -> pa.RecordBatch:
        if self._rb is None:
            assert self._rows is not None  # a batch holds rows, Arrow or both
            self._rb = records_to_arrow(self._rows)
        return self._rb

    def __len__(self) -> int:
        if self._rows is not None:
            return len(self._rows)
        assert self._rb is not None
        return self._rb.num_rows

    def __repr__(self) -> str:
        form = "+".join(f for f, ok in (("rows", self.has_rows), ("arrow", self.has_arrow)) if ok)
        return f"Batch({len(self)} records, {form})"


# =============================================================================== timestamps
def timestamps_of_column(col: pa.Array | pa.ChunkedArray) -> Any:
    """Event timestamps (int64 numpy array, ms) of an Arrow column of integers (ms) or of
    Arrow timestamps (any unit; converted to ms, rounding down)."""
    if pa.types.is_timestamp(col.type):
        unit = col.type.unit
        col = col.cast(pa.timestamp(unit, None)).cast(pa.int64())
        arr = col.to_numpy(zero_copy_only=False)
        div = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}[unit]
        return arr * 1000 if div is None else (arr if div == 1 else arr // div)
    if not pa.types.is_integer(col.type):
        raise TypeError(f"event timestamps must be integers (ms) or Arrow timestamps, got a column of {col.type}")
    if col.type != pa.int64():
        col = col.cast(pa.int64())
    return col.to_numpy(zero_copy_only=False)


def split_timestamps(rb: pa.RecordBatch) -> tuple[pa.RecordBatch, Any]:
    """``(rb without the TIMESTAMPS_COLUMN and its metadata flag, timestamps or None)``."""
    md = rb.schema.metadata
    i = rb.schema.get_field_index(TIMESTAMPS_COLUMN)
    ts = None
    if i >= 0:
        ts = timestamps_of_column(rb.column(i))
        rb = rb.remove_column(i)
    if md and TIMESTAMPS_KEY in md:
        rest = {k: v for k, v in md.items() if k != TIMESTAMPS_KEY}
        rb = rb.replace_schema_metadata(rest or None)
    return rb, ts


# =============================================================================== conversions
def _pickle_one(value: Any) -> bytes:
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def _pickled(rows: list) -> pa.RecordBatch:
    try:
        payload = [pickle.dumps(r, protocol=pickle.HIGHEST_PROTOCOL) for r in rows]
    except Exception:
        payload = [_pickle_one(r) for r in rows]
    schema = pa.schema([pa.field("f0", pa.binary())], metadata=_META[KIND_PICKLE])
    return pa.RecordBatch.from_arrays([pa.array(payload, type=pa.binary())], schema=schema)


def _typed_column(values: list) -> pa.Array | None:
    """Arrow array for a column of Python values if Arrow round-trips it exactly, else None."""
    types = set(map(type, values))
    types.discard(_NoneType)
    if len(types) > 1 or not types <= PRIMITIVE_TYPES:
        return None
    try:
        if types == {int}:
            return pa.array(values, type=pa.int64())
        return pa.array(values)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return None


def _batch(columns: list[pa.Array], names: list[str], kind: str) -> pa.RecordBatch:
    schema = pa.schema([pa.field(n, c.type) for n, c in zip(names, columns)], metadata=_META[kind])
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def records_to_arrow(rows: list) -> pa.RecordBatch:
    """Convert Python records to a RecordBatch (see the module docstring for the kinds)."""
    if not isinstance(rows, list):
        rows = list(rows)
    if not rows:
        return _batch([pa.array([], type=pa.null())], ["f0"], KIND_SCALAR)
    types = set(map(type, rows))
    if len(types) == 1:
        t = next(iter(types))
        if t is tuple:
            lengths = set(map(len, rows))
            if len(lengths) == 1:
                n = lengths.pop()
                if n > 0:
                    cols = []
                    for i in range(n):
                        col = _typed_column(list(map(itemgetter(i), rows)))
                        if col is None:
                            return _pickled(rows)
                        cols.append(col)
                    return _batch(cols, [f"f{i}" for i in range(n)], KIND_TUPLE)
            return _pickled(rows)
        if t is dict:
            keys = list(rows[0])
            if keys and all(type(k) is str for k in keys) and set(map(len, rows)) == {len(keys)}:
                cols = []
                try:
                    for k in keys:
                        col = _typed_column(list(map(itemgetter(k), rows)))
                        if col is None:
                            return _pickled(rows)
                        cols.append(col)
                except KeyError:  # dicts with different keys
                    return _pickled(rows)
                return _batch(cols, keys, KIND_ROW)
            return _pickled(rows)
    # scalars (possibly with None)
    non_null = types - {_NoneType}
    if len(non_null) <= 1 and non_null <= PRIMITIVE_TYPES:
        col = _typed_column(rows)
        if col is not None:
            return _batch([col], ["f0"], KIND_SCALAR)
    return _pickled(rows)


def _kind_fits(kind: str, schema: pa.Schema) -> bool:
    names = schema.names
    if kind == KIND_ROW:
        return True
    if kind == KIND_PICKLE:
        return names == ["f0"] and pa.types.is_binary(schema.field(0).type)
    if kind == KIND_SCALAR:
        return names == ["f0"]
    return len(names) >= 1 and names == [f"f{i}" for i in range(len(names))]


def record_kind(rb: pa.RecordBatch) -> str:
    """The kind of a RecordBatch: from its metadata when that fits its columns (a ``scalar`` /
    ``pickle`` batch has exactly column ``f0``, a ``tuple`` batch ``f0..fn-1``), else inferred from
    its column names."""
    schema = rb.schema
    md = schema.metadata
    if md:
        kind = md.get(KIND_KEY)
        if kind is not None:
            kind = kind.decode()
            if kind in KINDS and _kind_fits(kind, schema):
                return kind
    names = schema.names
    if names == ["f0"]:
        return KIND_SCALAR
    if len(names) >= 2 and names == [f"f{i}" for i in range(len(names))]:
        return KIND_TUPLE
    return KIND_ROW


def with_kind(rb: pa.RecordBatch, kind: str | None) -> pa.RecordBatch:
    """``rb`` with its kind metadata set (``None``: removed); other metadata kept."""
    md = dict(rb.schema.metadata or {})
    if kind is None:
        md.pop(KIND_KEY, None)
    else:
        md[KIND_KEY] = kind.encode()
    return rb.replace_schema_metadata(md or None)


def _to_list(col: pa.Array | pa.ChunkedArray) -> list:
    return col.to_pylist()


def arrow_to_records(rb: pa.RecordBatch) -> list:
    """Convert a RecordBatch to Python records (see the module docstring)."""
    if isinstance(rb, pa.Table):
        rb = table_to_batch(rb)
    n = rb.num_rows
    if n == 0:
        return []
    kind = record_kind(rb)
    if kind == KIND_PICKLE:
        loads = pickle.loads
        return [loads(b) for b in _to_list(rb.column(0))]
    if rb.num_columns == 0:
        return [{} for _ in range(n)] if kind == KIND_ROW else [() for _ in range(n)]
    if kind == KIND_SCALAR:
        return _to_list(rb.column(0))
    cols = [_to_list(c) for c in rb.columns]
    if kind == KIND_TUPLE:
        return list(zip(*cols))
    names = rb.schema.names
    if len(names) == 1:
        name = names[0]
        return [{name: v} for v in cols[0]]
    return [dict(zip(names, t)) for t in zip(*cols)]


def table_to_batch(table: pa.Table) -> pa.RecordBatch:
    """One RecordBatch holding all rows of ``table`` (copies only when it has several chunks)."""
    if table.num_rows == 0:
        return pa.RecordBatch.from_pylist([], schema=table.schema)
    batches = table.to_batches()
    if len(batches) == 1:
        return batches[0]
    return pa.concat_batches(batches)


def concat_batches(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    """Concatenate RecordBatches of one schema."""
    if len(batches) == 1:
        return batches[0]
    return pa.concat_batches(batches)


def to_ipc_bytes(rb: pa.RecordBatch) -> bytes:
    """Serialize a RecordBatch (with its schema and metadata) as an Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rb.schema) as writer:
        writer.write_batch(rb)
    return sink.getvalue().to_pybytes()


def batches_to_ipc_bytes(batches: list[pa.RecordBatch]) -> bytes:
    """Serialize RecordBatches of one schema (the first's, metadata included) as one Arrow IPC
    stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batches[0].schema) as writer:
        for rb in batches:
            writer.write_batch(rb)
    return sink.getvalue().to_pybytes()


def from_ipc_bytes(payload: bytes) -> list[pa.RecordBatch]:
    """The RecordBatches of an Arrow IPC stream written by ``to_ipc_bytes``."""
    with pa.ipc.open_stream(io.BytesIO(payload) if isinstance(payload, bytes) else payload) as r:
        return list(r)


def records_from_ipc(payload: bytes) -> list:
    """Python records from ``to_ipc_bytes`` output (what the collect sink sends)."""
    out: list = []
    for rb in from_ipc_bytes(payload):
        out.extend(arrow_to_records(rb))
    return out


# =============================================================================== fields
def column_of(rb: pa.RecordBatch, field: Field) -> tuple[int, str]:
    """Resolve a field reference against a RecordBatch: ``(column index, column name)``."""
    names = rb.schema.names
    if isinstance(field, bool) or not isinstance(field, (int, str)):
        raise TypeError(f"a field reference must be an int or a str, got {field!r}")
    if isinstance(field, int):
        if not 0 <= field < len(names):
            raise FieldError(
                f"field {field} out of range for records with {len(names)} field{'s' if len(names) != 1 else ''}"
            )
        return field, names[field]
    idx = rb.schema.get_field_index(field)
    if idx < 0:
        if field not in names:
            raise FieldError(f"field {field!r} not found; the records have fields {names}")
        raise FieldError(f"field {field!r} is ambiguous: several columns have that name")
    return idx, field


def _tuple_position(field: Field) -> int | None:
    if isinstance(field, bool):
        return None
    if isinstance(field, int):
        return field
    if isinstance(field, str) and len(field) > 1 and field[0] == "f" and field[1:].isdigit():
        return int(field[1:])
    return None


def _check_field(field: Field) -> None:
    if isinstance(field, bool) or not isinstance(field, (int, str)):
        raise TypeError(f"a field reference must be an int or a str, got {field!r}")


def get_field(record: Any, field: Field) -> Any:
    """The value of ``field`` in one Python record (see the module docstring)."""
    _check_field(field)
    if isinstance(record, (tuple, list)):
        pos = _tuple_position(field)
        if pos is None:
            raise FieldError(
                f"field {field!r} cannot be used on {type(record).__name__} records; use a position or 'f<position>'"
            )
        if not 0 <= pos < len(record):
            raise FieldError(
                f"field {field} out of range for records with {len(record)} field{'s' if len(record) != 1 else ''}"
            )
        return record[pos]
    if isinstance(record, dict):
        if field in record:
            return record[field]
        if isinstance(field, int):
            keys = list(record)
            if 0 <= field < len(keys):
                return record[keys[field]]
            raise FieldError(f"field {field} out of range for records with {len(keys)} fields")
        raise FieldError(f"field {field!r} not found; the record has fields {list(record)}")
    if isinstance(record, Row):
        return record[_row_position(record, field)]
    if field == 0 or field == "f0":
        return record
    raise FieldError(f"field {field!r} out of range for records with 1 field ({type(record).__name__} values)")


def field_getter(field: Field) -> Callable[[list], list]:
    """A function ``rows -> [value of field in each row]``; uses ``operator.itemgetter`` when
    the rows are homogeneous tuples/dicts, falling back to ``get_field`` per record (which
    raises the clear error) otherwise."""
    _check_field(field)
    pos = _tuple_position(field)

    def values(rows: list) -> list:
        if not rows:
            return []
        types = set(map(type, rows))
        if len(types) == 1:
            t = next(iter(types))
            try:
                if t is tuple or t is list:
                    if pos is not None and pos >= 0:
                        return list(map(itemgetter(pos), rows))
                elif t is dict:
                    return list(map(itemgetter(field), rows))
                elif t in PRIMITIVE_TYPES or t is _NoneType:
                    if field == 0 or field == "f0":
                        return rows
            except (IndexError, KeyError, TypeError):
                pass
        return [get_field(r, field) for r in rows]

    return values


def replace_field(record: Any, field: Field, value: Any) -> Any:
    """A copy of ``record`` with ``field`` set to ``value`` (a scalar record is replaced)."""
    if isinstance(record, tuple):
        pos = _tuple_position(field)
        if pos is None or not 0 <= pos < len(record):
            _bad_field(record, field)
        return record[:pos] + (value,) + record[pos + 1 :]
    if isinstance(record, list):
        pos = _tuple_position(field)
        if pos is None or not 0 <= pos < len(record):
            _bad_field(record, field)
        items = list(record)
        items[pos] = value
        return items
    if isinstance(record, dict):
        out = dict(record)
        if field in record:
            out[field] = value
            return out
        if isinstance(field, int):
            keys = list(record)
            if 0 <= field < len(keys):
                out[keys[field]] = value
                return out
        _bad_field(record, field)
    if isinstance(record, Row):
        names = record.get_field_names()
        row = Row(*record)
        row[_row_position(record, field)] = value
        if names is not None:
            row.set_field_names(names)
        row.set_row_kind(record.get_row_kind())
        return row
    if field == 0 or field == "f0":
        return value
    _bad_field(record, field)


def _row_position(record: Row, field: Field) -> int:
    """The position of ``field`` (a name, a position or ``f<position>``) in a Row."""
    names = record.get_field_names()
    if isinstance(field, str) and names is not None and field in names:
        return names.index(field)
    pos = _tuple_position(field)
    if pos is None or not 0 <= pos < len(record):
        raise FieldError(f"field {field!r} not found; the Row has fields {names or len(record)}")
    return pos


def _bad_field(record: Any, field: Field) -> NoReturn:
    get_field(record, field)  # raises the clear error
    raise AssertionError(f"field {field!r} of {record!r} was expected to be invalid")


def replace_fields(rows: list, field: Field, values: list) -> list:
    """``[replace_field(r, field, v) for r, v in zip(rows, values)]``, with fast paths for
    homogeneous tuples, dicts and scalars."""
    if not rows:
        return []
    types = set(map(type, rows))
    if len(types) == 1:
        t = next(iter(types))
        pos = _tuple_position(field)
        if t is tuple and pos is not None and pos >= 0 and min(map(len, rows)) > pos:
            if pos == 0:
                return [(v,) + r[1:] for r, v in zip(rows, values)]
            q = pos + 1
            return [r[:pos] + (v,) + r[q:] for r, v in zip(rows, values)]
        if t is dict and isinstance(field, str) and all(field in r for r in rows):
            return [{**r, field: v} for r, v in zip(rows, values)]
        if (t in PRIMITIVE_TYPES or t is _NoneType) and (field == 0 or field == "f0"):
            return list(values)
    return [replace_field(r, field, v) for r, v in zip(rows, values)]
