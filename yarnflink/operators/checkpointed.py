"""Checkpointed operator state for yarnflink's built-in operators.

``CheckpointedValue`` keeps one picklable value per subtask in the operator state backend
(``yarnflink.state.task_state.operator_state_backend_for``): the FileSink its pending files.
``CheckpointedSplits`` keeps a source's splits and their read offsets, redistributable to any
parallelism. ``KeyedDictState`` keeps a keyed operator's dict (key -> state) as
union list state and, on restore, each subtask keeps the keys of its own key groups, so a keyed
reduce / sum / min / max can be restored with another parallelism (same max parallelism).
Without a TaskStateManager (checkpointing off) both do nothing.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from yarnflink.common.keygroups import key_group_of, key_group_range
from yarnflink.state.descriptors import ListStateDescriptor
from yarnflink.state.task_state import operator_state_backend_for


class CheckpointedValue:
    """``legacy``: the name of a SPLIT_DISTRIBUTE list state older versions kept instead; its
    restored elements are in ``self.legacy`` and it is not checkpointed again."""

    def __init__(self, ctx: Any, name: str, union: bool = False, legacy: str | None = None, beside: Any = None) -> None:
        """``beside``: another CheckpointedValue of the operator whose state backend this one
        shares (one backend per operator: a second one would snapshot the first's restored
        lists again)."""
        self.enabled = ctx.state is not None
        self._backend: Any = None
        self._list: Any = None
        self.restored: list = []
        self.legacy: list = []
        if self.enabled:
            self._backend = beside._backend if beside is not None else operator_state_backend_for(ctx)
            desc = ListStateDescriptor(name)
            self._list = self._backend.get_union_list_state(desc) if union else self._backend.get_list_state(desc)
            self.restored = list(self._list.get())
            if legacy and legacy in getattr(self._backend, "_restored", {}):  # registered (and emptied) only then
                old = self._backend.get_list_state(ListStateDescriptor(legacy))
                self.legacy = list(old.get())
                old.update([])

    def stage(self, value: Any) -> None:
        """Set the value the next snapshot of the shared backend writes (for ``beside`` values)."""
        if self.enabled:
            self._list.update([value])

    def snapshot(self, value: Any, checkpoint_id: int, timestamp: int, factory: Any) -> list[Future]:
        if not self.enabled:
            return []
        self._list.update([value])
        return [self._backend.snapshot(checkpoint_id, timestamp, factory)]


class KeyedDictState:
    def __init__(self, ctx: Any, name: str, beside: KeyedDictState | None = None) -> None:
        shared: CheckpointedValue | None = beside.value if beside is not None else None
        self.value: CheckpointedValue = CheckpointedValue(ctx, name, union=True, beside=shared)
        self.max_parallelism = ctx.max_parallelism
        self.groups = key_group_range(ctx.max_parallelism, ctx.parallelism, ctx.subtask_index)

    @property
    def enabled(self) -> bool:
        return self.value.enabled

    def restored(self) -> dict | None:
        """The restored keys of this subtask's key groups (None: nothing restored)."""
        if not self.value.restored:
            return None
        out: dict = {}
        for d in self.value.restored:
            for k, v in d.items():
                if key_group_of(k, self.max_parallelism) in self.groups:
                    out[k] = v
        return out

    def stage(self, state: dict) -> None:
        self.value.stage(dict(state))

    def snapshot(self, state: dict, checkpoint_id: int, timestamp: int, factory: Any) -> list[Future]:
        return self.value.snapshot(dict(state), checkpoint_id, timestamp, factory)


class CheckpointedSplits(CheckpointedValue):
    """A source's splits and how far each is read (Flink's source reader split state), as union
    list state ``source-splits``: a subtask snapshots one entry per split it owns (finished ones
    too); on restore every subtask gets every entry and keeps those of the splits it owns at its
    parallelism now, so each split goes to exactly one subtask whatever the parallelism, and a
    subtask that owns none still knows the source was restored. ``legacy``: the single position
    per subtask of older checkpoints (SPLIT_DISTRIBUTE list state ``source-position``), which is
    only meaningful at the parallelism it was taken with."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx, "source-splits", union=True, legacy="source-position")

    def snapshot(self, entries: Any, checkpoint_id: int, timestamp: int, factory: Any) -> list[Future]:
        if not self.enabled:
            return []
        self._list.update(list(entries))
        return [self._backend.snapshot(checkpoint_id, timestamp, factory)]
