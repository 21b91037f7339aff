import random

import numpy as np
import pyarrow as pa
import pytest

from yarnflink.common.records import Batch, records_to_arrow
from yarnflink.operators import specs as S

from .helpers import run_operator

K0 = S.KeySelectorSpec(field=0)


def test_reduce_streaming_emits_every_update():
    spec = S.ReduceSpec(lambda a, b: (a[0], a[1] + b[1]), K0, "STREAMING")
    _, out = run_operator(spec, [[("a", 1), ("b", 2), ("a", 3)], [("b", 4)]])
    assert out.rows == [("a", 1), ("b", 2), ("a", 4), ("b", 6)]


def test_reduce_batch_emits_final_once_in_first_seen_order():
    spec = S.ReduceSpec(lambda a, b: (a[0], a[1] + b[1]), K0, "BATCH")
    op, out = run_operator(spec, [[("b", 1), ("a", 2), ("b", 3)], [("a", 4), ("c", 0)]])
    assert out.rows == [("b", 4), ("a", 6), ("c", 0)]
    assert out.ended == 1


def test_reduce_with_callable_key():
    spec = S.ReduceSpec(lambda a, b: a + b, S.KeySelectorSpec(fn=lambda v: v % 2), "STREAMING")
    _, out = run_operator(spec, [[1, 2, 3, 4]])
    assert out.rows == [1, 2, 4, 6]


@pytest.mark.parametrize(
    "agg,expected",
    [
        ("sum", [("a", 1, "x"), ("b", 5, "y"), ("a", 4, "x"), ("a", 2, "x")]),
        ("min", [("a", 1, "x"), ("b", 5, "y"), ("a", 1, "x"), ("a", -2, "x")]),
        ("max", [("a", 1, "x"), ("b", 5, "y"), ("a", 3, "x"), ("a", 3, "x")]),
    ],
)
def test_aggregate_streaming_replaces_field_of_the_keys_first_record(agg, expected):
    """As PyFlink (and Flink): the key's first record with the field replaced by the aggregate
    (keyed_reduce_aggregations in the compatibility suite)."""
    rows = [("a", 1, "x"), ("b", 5, "y"), ("a", 3, "z"), ("a", -2, "w")]
    _, out = run_operator(S.AggregateSpec(agg, 1, K0, "STREAMING"), [rows])
    assert out.rows == expected
    # the same on Arrow input (vectorized path)
    op, out = run_operator(S.AggregateSpec(agg, 1, K0, "STREAMING"), [Batch.from_arrow(records_to_arrow(rows))])
    assert op.mode == "vec"
    assert out.rows == expected


@pytest.mark.parametrize("arrow", [False, True])
def test_aggregate_batch_emits_final_per_key(arrow):
    rows = [("a", 1, "x"), ("b", 5, "y"), ("a", 3, "z")]
    more = [("c", 7, "q"), ("a", 10, "w")]
    batches = [Batch.from_arrow(records_to_arrow(r)) if arrow else r for r in (rows, more)]
    op, out = run_operator(S.AggregateSpec("sum", 1, K0, "BATCH"), batches)
    assert op.mode == ("vec" if arrow else "rec")
    assert out.rows == [("a", 14, "x"), ("b", 5, "y"), ("c", 7, "q")]


def test_aggregate_on_dicts_and_scalars():
    rows = [{"w": "a", "n": 1}, {"w": "a", "n": 2}]
    _, out = run_operator(S.AggregateSpec("sum", "n", S.KeySelectorSpec(field="w")), [rows])
    assert out.rows == [{"w": "a", "n": 1}, {"w": "a", "n": 3}]
    _, out = run_operator(S.AggregateSpec("sum", 0, S.KeySelectorSpec(fn=lambda v: v % 2)), [[1, 2, 3, 4]])
    assert out.rows == [1, 2, 4, 6]
    # scalar Arrow batch keyed by the value itself
    op, out = run_operator(S.AggregateSpec("sum", 0, K0), [Batch.from_arrow(records_to_arrow([5, 5, 6]))])
    assert op.mode == "vec" and out.rows == [5, 10, 6]


def test_aggregate_field_errors_are_clear():
    with pytest.raises(LookupError, match="field 3 out of range for records with 2 fields"):
        run_operator(S.AggregateSpec("sum", 3, K0), [[(1, 2)]])
    with pytest.raises(LookupError, match="field 3 out of range for records with 2 fields"):
        run_operator(S.AggregateSpec("sum", 3, K0), [Batch.from_arrow(records_to_arrow([(1, 2)]))])


def _random_batches(rng, key_kind, value_kind, nbatches=6):
    batches = []
    for _ in range(nbatches):
        n = rng.randint(0, 3000)
        if key_kind == "int":
            keys = [rng.randint(-50, 50) for _ in range(n)]
        elif key_kind == "small":  # non-negative: a table key -> slot; some batches hold few keys
            hi = rng.choice([3, 20, 200])
            keys = [rng.randint(0, hi) for _ in range(n)]
        else:
            keys = [f"k{rng.randint(0, 80)}" for _ in range(n)]
        if value_kind == "int":
            vals = [rng.randint(-(10**6), 10**6) for _ in range(n)]
        else:
            vals = [rng.uniform(-1000, 1000) for _ in range(n)]
        batches.append([(k, v, i) for i, (k, v) in enumerate(zip(keys, vals))])
    return batches


