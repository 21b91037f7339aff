"""Input channel state of unaligned checkpoints (Flink's ``ChannelStateWriter`` / reader).

The in-flight record batches one input channel delivered between the task's snapshot and that
channel's barrier are written as Arrow IPC: a sequence of ``<8-byte little-endian length><an IPC
stream of one batch>`` (batches of one channel may differ in schema). The bytes go through the
checkpoint's state-file factory like operator state (inline in ``_metadata`` below
``execution.checkpointing.data-inline-threshold``). On restore they are read back, channel by
channel, and replayed through the task's chain before it reads the network.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa

from yarnflink.state.handles import ByteStreamStateHandle, InputChannelStateHandle, StreamStateHandle

_LEN = struct.Struct("<Q")


def serialize_batches(batches: Iterable[pa.RecordBatch]) -> bytes:
    out = bytearray()
    for rb in batches:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, rb.schema) as writer:
            writer.write_batch(rb)
        buf = sink.getvalue()
        out += _LEN.pack(buf.size)
        out += buf.to_pybytes()
    return bytes(out)


def deserialize_batches(data: bytes) -> list[pa.RecordBatch]:
    batches: list[pa.RecordBatch] = []
    pos = 0
    view = memoryview(data)
    while pos < len(data):
        if pos + _LEN.size > len(data):
            raise ValueError("truncated input channel state")
        (n,) = _LEN.unpack_from(view, pos)
        pos += _LEN.size
        if pos + n > len(data):
            raise ValueError("truncated input channel state")
        reader = pa.ipc.open_stream(pa.py_buffer(bytes(view[pos : pos + n])))
        batches.extend(reader)
        pos += n
    return batches


def write_channel_state(
    recorded: dict[int, list[pa.RecordBatch]], num_channels: int, factory: Any, name: str
) -> list[InputChannelStateHandle]:
    """One handle per channel with recorded batches (channel order). ``factory``: a
    ``CheckpointStreamFactory`` (``write_state(data, name)``), None: inline bytes."""
    handles = []
    for ch in sorted(recorded):
        batches = [b for b in recorded[ch] if b is not None]
        if not batches:
            continue
        data = serialize_batches(batches)
        label = f"{name}-channel-{ch}"
        delegate: StreamStateHandle = (
            factory.write_state(data, label) if factory is not None else ByteStreamStateHandle(label, data)
        )
        handles.append(InputChannelStateHandle(ch, num_channels, delegate))
    return handles


def read_channel_state(
    handles: Iterable[InputChannelStateHandle],
    reader: Callable[[StreamStateHandle], bytes],
    num_channels: int | None = None,
    where: str = "the restored checkpoint",
) -> list[pa.RecordBatch]:
    """The batches to replay, in channel order. Refuses handles recorded with another number of
    input channels (the upstream was rescaled)."""
    out: list[pa.RecordBatch] = []
    for h in sorted(handles, key=lambda h: h.channel):
        if num_channels is not None and h.num_channels != num_channels:
            raise ValueError(
                f"{where} has in-flight data of an unaligned checkpoint recorded with {h.num_channels} input "
                f"channels, but the task now has {num_channels} (the upstream was rescaled); in-flight data "
                "cannot be rescaled: restore with the same parallelism or from an aligned checkpoint"
            )
        out.extend(deserialize_batches(reader(h.delegate)))
    return out
