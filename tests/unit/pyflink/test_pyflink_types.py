"""Row records and type information: typed outputs become Rows / tuples, and typed records print
as Flink's Java toString does."""

import pickle

import cloudpickle
import pytest

from pyflink.common import Row, RowKind, Types
from yarnflink.common.typeinfo import java_double_string


def test_a_row_reads_fields_by_name_position_and_attribute():
    row = Row(id=1, info="x")
    assert (row.id, row["info"], row[0], list(row), len(row)) == (1, "x", 1, [1, "x"], 2)
    assert repr(row) == "Row(id=1, info='x')"
    assert row.as_dict() == {"id": 1, "info": "x"}
    assert Row(b=2, a=1).get_field_names() == ["a", "b"]  # named arguments are sorted, as PyFlink
    with pytest.raises(AttributeError, match="no field 'nope'"):
        row.nope  # noqa: B018
    with pytest.raises(ValueError, match="not both"):
        Row(1, a=2)


def test_a_row_of_names_builds_rows_and_rows_compare_by_names_kind_and_values():
    Person = Row("name", "age")
    alice = Person("Alice", 11)
    assert (alice.name, alice.age, alice.get_field_names()) == ("Alice", 11, ["name", "age"])
    assert Row(1, 2) == Row(1, 2) and Row(1, 2) != Row(a=1, b=2)
    assert repr(Row(1, "a")) == "<Row(1, 'a')>"
    r = Row(1)
    r.set_row_kind(RowKind.DELETE)
    assert r != Row(1)


def test_rows_survive_pickling_with_names_and_kind():
    row = Row(id=1, info="x")
    row.set_row_kind(RowKind.UPDATE_AFTER)
    for dumps in (pickle.dumps, cloudpickle.dumps):
        back = pickle.loads(dumps(row))
        assert back == row and back.info == "x" and back.get_row_kind() is RowKind.UPDATE_AFTER


def test_row_named_turns_tuples_into_named_rows():
    t = Types.ROW_NAMED(["id", "info"], [Types.INT(), Types.STRING()])
    row = t.from_python((1, "x"))
    assert isinstance(row, Row) and row.info == "x" and row.id == 1
    assert t.from_python({"info": "y", "id": 2}).info == "y"
    assert Types.ROW([Types.INT()]).from_python([5]).get_field_names() == ["f0"]
    with pytest.raises(ValueError, match="needs 2 fields"):
        t.from_python((1,))
    with pytest.raises(ValueError, match="distinct names"):
        Types.ROW_NAMED(["a"], [Types.INT(), Types.INT()])


def test_tuple_and_float_types_convert_what_functions_return():
    t = Types.TUPLE([Types.STRING(), Types.DOUBLE()])
    assert t.from_python(["a", 1]) == ("a", 1.0)
    assert t.from_python(Row("a", 2.5)) == ("a", 2.5)
    assert Types.LIST(Types.INT()).from_python((1, 2)) == [1, 2]


def test_typed_records_print_as_flinks_java_to_string():
    assert Types.TUPLE([Types.STRING(), Types.INT()]).to_string(("hi", 1)) == "(hi,1)"
    row_t = Types.ROW_NAMED(["id", "ok"], [Types.INT(), Types.BOOLEAN()])
    assert row_t.to_string(row_t.from_python((1, True))) == "+I[1, true]"
    assert Types.DOUBLE().to_string(1) == "1.0"
    assert Types.STRING().to_string(None) == "null"
    assert Types.PICKLED_BYTE_ARRAY().to_string(("a", 1)) == "('a', 1)"
    assert Types.MAP(Types.STRING(), Types.INT()).to_string({"a": 1}) == "{a=1}"


def test_print_shows_a_row_as_pyflink_formats_it_in_python():
    """PyFlink's print() of a ROW stream maps each Row to ``kind[str(f),...]`` before its Java sink
    (row_named_types in the compatibility suite): no space, Python's str of each field; a tuple
    and a FileSink's string encoder keep Java's toString."""
    from tests.unit.operators.helpers import run_operator
    from yarnflink.api import StreamExecutionEnvironment

    row_t = Types.ROW_NAMED(["city", "temp", "ok", "n"], [Types.STRING(), Types.DOUBLE(), Types.BOOLEAN(), Types.INT()])
    row = row_t.from_python(("BERLIN", 54.5, True, None))
    assert row_t.print_string(row) == "+I[BERLIN,54.5,True,None]"
    assert row_t.to_string(row) == "+I[BERLIN, 54.5, true, null]"
    env = StreamExecutionEnvironment()
    ds = env.from_collection([("BERLIN", 54.5, True, None)], type_info=row_t)
    ds.print()
    mapped = [n for n in env._transformations if n.name == "Map"][-1]
    _, out = run_operator(mapped.spec, [[row]])
    assert out.rows == ["+I[BERLIN,54.5,True,None]"]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1.0"),
        (0.001, "0.001"),
        (1234567.0, "1234567.0"),
        (1e7, "1.0E7"),
        (1.5e-5, "1.5E-5"),
        (-2.5e10, "-2.5E10"),
    ],
)
def test_doubles_print_as_java_does(value, text):
    assert java_double_string(value) == text


