import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from yarnflink.common.keygroups import (
    default_max_parallelism,
    key_group_ids,
    key_group_of,
    key_group_range,
    operator_index_for_key_group,
    operator_indices_for_keys,
)

KEYS = [0, 1, -1, 42, 2**40, "a", "word", "", "é", b"raw", 1.5, -0.25, None, (1, "a"), ("x", (2, 3)), True, 2**70, 3.0]


def test_default_max_parallelism_is_flinks_rule():
    assert default_max_parallelism(1) == 128
    assert default_max_parallelism(85) == 128  # 85 + 42 = 127 -> 128
    assert default_max_parallelism(86) == 256  # 86 + 43 = 129 -> 256
    assert default_max_parallelism(100) == 256
    assert default_max_parallelism(1000) == 2048
    assert default_max_parallelism(30000) == 32768  # capped


def test_operator_index_formula_and_vectorized():
    for maxp, p in [(128, 1), (128, 3), (128, 128), (256, 7)]:
        kgs = np.arange(maxp, dtype=np.int32)
        vec = operator_index_for_key_group(maxp, p, kgs)
        assert vec.tolist() == [kg * p // maxp for kg in range(maxp)]
        assert [operator_index_for_key_group(maxp, p, kg) for kg in range(maxp)] == vec.tolist()
        for op in range(p):  # consistent with Flink's key group ranges
            for kg in key_group_range(maxp, p, op):
                assert vec[kg] == op


def test_key_groups_in_range_and_spread():
    kg = key_group_ids(list(range(10_000)), 128)
    assert kg.dtype == np.int32
    assert kg.min() >= 0 and kg.max() < 128
    assert len(set(kg.tolist())) == 128  # every key group is used


def test_list_and_arrow_inputs_agree():
    ints = list(range(-500, 500)) + [2**62]
    strs = [f"key-{i}" for i in range(1000)]
    floats = [i / 7 for i in range(1000)]
    for values, types in [
        (ints, [pa.int64()]),
        ([i for i in range(100)], [pa.int8(), pa.int32(), pa.uint16(), pa.uint64()]),
        (strs, [pa.string(), pa.large_string()]),
        (floats, [pa.float64()]),
        ([True, False], [pa.bool_()]),
        ([b"a", b"bc"], [pa.binary()]),
    ]:
        expected = key_group_ids(values, 128)
        for t in types:
            assert key_group_ids(pa.array(values, type=t), 128).tolist() == expected.tolist(), t
        chunked = pa.chunked_array([pa.array(values[:3], type=types[0]), pa.array(values[3:], type=types[0])])
        assert key_group_ids(chunked, 128).tolist() == expected.tolist()
    # nulls in an Arrow column and dictionary columns go through the Python path
    with_nulls = ["a", None, "b"]
    assert key_group_ids(pa.array(with_nulls), 128).tolist() == key_group_ids(with_nulls, 128).tolist()
    d = pa.array(strs[:10]).dictionary_encode()
    assert key_group_ids(d, 128).tolist() == key_group_ids(strs[:10], 128).tolist()


def test_hash_does_not_depend_on_the_rest_of_the_batch():
    alone = [key_group_of(k, 4096) for k in KEYS]
    together = key_group_ids(KEYS, 4096).tolist()
    assert alone == together
    assert key_group_ids(np.array([5, 6]), 4096).tolist() == key_group_ids([5, 6], 4096).tolist()


def test_python_equal_numbers_share_a_key_group():
    assert key_group_of(1, 32768) == key_group_of(1.0, 32768) == key_group_of(True, 32768)
    assert key_group_of(np.int64(7), 32768) == key_group_of(7, 32768)
    assert key_group_of((1, "a"), 32768) == key_group_of((1.0, "a"), 32768)


_CHILD = """
import json, sys
from yarnflink.common.keygroups import key_group_ids
import pyarrow as pa
keys = [0, 1, -1, 42, 2**40, "a", "word", "", "é", b"raw", 1.5, -0.25, None, (1, "a"), ("x", (2, 3)),
        True, 2**70, 3.0]
strs = [f"key-{i}" for i in range(200)]
print(json.dumps([key_group_ids(keys, 32768).tolist(), key_group_ids(pa.array(strs), 128).tolist(),
                  hash("word")]))
"""


@pytest.mark.parametrize("seed", ["1", "98765"])
def test_key_groups_are_stable_across_processes(seed):
    import yarnflink

    root = os.path.dirname(os.path.dirname(os.path.abspath(yarnflink.__file__)))
    env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=root)
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True, timeout=120
    )
    child_keys, child_strs, child_hash = json.loads(out.stdout)
    strs = [f"key-{i}" for i in range(200)]
    assert child_keys == key_group_ids(KEYS, 32768).tolist()
    assert child_strs == key_group_ids(strs, 128).tolist()
    assert child_hash != hash("word") or seed == os.environ.get("PYTHONHASHSEED")  # seed really differs


def test_operator_indices_for_keys():
    keys = [f"k{i}" for i in range(1000)]
    ops = operator_indices_for_keys(keys, 128, 3)
    kg = key_group_ids(keys, 128)
    assert ops.tolist() == [g * 3 // 128 for g in kg.tolist()]
    assert set(ops.tolist()) == {0, 1, 2}


def test_bad_max_parallelism():
    with pytest.raises(ValueError):
        key_group_ids([1], 0)


@pytest.mark.parametrize("parallelism", [1, 2, 3, 7, 128])
def test_operator_index_table_gives_the_hashed_operator_indices(parallelism):
    from yarnflink.common.keygroups import OperatorIndexTable

    rng = np.random.default_rng(parallelism)
    table = OperatorIndexTable(128, parallelism)
    cases = [
        rng.integers(0, 10_000, 5000),  # small: the table
        rng.integers(0, 300, 50),
        rng.integers(0, 70_000, 5000),  # the table grows
        rng.integers(-5, 100, 500),  # negative: hashed
        rng.integers(0, 2**40, 500),  # large: hashed
        np.array([2**22 + 1, 3]),
    ]
    for keys in cases:
        want = operator_indices_for_keys(keys, 128, parallelism)
        for form in (keys, pa.array(keys), pa.array(keys.astype(np.int32 if keys.max() < 2**31 else np.int64))):
            assert np.array_equal(table(form), want)
        assert np.array_equal(table(pa.chunked_array([pa.array(keys[:3]), pa.array(keys[3:])])), want)
    assert np.array_equal(
        table(pa.array([2**64 - 1, 5], pa.uint64())),
        operator_indices_for_keys(pa.array([2**64 - 1, 5], pa.uint64()), 128, parallelism),
    )
    assert np.array_equal(table(["a", 3]), operator_indices_for_keys(["a", 3], 128, parallelism))
