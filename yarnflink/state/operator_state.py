"""Operator (non-keyed) state: list state and union list state, as sources and sinks use it
(Flink's ``DefaultOperatorStateBackend``).

* list state (``get_list_state``): on restore with another parallelism, the elements of all old
  subtasks are split over the new subtasks (round robin, ``SPLIT_DISTRIBUTE``);
* union list state (``get_union_list_state``): every new subtask gets every element (``UNION``).

The redistribution itself is planned by ``yarnflink.checkpoint.assignment``; a backend restores
whatever handles it is given (each handle lists the element indices it covers).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor, Future
from typing import Any

import pyarrow as pa

from yarnflink.state.descriptors import ListStateDescriptor
from yarnflink.state.handles import SPLIT_DISTRIBUTE, UNION, OperatorStateHandle, SnapshotResult
from yarnflink.state.heap import StateMigrationError, _dumps
from yarnflink.state.streams import CheckpointStreamFactory, InlineStreamFactory, StateReader, read_inline

SNAPSHOT_FORMAT = "yarnflink-operator-v1"


class OperatorListState:
    """PyFlink's ListState interface over one plain list."""

    def __init__(self, name: str, mode: str):
        self.name = name
        self.mode = mode
        self._items: list = []

    def get(self) -> list:
        return list(self._items)

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError(f"operator state {self.name!r}: you cannot add None to a ListState")
        self._items.append(value)

    def add_all(self, values: Iterable[Any]) -> None:
        for v in values:
            self.add(v)

    def update(self, values: Iterable[Any] | None) -> None:
        self._items = []
        if values:
            self.add_all(values)

    def clear(self) -> None:
        self._items = []

    def __iter__(self) -> Iterator[Any]:
        return iter(self.get())


class _InlineExecutor(Executor):
    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future:  # type: ignore[override]
        f: Future = Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - delivered through the future
            f.set_exception(e)
        return f


class OperatorStateBackend:
    def __init__(self, name: str = "", executor: Executor | None = None):
        self.name = name
        self._states: dict[str, OperatorListState] = {}
        self._restored: dict[str, tuple[str, list]] = {}
        self._executor = executor or _InlineExecutor()

    def _get(self, descriptor: ListStateDescriptor, mode: str) -> OperatorListState:
        name = descriptor.name if hasattr(descriptor, "name") else str(descriptor)
        st = self._states.get(name)
        if st is not None:
            if st.mode != mode:
                raise StateMigrationError(f"operator state {name!r} is registered with mode {st.mode}, not {mode}")
            return st
        st = OperatorListState(name, mode)
        restored = self._restored.pop(name, None)
        if restored is not None:
            if restored[0] != mode:
                raise StateMigrationError(
                    f"operator state {name!r} was checkpointed as {restored[0]} state and is now declared as {mode}"
                )
            st._items = restored[1]
        self._states[name] = st
        return st

    def get_list_state(self, descriptor: ListStateDescriptor) -> OperatorListState:
        return self._get(descriptor, SPLIT_DISTRIBUTE)

    def get_union_list_state(self, descriptor: ListStateDescriptor) -> OperatorListState:
        return self._get(descriptor, UNION)

    def get_registered_state_names(self) -> list[str]:
        return list(self._states)

    def snapshot(
        self, checkpoint_id: int, timestamp: int = 0, stream_factory: CheckpointStreamFactory | None = None
    ) -> Future[SnapshotResult]:
        """Copies the lists now; serializes and writes through the executor (inline by default:
        operator state is small)."""
        factory = stream_factory or InlineStreamFactory()
        copies = [(name, st.mode, list(st._items)) for name, st in self._states.items()]
        copies += [(name, mode, list(items)) for name, (mode, items) in self._restored.items()]
        label = f"{self.name or 'operator'}-chk{checkpoint_id}"

        def write() -> SnapshotResult:
            if not copies:
                return SnapshotResult()
            names: list[str] = []
            values: list[bytes] = []
            states: dict[str, tuple[str, tuple[int, ...]]] = {}
            for name, mode, items in copies:
                states[name] = (mode, tuple(range(len(items))))
                names.extend([name] * len(items))
                values.extend(_dumps(v) for v in items)
            schema = pa.schema(
                [("state", pa.string()), ("value", pa.binary())], metadata={b"format": SNAPSHOT_FORMAT.encode()}
            )
            rb = pa.RecordBatch.from_arrays(
                [pa.array(names, pa.string()), pa.array(values, pa.binary())], schema=schema
            )
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, schema) as w:
                w.write_batch(rb)
            handle = factory.write_state(sink.getvalue().to_pybytes(), label)
            return SnapshotResult(operator=OperatorStateHandle(handle, states))

        return self._executor.submit(write)

    def restore(self, handles: Iterable[OperatorStateHandle], read: StateReader = read_inline) -> None:
        """Restore the elements each handle covers (states are created lazily on first get)."""
        for h in handles:
            with pa.ipc.open_stream(pa.BufferReader(read(h.delegate))) as r:
                if (r.schema.metadata or {}).get(b"format") != SNAPSHOT_FORMAT.encode():
                    raise StateMigrationError("not a yarnflink operator state snapshot")
                table = r.read_all()
            names = table.column("state").to_pylist()
            values = table.column("value").to_pylist()
            by_state: dict[str, list[bytes]] = {}
            for n, v in zip(names, values):
                by_state.setdefault(n, []).append(v)
            for name, (mode, indices) in h.states.items():
                elems = by_state.get(name, [])
                items = [pickle.loads(elems[i]) for i in indices]
                prev = self._restored.get(name)
                if prev is not None and prev[0] != mode:
                    raise StateMigrationError(f"operator state {name!r} is restored with two modes")
                if prev is None:
                    self._restored[name] = (mode, items)
                else:  # several old subtasks' elements for this subtask
                    prev[1].extend(items)