def test_an_uncalled_type_is_a_clear_error():
    from yarnflink.api import StreamExecutionEnvironment

    env = StreamExecutionEnvironment()
    with pytest.raises(TypeError, match=r"call the type, Types.INT\(\)"):
        env.from_collection([1], type_info=Types.INT)


def test_field_references_work_on_rows_by_name_and_position():
    from yarnflink.common.records import field_getter, get_field, replace_field

    row = Types.ROW_NAMED(["word", "n"], [Types.STRING(), Types.INT()]).from_python(("a", 1))
    assert get_field(row, "n") == 1 and get_field(row, 0) == "a" and get_field(row, "f1") == 1
    assert field_getter(1)([row, row]) == [1, 1]
    bumped = replace_field(row, "n", 5)
    assert bumped.n == 5 and bumped.word == "a" and row.n == 1


def test_float_records_are_32_bit_and_float_state_keeps_what_was_written():
    """Types.FLOAT() as PyFlink: a FLOAT field of a typed record is a 32-bit float (its
    serializer), while a value put in state declared FLOAT is read back as it was put, since
    PyFlink's state cache keeps the Python object: state_access.py prints 163.29999923706055,
    the float32 inputs summed in doubles, not the 32-bit 163.30001831054688 a rounding state gives
    (example_state_access / example_event_time_timer in the compatibility suite)."""
    from pyflink.datastream import KeyedProcessFunction
    from pyflink.datastream.state import ValueStateDescriptor
    from tests.unit.operators.helpers import run_operator
    from yarnflink.api import StreamExecutionEnvironment

    class Sum(KeyedProcessFunction):
        def open(self, runtime_context):
            self.state = runtime_context.get_state(ValueStateDescriptor("state", Types.FLOAT()))

        def process_element(self, value, ctx):
            current = (self.state.value() or 0) + value[1]
            self.state.update(current)
            yield value[0], current

    t = Types.TUPLE([Types.STRING(), Types.FLOAT()])
    data = [("Alice", 110.1), ("Alice", 20.0), ("Alice", 13.1), ("Alice", 20.1)]
    records = [t.from_python(r) for r in data]
    assert records[0][1] == 110.0999984741211 and records[2][1] == 13.100000381469727
    env = StreamExecutionEnvironment()
    ds = env.from_collection(data, type_info=t).key_by(lambda v: v[0]).process(Sum())
    _, out = run_operator(ds._t.spec, [records])
    assert [v for _, v in out.rows] == [110.0999984741211, 130.0999984741211, 143.19999885559082, 163.29999923706055]


def test_a_keyed_reduce_hands_on_records_of_the_streams_type():
    """PyFlink's reduce has its input's type as output type: a FLOAT field of the result is a
    32-bit float downstream, a tuple result on a ROW stream a Row."""
    from tests.unit.operators.helpers import run_operator
    from yarnflink.api import StreamExecutionEnvironment

    env = StreamExecutionEnvironment()
    t = Types.TUPLE([Types.STRING(), Types.FLOAT()])
    rows = [t.from_python(r) for r in [("a", 0.1), ("a", 0.2)]]
    ds = env.from_collection([], type_info=t).key_by(lambda v: v[0]).reduce(lambda a, b: (a[0], a[1] + b[1]))
    _, out = run_operator(ds._t.spec, [rows])
    assert out.rows[-1] == ("a", 0.30000001192092896)  # float32(0.1f + 0.2f)
    row_t = Types.ROW_NAMED(["k", "n"], [Types.STRING(), Types.INT()])
    ds = env.from_collection([], type_info=row_t).key_by(lambda r: r.k).reduce(lambda a, b: (a[0], a[1] + b[1]))
    _, out = run_operator(ds._t.spec, [[row_t.from_python(("a", 1)), row_t.from_python(("a", 2))]])
    assert out.rows[-1].n == 3
