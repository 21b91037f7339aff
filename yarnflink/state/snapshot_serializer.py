"""Bulk serialization of the entries of a ``hashmap`` snapshot into Arrow columns.

A keyed-state snapshot is an Arrow IPC stream whose ``entry`` and ``value`` columns hold one
pickle per row: of ``(key, namespace)`` and of the stored value. Calling ``pickle.dumps`` once
per entry (and copying every result into a column) costs ~0.5 s of CPU per 100 MB of state, all
of it holding the GIL the task thread needs. Most state is made of plain scalars, though: keys
that are ``int`` / ``str`` / ``bytes`` without a namespace, values that are ``bytes`` / ``str`` /
``int`` / ``float``. For a run of rows of one such type this module writes the pickle opcodes
itself, for all rows at once: a fixed-width numpy record per row for numbers, and one
``bytes.join`` over ``(opcode + length, payload, STOP)`` pieces for strings and bytes (the copy
of a large join runs without the GIL). The result is a valid pickle per row -- ``pickle.loads``
returns an object equal to the original, of the same type -- but not necessarily the bytes
``pickle.dumps`` would produce (no protocol header, no frames, no memo). Anything else (lists,
dicts, TTL wrappers, windows as namespaces, ints beyond 64 bits, ``bool``, str subclasses) is
pickled one object at a time, as before.

The opcodes used come from pickle protocols 1-3 (BINUNICODE, BINFLOAT, LONG1, BINBYTES;
``pickletools`` documents them), which every later protocol reads too.
"""

from __future__ import annotations

import io
import operator
import pickle
import struct
from collections.abc import Callable, Sequence
from functools import partial
from itertools import repeat
from typing import Any

import cloudpickle
import numpy as np
import pyarrow as pa

#: BINBYTES: 4-byte little-endian length, then the bytes
_BINBYTES = b"B"
#: BINUNICODE: 4-byte little-endian length, then UTF-8
_BINUNICODE = b"X"
#: LONG1 with 8 bytes: a little-endian two's complement integer
_LONG1_8 = b"\x8a\x08"
#: BINFLOAT: an 8-byte big-endian IEEE 754 double
_BINFLOAT = b"G"
#: NONE, TUPLE2, STOP: what follows a key to make it the pickle of ``(key, None)``
_NONE_TUPLE2_STOP = b"N\x86."
_STOP = b"."
_PREFIX = struct.Struct("<cI")
#: BINBYTES / BINUNICODE carry a 32-bit length; longer payloads take the per-object path
_MAX_FRAMED_LEN = 2**31 - 1
_DUMPS: Callable[[Any], bytes] = partial(pickle.dumps, protocol=pickle.HIGHEST_PROTOCOL)


def dumps(obj: Any) -> bytes:
    """``pickle.dumps`` of ``obj`` (cloudpickle for what pickle cannot handle: lambdas, ...)."""
    try:
        return _DUMPS(obj)
    except Exception:  # noqa: BLE001 - whatever pickle refuses, cloudpickle may take
        return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def binary_array(values: Sequence[bytes]) -> pa.Array:
    """``pa.array(values, pa.large_binary())``, built from one ``join`` and numpy offsets (ten
    times faster than ``pa.array``, and the copy of a large join runs without the GIL)."""
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    return _from_lengths(lengths, b"".join(values))


def pickled_column(objs: Sequence[Any], pause: Callable[[], None] | None = None) -> pa.Array:
    """A ``large_binary`` array whose element ``i`` is a pickle of ``objs[i]``; ``pause`` is
    called between slices of ``PICKLE_SLICE`` objects pickled one at a time (to let another
    thread have the GIL: a ``map`` of ``pickle.dumps`` never lets it go)."""
    bulk = _bulk_pickles(objs, _STOP)
    return bulk if bulk is not None else binary_array(_pickle_each(objs, pause))


#: key types a ``hashmap`` table stores bare for the void namespace (see ``entry_key``): the
#: garbage collector does not track them, so neither a dict of them with such values
PLAIN_KEY_TYPES = frozenset((int, str, bytes, float, bool))


def entry_key(key: Any, namespace: Any) -> Any:
    """How a ``hashmap`` table stores the entry ``(key, namespace)``: the key alone when the
    namespace is ``None`` and the key of a plain type, the tuple otherwise. A tuple is tracked by
    the garbage collector from its creation, and one written into a dict makes the dict tracked:
    a full collection would then walk every entry of the dict (~0.3 s per million entries with a
    1 GB snapshot streaming through the caches). The two forms cannot be confused: a stored
    entry that is a tuple is always ``(key, namespace)``."""
    return key if namespace is None and type(key) in PLAIN_KEY_TYPES else (key, namespace)


def split_entry_key(stored: Any) -> tuple[Any, Any]:
    """``(key, namespace)`` of a stored entry key (the inverse of ``entry_key``)."""
    return (stored, None) if type(stored) in PLAIN_KEY_TYPES else stored


