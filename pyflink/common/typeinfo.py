"""``pyflink.common.typeinfo``: ``Types`` and the type informations (yarnflink.common.typeinfo)."""

from yarnflink.common.typeinfo import (
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    PickledBytesTypeInfo,
    RowTypeInfo,
    TupleTypeInfo,
    TypeInformation,
    Types,
)

__all__ = [
    "BasicTypeInfo",
    "ListTypeInfo",
    "MapTypeInfo",
    "PickledBytesTypeInfo",
    "RowTypeInfo",
    "TupleTypeInfo",
    "TypeInformation",
    "Types",
]
