"""Flink's key groups, computed with a hash that is stable across processes and runs.

Python's ``hash()`` of ``str``/``bytes`` is randomized per process (PYTHONHASHSEED), so it is never
used. Instead every key is hashed by value, vectorized:

* integers (Python ``int``/``bool``, numpy integers, Arrow integer/boolean columns) and floats with
  an integral value in the int64 range (so ``1 == 1.0 == True`` land together, as in a Python dict):
  splitmix64 of the int64 value;
* other floats: splitmix64 of the IEEE bits (NaN and -0.0 canonicalized);
* ``str`` / ``bytes`` (Arrow string/binary columns): pandas' SipHash with its fixed key, then
  splitmix64 (``str`` is hashed as its UTF-8 bytes, so ``"a"`` and ``b"a"`` collide: harmless);
* ``None``: a fixed value;
* anything else (tuples, ints beyond int64, datetimes, ...): SipHash of a canonical string built
  from the value (tuples/lists recursively, the rules above for their items, ``repr`` for other
  objects: a class whose repr contains an address is not a stable key).

The hash depends only on the key's value, never on the other keys of the batch or on whether it
came as a Python value or in an Arrow column of the same type. Then, as Flink does::

    key_group      = hash % max_parallelism
    operator_index = key_group * parallelism // max_parallelism
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

from yarnflink.common.lazy import load_module

KeyArray = Union[pa.Array, pa.ChunkedArray, list, tuple, np.ndarray]

LOWER_BOUND_MAX_PARALLELISM = 128  # Flink's DEFAULT_LOWER_BOUND_MAX_PARALLELISM
UPPER_BOUND_MAX_PARALLELISM = 32768  # 1 << 15

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)
_NONE_HASH = np.uint64(0x9E3779B97F4A7C15)


def _mix(u: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer (in place on a uint64 array, which is returned)."""
    u ^= u >> _S30
    u *= _M1
    u ^= u >> _S27
    u *= _M2
    u ^= u >> _S31
    return u


def _hash_int64(a: np.ndarray) -> np.ndarray:
    return _mix(np.asarray(a, dtype=np.int64).view(np.uint64).copy())