def pickled_entry_column(entries: Sequence[Any], pause: Callable[[], None] | None = None) -> pa.Array:
    """A ``large_binary`` array whose element ``i`` is a pickle of the ``(key, namespace)``
    tuple of the stored entry key ``entries[i]`` (``entry_key``'s form): in bulk when no entry
    has a namespace and the keys are of one plain type, one ``pickle.dumps`` per entry otherwise
    (``pause`` as for ``pickled_column``)."""
    if entries and type(entries[0]) in PLAIN_KEY_TYPES:
        bulk = _bulk_pickles(entries, _NONE_TUPLE2_STOP)  # all bare keys of one type
        if bulk is not None:
            return bulk
    entries = [split_entry_key(e) for e in entries]
    if all(map(operator.is_, map(operator.itemgetter(1), entries), repeat(None))):
        bulk = _bulk_pickles(list(map(operator.itemgetter(0), entries)), _NONE_TUPLE2_STOP)
        if bulk is not None:
            return bulk
    return binary_array(_pickle_each(entries, pause))


def _bulk_pickles(objs: Sequence[Any], suffix: bytes) -> pa.Array | None:
    """Pickles of ``objs`` with ``suffix`` (the opcodes after the object) written in bulk, or
    None if ``objs`` are not all of one type this module writes itself."""
    if not objs:
        return binary_array([])
    types = set(map(type, objs))
    if len(types) != 1:
        return None
    kind = types.pop()
    try:
        if kind is bytes:
            return _framed(_BINBYTES, objs, suffix)
        if kind is str:
            return _framed(_BINUNICODE, list(map(str.encode, objs)), suffix)  # strict: surrogates fall back
        if kind is int:
            return _fixed(_LONG1_8, np.fromiter(objs, dtype="<i8", count=len(objs)), suffix)
        if kind is float:
            return _fixed(_BINFLOAT, np.fromiter(objs, dtype=">f8", count=len(objs)), suffix)
    except (OverflowError, UnicodeEncodeError):
        return None  # ints beyond 64 bits, strings with lone surrogates
    return None


def _framed(opcode: bytes, payloads: Sequence[bytes], suffix: bytes) -> pa.Array | None:
    """``opcode + length + payload + suffix`` per payload, all in one ``join`` (of a list
    interleaved by slice assignment: no tuple per row for the garbage collector to count)."""
    lengths = list(map(len, payloads))
    if max(lengths) > _MAX_FRAMED_LEN:
        return None
    pieces: list[bytes] = [suffix] * (3 * len(payloads))
    pieces[0::3] = map(_PREFIX.pack, repeat(opcode), lengths)
    pieces[1::3] = payloads
    return _from_lengths(np.array(lengths, dtype=np.int64) + (_PREFIX.size + len(suffix)), b"".join(pieces))


def _fixed(opcode: bytes, numbers: np.ndarray, suffix: bytes) -> pa.Array:
    """``opcode + number + suffix`` per number: one fixed-width numpy record each."""
    record = np.dtype([("op", f"S{len(opcode)}"), ("n", numbers.dtype), ("end", f"S{len(suffix)}")])
    rows = np.empty(len(numbers), dtype=record)
    rows["op"] = opcode
    rows["n"] = numbers
    rows["end"] = suffix
    offsets = np.arange(len(numbers) + 1, dtype=np.int64) * record.itemsize
    return pa.Array.from_buffers(
        pa.large_binary(), len(numbers), [None, pa.py_buffer(offsets), pa.py_buffer(rows.view(np.uint8))]
    )


def _from_lengths(lengths: np.ndarray, data: bytes) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.large_binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


#: objects pickled one at a time between two calls of ``pause``
PICKLE_SLICE = 256


def _pickle_each(objs: Sequence[Any], pause: Callable[[], None] | None) -> list[bytes]:
    pickles: list[bytes] = []
    for start in range(0, len(objs), PICKLE_SLICE):
        if start and pause is not None:
            pause()
        pickles += _pickle_slice(objs[start : start + PICKLE_SLICE])
    return pickles


def _pickle_slice(objs: Sequence[Any]) -> list[bytes]:
    try:
        return list(map(_DUMPS, objs))
    except Exception:  # noqa: BLE001 - one of them needs cloudpickle: do them one by one
        return [dumps(o) for o in objs]


class BufferPieces(io.RawIOBase):
    """A write-only file for ``pa.PythonFile`` that keeps what is written without copying it
    (Arrow hands over the column buffers themselves). It is also what a snapshot hands to its
    stream factory: ``len()``, ``buffers()`` to write one after the other (no copy of the
    payload), ``bytes()`` for small, inline state."""

    def __init__(self) -> None:
        super().__init__()
        self._pieces: list[Any] = []
        self._size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:  # type: ignore[override]
        n = memoryview(data).nbytes
        if n:
            self._pieces.append(data)
            self._size += n
        return n

    def __len__(self) -> int:
        return self._size

    def __bytes__(self) -> bytes:
        return b"".join(self._pieces)

    def buffers(self) -> list[memoryview]:
        """What was written, in order, as byte ``memoryview``s of the pieces themselves."""
        return [memoryview(p).cast("B") for p in self._pieces]

    def release(self, pause: Callable[[], None], every: int = 16) -> None:
        """Let go of the pieces a few at a time, calling ``pause`` in between (1 GB of them
        freed at once held the GIL for ~0.2 s); nothing is left afterwards."""
        while self._pieces:
            del self._pieces[-every:]
            pause()
        self._size = 0

    def contiguous(self) -> memoryview:
        """Everything written, copied once into one Arrow buffer (outside the GIL)."""
        out = pa.allocate_buffer(self._size)
        sink = pa.FixedSizeBufferWriter(out)
        for piece in self._pieces:
            sink.write(piece)
        return memoryview(out)
