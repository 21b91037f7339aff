import datetime
import math

import pyarrow as pa
import pytest

from yarnflink.common.records import (
    KIND_KEY,
    Batch,
    FieldError,
    arrow_to_records,
    column_of,
    field_getter,
    get_field,
    record_kind,
    records_from_ipc,
    records_to_arrow,
    replace_field,
    replace_fields,
    to_ipc_bytes,
)


class Obj:
    def __init__(self, x):
        self.x = x

    def __eq__(self, other):
        return isinstance(other, Obj) and other.x == self.x


CASES = [
    ("scalar", [1, 2, 3]),
    ("scalar", [1, None, -5]),
    ("scalar", [1.5, float("inf"), None]),
    ("scalar", ["a", "bé", ""]),
    ("scalar", [b"x", b"\x00"]),
    ("scalar", [True, False, None]),
    ("scalar", [datetime.datetime(2024, 1, 2, 3, 4, 5), datetime.date(2024, 1, 3)][:1]),
    ("scalar", [None, None]),
    ("tuple", [(1, "a"), (2, "b"), (3, None)]),
    ("tuple", [(1.5,), (2.5,)]),
    ("tuple", [(1, "a", 2.0, True, b"z")]),
    ("row", [{"a": 1, "b": "x"}, {"b": "y", "a": 2}]),
    ("row", [{"only": 1.0}]),
    ("pickle", [1, "a"]),  # mixed scalar types
    ("pickle", [1, 2.5]),  # Arrow would coerce 1 to 1.0
    ("pickle", [[1, 2], [3]]),  # lists
    ("pickle", [(1, 2), (1, 2, 3)]),  # tuples of different length
    ("pickle", [(1, 2.5), (2, 3)]),  # a tuple column with int and float
    ("pickle", [{"a": 1}, {"b": 2}]),  # dicts with different keys
    ("pickle", [{1: "a"}]),  # non-string keys
    ("pickle", [{"a": (1, 2)}]),  # nested values
    ("pickle", [2**70]),  # beyond int64
    ("pickle", [Obj(1), Obj(2)]),  # arbitrary objects
    ("pickle", [()]),  # empty tuple
]


@pytest.mark.parametrize("kind,rows", CASES)
def test_round_trip_each_kind(kind, rows):
    rb = records_to_arrow(rows)
    assert record_kind(rb) == kind
    assert rb.schema.metadata[KIND_KEY] == kind.encode()
    back = arrow_to_records(rb)
    assert back == rows
    assert [type(r) for r in back] == [type(r) for r in rows]


def test_round_trip_survives_ipc():
    for _, rows in CASES:
        assert records_from_ipc(to_ipc_bytes(records_to_arrow(rows))) == rows


def test_tuple_columns_are_f0_fn():
    rb = records_to_arrow([(1, "a", 2.0)])
    assert rb.schema.names == ["f0", "f1", "f2"]
    assert rb.column(0).type == pa.int64()
    assert rb.column(1).type == pa.string()


def test_dict_columns_by_key():
    rb = records_to_arrow([{"word": "a", "n": 1}])
    assert rb.schema.names == ["word", "n"]


def test_nan_round_trips():
    back = arrow_to_records(records_to_arrow([float("nan"), 1.0]))
    assert math.isnan(back[0]) and back[1] == 1.0


def test_empty_list():
    rb = records_to_arrow([])
    assert rb.num_rows == 0
    assert arrow_to_records(rb) == []
    b = Batch.from_rows([])
    assert len(b) == 0 and b.arrow().num_rows == 0


def test_unmarked_batches_are_inferred():
    assert arrow_to_records(pa.record_batch({"f0": [1, 2]})) == [1, 2]
    assert arrow_to_records(pa.record_batch({"f0": [1], "f1": ["a"]})) == [(1, "a")]
    assert arrow_to_records(pa.record_batch({"f1": [1], "f0": ["a"]})) == [{"f1": 1, "f0": "a"}]
    assert arrow_to_records(pa.record_batch({"x": [1], "y": [2.5]})) == [{"x": 1, "y": 2.5}]
    assert arrow_to_records(pa.table({"f0": [1, 2]})) == [1, 2]


def test_batch_caches_conversions():
    rows = [(1, "a"), (2, "b")]
    b = Batch.from_rows(rows)
    assert b.has_rows and not b.has_arrow
    rb = b.arrow()
    assert b.arrow() is rb and b.rows() is rows and len(b) == 2
    b2 = Batch.from_arrow(rb)
    assert not b2.has_rows
    r = b2.rows()
    assert r == rows and b2.rows() is r and len(b2) == 2


def test_batch_from_arrow_rejects_other_types():
    with pytest.raises(TypeError):
        Batch.from_arrow([1, 2])


def test_column_of():
    rb = records_to_arrow([(1, "a")])
    assert column_of(rb, 0) == (0, "f0")
    assert column_of(rb, "f1") == (1, "f1")
    with pytest.raises(FieldError, match="field 3 out of range for records with 2 fields"):
        column_of(rb, 3)
    with pytest.raises(FieldError, match="'nope' not found"):
        column_of(rb, "nope")
    with pytest.raises(TypeError):
        column_of(rb, 1.5)


def test_get_field_and_replace_field():
    assert get_field((1, "a"), 1) == "a"
    assert get_field((1, "a"), "f1") == "a"
    assert get_field({"a": 1, "b": 2}, "b") == 2
    assert get_field({"a": 1, "b": 2}, 1) == 2  # positional on dicts
    assert get_field(7, 0) == 7 and get_field("abc", 0) == "abc"
    with pytest.raises(FieldError, match="field 3 out of range for records with 2 fields"):
        get_field((1, 2), 3)
    with pytest.raises(FieldError, match="'c' not found"):
        get_field({"a": 1}, "c")
    with pytest.raises(FieldError):
        get_field(7, 1)
    assert replace_field((1, "a", 3), 1, "z") == (1, "z", 3)
    assert replace_field([1, 2], 0, 9) == [9, 2]
    assert replace_field({"a": 1, "b": 2}, "b", 5) == {"a": 1, "b": 5}
    assert replace_field(7, 0, 8) == 8
    with pytest.raises(FieldError):
        replace_field((1,), 2, 0)


def test_field_getter_fast_and_generic_paths_agree():
    g = field_getter(1)
    assert g([(1, "a"), (2, "b")]) == ["a", "b"]
    assert g([(1, "a"), [2, "b"]]) == ["a", "b"]
    assert field_getter("k")([{"k": 1}, {"k": 2}]) == [1, 2]
    assert field_getter(0)(["ab", "cd"]) == ["ab", "cd"]  # scalar str records: the value itself
    with pytest.raises(FieldError, match="out of range"):
        g([(1,), (2,)])


def test_replace_fields_matches_replace_field():
    cases = [
        ([(1, "a"), (2, "b")], 0),
        ([(1, "a"), (2, "b")], 1),
        ([{"a": 1}, {"a": 2}], "a"),
        ([1, 2], 0),
        ([(1, 2), [3, 4]], 1),
    ]
    for rows, f in cases:
        vals = [10, 20]
        assert replace_fields(rows, f, vals) == [replace_field(r, f, v) for r, v in zip(rows, vals)]