def _hash_float64(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    out = np.empty(len(a), dtype=np.uint64)
    with np.errstate(invalid="ignore"):
        integral = np.isfinite(a) & (a == np.trunc(a)) & (a >= -(2.0**63)) & (a < 2.0**63)
    if integral.all():
        return _hash_int64(a.astype(np.int64))
    out[integral] = _hash_int64(a[integral].astype(np.int64))
    rest = a[~integral].copy()
    bits = rest.view(np.uint64)
    bits[np.isnan(rest)] = np.array(np.nan).view(np.uint64)
    out[~integral] = _mix(bits.copy() ^ np.uint64(0x5851F42D4C957F2D))
    return out


def _hash_strings(a: np.ndarray) -> np.ndarray:
    """a: object array of str / bytes / None."""
    # pandas (~70 MB, ~0.5 s to import) loads on the first string key, not in every process.
    hash_array = load_module("pandas.util").hash_array
    return hash_array(np.asarray(a, dtype=object), categorize=True)


def _canonical(v: Any) -> str:
    t = type(v)
    if t is str:
        return "s:" + v
    if t is bool or isinstance(v, (int, np.integer)):
        return "i:%d" % int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if f == f and f not in (float("inf"), float("-inf")) and f == int(f):
            return "i:%d" % int(f)
        return "f:" + repr(f)
    if isinstance(v, (bytes, bytearray)):
        return "b:" + bytes(v).hex()
    if v is None:
        return "n:"
    if isinstance(v, (tuple, list)):
        return "(" + ",".join(map(_canonical, v)) + ")"
    if isinstance(v, np.str_):
        return "s:" + str(v)
    return "o:" + t.__module__ + "." + t.__qualname__ + ":" + repr(v)


def _hash_canonical(values: list) -> np.ndarray:
    return _hash_strings(np.array([_canonical(v) for v in values] or [], dtype=object))


_INT, _FLOAT, _STR, _NONE, _OTHER = range(5)


def _category(t: type) -> int:
    if t is bool or t is int or issubclass(t, (np.integer, np.bool_)) or (issubclass(t, int)):
        return _INT
    if t is float or issubclass(t, (float, np.floating)):
        return _FLOAT
    if t is str or t is bytes or issubclass(t, (str, bytes)):
        return _STR
    if t is type(None):
        return _NONE
    return _OTHER


def _hash_ints_list(values: list) -> np.ndarray:
    try:
        return _hash_int64(np.array(values, dtype=np.int64))
    except OverflowError:
        out = np.empty(len(values), dtype=np.uint64)
        small = np.fromiter((_INT64_MIN <= int(v) <= _INT64_MAX for v in values), dtype=bool, count=len(values))
        idx_small = np.flatnonzero(small)
        idx_big = np.flatnonzero(~small)
        out[idx_small] = _hash_int64(np.array([int(values[i]) for i in idx_small], dtype=np.int64))
        out[idx_big] = _hash_canonical([values[i] for i in idx_big])
        return out


def _hash_category(cat: int, values: list) -> np.ndarray:
    if cat == _INT:
        return _hash_ints_list(values)
    if cat == _FLOAT:
        return _hash_float64(np.array(values, dtype=np.float64))
    if cat == _STR:
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
        return _hash_strings(arr)
    if cat == _NONE:
        return np.full(len(values), _NONE_HASH, dtype=np.uint64)
    return _hash_canonical(values)


def _hash_list(keys: list) -> np.ndarray:
    n = len(keys)
    if n == 0:
        return np.empty(0, dtype=np.uint64)
    types = set(map(type, keys))
    cats = {t: _category(t) for t in types}
    distinct = set(cats.values())
    if len(distinct) == 1:
        return _hash_category(distinct.pop(), keys)
    cat_of = np.fromiter((cats[type(k)] for k in keys), dtype=np.int8, count=n)
    out = np.empty(n, dtype=np.uint64)
    for cat in distinct:
        idx = np.flatnonzero(cat_of == cat)
        out[idx] = _hash_category(cat, [keys[i] for i in idx])
    return out


def _hash_arrow(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    t = arr.type
    if pat.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if len(arr) == 0:
        return np.empty(0, dtype=np.uint64)
    if arr.null_count == 0:
        if pat.is_integer(t):
            if pat.is_uint64(t):
                if pc.max(arr).as_py() > _INT64_MAX:
                    return _hash_list(arr.to_pylist())
            return _hash_int64(arr.to_numpy(zero_copy_only=False).astype(np.int64, copy=False))
        if pat.is_boolean(t):
            return _hash_int64(arr.to_numpy(zero_copy_only=False).astype(np.int64))
        if pat.is_floating(t):
            return _hash_float64(arr.to_numpy(zero_copy_only=False).astype(np.float64, copy=False))
        if pat.is_string(t) or pat.is_large_string(t) or pat.is_binary(t) or pat.is_large_binary(t):
            return _hash_strings(arr.to_numpy(zero_copy_only=False))
    return _hash_list(arr.to_pylist())


def key_hashes(keys: KeyArray) -> np.ndarray:
    """Stable 64-bit hashes (uint64 array) of the keys."""
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        return _hash_arrow(keys)
    if isinstance(keys, np.ndarray):
        if keys.dtype.kind in "iub":
            return _hash_int64(keys.astype(np.int64, copy=False))
        if keys.dtype.kind == "f":
            return _hash_float64(keys)
        keys = keys.tolist()
    return _hash_list(list(keys))


def key_group_ids(keys: KeyArray, max_parallelism: int) -> np.ndarray:
    """Key group (int32 array) of each key: ``hash(key) % max_parallelism``."""
    if not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(f"max_parallelism must be in 1..{UPPER_BOUND_MAX_PARALLELISM}, got {max_parallelism}")
    return (key_hashes(keys) % np.uint64(max_parallelism)).astype(np.int32)


def key_group_of(key: Any, max_parallelism: int) -> int:
    """Key group of one key (same result as ``key_group_ids([key], ...)[0]``)."""
    return int(key_group_ids([key], max_parallelism)[0])


def operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group):
    """Flink's ``KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup``; ``key_group`` may be
    an int or an integer numpy array."""
    if isinstance(key_group, np.ndarray):
        return (key_group.astype(np.int64) * parallelism // max_parallelism).astype(np.int32)
    return int(key_group) * parallelism // max_parallelism


def operator_indices_for_keys(keys: KeyArray, max_parallelism: int, parallelism: int) -> np.ndarray:
    """Index of the parallel operator instance (int32 array) that owns each key."""
    return operator_index_for_key_group(max_parallelism, parallelism, key_group_ids(keys, max_parallelism))


class OperatorIndexTable:
    """``operator_indices_for_keys`` for one (max parallelism, parallelism), with a table for
    small non-negative integer keys: their operator index is looked up (one numpy take per
    batch) instead of hashed per row; the table is made by the same function over
    ``0..size-1``, so the result is the same. Other keys are hashed."""

    #: integer keys in [0, this) may use the table (int8/int16/int32 per entry)
    LIMIT = 1 << 22

    def __init__(self, max_parallelism: int, parallelism: int):
        self.max_parallelism = max_parallelism
        self.parallelism = parallelism
        self.table = np.empty(0, dtype=np.int32)

    def __call__(self, keys: KeyArray) -> np.ndarray:
        a: np.ndarray | None = None
        if isinstance(keys, (pa.Array, pa.ChunkedArray)):
            if pat.is_integer(keys.type) and keys.null_count == 0 and len(keys):
                a = keys.to_numpy()
        elif isinstance(keys, np.ndarray) and keys.dtype.kind in "iu" and len(keys):
            a = keys
        if a is not None:
            lo, hi = int(a.min()), int(a.max())
            if lo >= 0 and hi < min(self.LIMIT, max(1 << 16, 16 * len(a))):
                if hi >= len(self.table):
                    size = min(self.LIMIT, max(hi + 1, 2 * len(self.table)))
                    self.table = operator_indices_for_keys(
                        np.arange(size, dtype=np.int64), self.max_parallelism, self.parallelism
                    )
                return self.table[a]
        return operator_indices_for_keys(keys, self.max_parallelism, self.parallelism)


def key_group_range(max_parallelism: int, parallelism: int, operator_index: int) -> range:
    """Flink's ``computeKeyGroupRangeForOperatorIndex``: the key groups an operator instance owns."""
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return range(start, end + 1)


def _round_up_to_power_of_two(x: int) -> int:
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def default_max_parallelism(parallelism: int) -> int:
    """Flink's ``computeDefaultMaxParallelism``:
    ``min(max(roundUpToPowerOfTwo(p + p // 2), 128), 32768)``."""
    return min(
        max(_round_up_to_power_of_two(parallelism + parallelism // 2), LOWER_BOUND_MAX_PARALLELISM),
        UPPER_BOUND_MAX_PARALLELISM,
    )