def _close(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x[0] == y[0] and x[2] == y[2]
        assert x[1] == pytest.approx(y[1], rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("agg", ["sum", "min", "max"])
@pytest.mark.parametrize("mode", ["STREAMING", "BATCH"])
@pytest.mark.parametrize(
    "key_kind,value_kind",
    [("int", "int"), ("str", "int"), ("int", "float"), ("str", "float"), ("small", "int"), ("small", "float")],
)
def test_vectorized_equals_per_record(agg, mode, key_kind, value_kind):
    rng = random.Random(hash((agg, mode, key_kind, value_kind)) & 0xFFFF)
    batches = _random_batches(rng, key_kind, value_kind)
    spec = S.AggregateSpec(agg, 1, K0, mode)
    op_rec, out_rec = run_operator(spec, batches)
    op_vec, out_vec = run_operator(spec, [Batch.from_arrow(records_to_arrow(b)) for b in batches])
    assert op_rec.mode == "rec" and op_vec.mode == "vec"
    if value_kind == "int":
        assert out_vec.rows == out_rec.rows
    else:
        _close(out_vec.rows, out_rec.rows)


def test_mixed_forms_and_switch_to_per_record_keep_state():
    rng = random.Random(7)
    batches = _random_batches(rng, "str", "int", 5)
    batches[3] = batches[3] + [(None, 5, -1)]  # a null key: not eligible for the vectorized path
    for mode in ("STREAMING", "BATCH"):
        spec = S.AggregateSpec("sum", 1, K0, mode)
        _, expected = run_operator(spec, batches)
        arrow = [Batch.from_arrow(records_to_arrow(b)) for b in batches]
        # a row batch while vectorized is converted and stays vectorized
        op, out = run_operator(spec, [arrow[0], arrow[1], batches[2]])
        assert op.mode == "vec"
        assert out.rows == run_operator(spec, batches[:3])[1].rows
        # an ineligible batch switches to per-record for good, with the state migrated
        op, out = run_operator(spec, [arrow[0], arrow[1], batches[2], arrow[3], arrow[4]])
        assert op.mode == "rec"
        assert out.rows == expected.rows


def test_vectorized_batch_mode_with_changing_schemas_and_compaction():
    # value column int32 in some batches, int64 in others; many batches to trigger compaction
    rng = np.random.default_rng(3)
    batches, py = [], []
    for i in range(40):
        n = 5000
        k = rng.integers(0, 300, n)
        v = rng.integers(-100, 100, n)
        t = pa.int32() if i % 3 == 0 else pa.int64()
        rb = pa.record_batch([pa.array(k), pa.array(v, type=t), pa.array(np.full(n, i))], names=["f0", "f1", "f2"])
        batches.append(Batch.from_arrow(rb))
        py.append(list(zip(k.tolist(), v.tolist(), [i] * n)))
    spec = S.AggregateSpec("max", 1, K0, "BATCH")
    op, out = run_operator(spec, batches)
    assert op.mode == "vec"
    _, expected = run_operator(spec, py)
    assert out.rows == expected.rows


def test_vectorized_with_nulls_falls_back():
    rb = pa.record_batch({"f0": ["a", "a", None], "f1": [1, 2, 3]})
    op, out = run_operator(S.AggregateSpec("sum", 1, K0), [Batch.from_arrow(rb)])
    assert op.mode == "rec"
    assert out.rows == [("a", 1), ("a", 3), (None, 3)]


def test_vectorized_int_min_with_huge_range_uses_fallback_math():
    rows = [("a", -(2**62)), ("a", 2**62), ("b", 0), ("a", -(2**62) - 5)]
    spec = S.AggregateSpec("min", 1, K0)
    _, expected = run_operator(spec, [rows])
    op, out = run_operator(spec, [Batch.from_arrow(records_to_arrow(rows))])
    assert op.mode == "vec" and out.rows == expected.rows


def test_many_keys_index_rebuilds():
    rng = np.random.default_rng(5)
    batches, py = [], []
    for i in range(8):
        k = rng.integers(0, 20_000, 8000) + i * 1000
        v = rng.integers(0, 10, 8000)
        batches.append(Batch.from_arrow(pa.record_batch([pa.array(k), pa.array(v)], names=["f0", "f1"])))
        py.append(list(zip(k.tolist(), v.tolist())))
    spec = S.AggregateSpec("sum", 1, K0)
    op, out = run_operator(spec, batches)
    _, expected = run_operator(spec, py)
    assert op.mode == "vec" and out.rows == expected.rows


@pytest.mark.parametrize(
    "ktype,keys",
    [(pa.bool_(), [True, False, True, True]), (pa.int8(), [1, -1, 1, 1]), (pa.binary(), [b"a", b"b", b"a", b"a"])],
)
def test_vectorized_other_key_types(ktype, keys):
    vals = [1, 2, 3, 4]
    rb = pa.record_batch([pa.array(keys, type=ktype), pa.array(vals, type=pa.int16())], names=["f0", "f1"])
    spec = S.AggregateSpec("sum", 1, K0)
    op, out = run_operator(spec, [Batch.from_arrow(rb), Batch.from_arrow(rb)])
    _, expected = run_operator(spec, [list(zip(keys, vals))] * 2)
    assert op.mode == "vec" and out.rows == expected.rows
