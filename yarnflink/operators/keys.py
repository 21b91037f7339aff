"""Key extraction for keyed operators and hash partitioning."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from yarnflink.common.records import (
    KIND_PICKLE,
    Batch,
    column_of,
    field_getter,
    record_kind,
)
from yarnflink.operators.specs import KeySelectorSpec


def unwrap_function(fn: Any, method: str) -> tuple[Callable, Any | None]:
    """``(callable, rich_function_or_None)``: a PyFlink-style function object (with ``method``,
    e.g. ``map``) is called through that method and gets ``open``/``close``; anything else must be
    callable."""
    if fn is None:
        raise TypeError("no function given")
    bound = getattr(fn, method, None)
    if bound is not None and callable(bound) and not isinstance(fn, type):
        return bound, fn
    if callable(fn):
        rich = fn if not isinstance(fn, type) and callable(getattr(fn, "open", None)) else None
        return fn, rich
    raise TypeError(f"{fn!r} is neither callable nor has a {method}() method")


class KeyExtractor:
    """Extracts the keys of a batch according to a KeySelectorSpec."""

    def __init__(self, spec: KeySelectorSpec):
        if spec is None:
            raise ValueError("a keyed operator needs a key selector")
        self.spec = spec
        self.field = spec.field
        self.rich: Any | None = None
        self.fn: Callable[..., Any] | None = None
        if spec.fn is not None:
            fn, self.rich = unwrap_function(spec.fn, "get_key")
            self.fn = fn
            self._rows_keys: Callable[[list], list] = lambda rows: list(map(fn, rows))
        elif spec.field is not None:
            self._rows_keys = field_getter(spec.field)
        else:
            raise ValueError("KeySelectorSpec needs a field or a fn")

    @property
    def is_field(self) -> bool:
        return self.fn is None

    def describe(self) -> str:
        return self.spec.describe()

    def keys_of_rows(self, rows: list) -> list:
        return self._rows_keys(rows)

    def key_of(self, record: Any) -> Any:
        return self._rows_keys([record])[0]

    def arrow_key_column(self, rb: pa.RecordBatch) -> int | None:
        """Index of the key column of ``rb`` when the key is a field and ``rb`` is columnar
        (not pickled); None otherwise."""
        if self.fn is not None or record_kind(rb) == KIND_PICKLE:
            return None
        assert self.field is not None  # a key is a field or a function
        return column_of(rb, self.field)[0]

    def keys_of_batch(self, batch: Batch) -> pa.Array | list:
        """An Arrow column when the batch has its Arrow form (and the key is a field), else a
        list. Both give the same key groups."""
        if self.fn is None and batch.has_arrow:
            rb = batch.arrow()
            idx = self.arrow_key_column(rb)
            if idx is not None:
                return rb.column(idx)
        return self.keys_of_rows(batch.rows())
