"""SharedStateRegistry: which retained checkpoints refer to which shared state file, as pure logic
(Flink's ``SharedStateRegistry``). The CheckpointCoordinator owns one; no I/O.

Incremental checkpoints (``execution.checkpointing.incremental``) refer to immutable files in the
job's ``shared/`` directory (``SharedFileHandle``: path, size, content hash) that later
checkpoints refer to again. A file may go once no retained checkpoint refers to it:

* ``register(checkpoint_id, handles)`` when a checkpoint is finalized (before its ``_metadata`` is
  written: from then on its files must stay). A checkpoint that refers to a file already let go
  (``discarded``) is refused (``SharedStateDiscardedError``): the coordinator aborts it. That
  happens when a backend built on a checkpoint it had seen confirmed while a newer checkpoint,
  which no longer needs those files, subsumed it.
* ``unregister(checkpoint_id)`` when a checkpoint is subsumed, discarded, or dropped: the files no
  registered checkpoint refers to any more, which the caller deletes (through the deletion rules
  of ``checkpoint/cleanup.py``). They are remembered as discarded from then on.
* ``unknown(handles)``: the files of an aborted checkpoint or of a late acknowledgement that the
  registry has never seen. Backends refer only to files of checkpoints confirmed to them as
  completed, so no other checkpoint can refer to these: they may be deleted at once.
* ``SharedStateRegistry.rebuilt(checkpoints)``: a new leader (master failover) or a coordinator
  that takes over retained checkpoints rebuilds the counts from their metadata.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable

from yarnflink.checkpoint.metadata import CompletedCheckpoint
from yarnflink.state.handles import SharedFileHandle

#: discarded paths remembered (to refuse a checkpoint that refers to one); the oldest are forgotten
#: beyond this many (a restore still checks that every shared file exists)
MAX_DISCARDED_REMEMBERED = 65536


class SharedStateDiscardedError(Exception):
    """A checkpoint refers to a shared file that was already let go (or to a path registered with
    another size or content)."""

    def __init__(self, checkpoint_id: int, path: str, problem: str):
        super().__init__(f"checkpoint {checkpoint_id} refers to shared state file {path}, which {problem}")
        self.checkpoint_id = checkpoint_id
        self.path = path


class SharedStateRegistry:
    def __init__(self) -> None:
        self._handles: dict[str, SharedFileHandle] = {}
        self._refs: dict[str, set[int]] = {}
        self._by_checkpoint: dict[int, set[str]] = {}
        self._discarded: collections.OrderedDict[str, int] = collections.OrderedDict()

    @classmethod
    def rebuilt(cls, checkpoints: Iterable[CompletedCheckpoint]) -> SharedStateRegistry:
        """The registry of ``checkpoints`` (the retained ones a coordinator takes over)."""
        registry = cls()
        for c in checkpoints:
            registry.register(c.checkpoint_id, c.shared_handles())
        return registry

    # ------------------------------------------------------------------ queries
    def __len__(self) -> int:
        return len(self._handles)

    def __contains__(self, path: object) -> bool:
        return path in self._handles

    def referenced(self) -> dict[str, SharedFileHandle]:
        """Every file a registered checkpoint refers to, by path."""
        return dict(self._handles)

    def checkpoints_of(self, path: str) -> set[int]:
        return set(self._refs.get(path, ()))

    def registered_checkpoints(self) -> list[int]:
        return sorted(self._by_checkpoint)

    def is_discarded(self, path: str) -> bool:
        return path in self._discarded

    def unknown(self, handles: Iterable[SharedFileHandle]) -> list[SharedFileHandle]:
        """The files among ``handles`` never registered nor discarded (each once)."""
        out: dict[str, SharedFileHandle] = {}
        for h in handles:
            if h.path not in self._handles and h.path not in self._discarded:
                out.setdefault(h.path, h)
        return list(out.values())

    # ------------------------------------------------------------------ changes
    def register(self, checkpoint_id: int, handles: Iterable[SharedFileHandle]) -> None:
        """``checkpoint_id`` refers to ``handles`` (again: idempotent). Nothing is registered if
        one of them was discarded or is registered with another size or hash."""
        handles = list(handles)
        for h in handles:
            if h.path in self._discarded:
                raise SharedStateDiscardedError(
                    checkpoint_id,
                    h.path,
                    f"was let go when checkpoint {self._discarded[h.path]} was discarded "
                    "(no retained checkpoint referred to it)",
                )
            known = self._handles.get(h.path)
            if known is not None and (known.size, known.content_hash) != (h.size, h.content_hash):
                raise SharedStateDiscardedError(
                    checkpoint_id,
                    h.path,
                    f"is registered as {known.size} bytes with {known.content_hash}, not {h.size} bytes with "
                    f"{h.content_hash}",
                )
        paths = self._by_checkpoint.setdefault(checkpoint_id, set())
        for h in handles:
            self._handles.setdefault(h.path, h)
            self._refs.setdefault(h.path, set()).add(checkpoint_id)
            paths.add(h.path)

    def unregister(self, checkpoint_id: int) -> list[SharedFileHandle]:
        """``checkpoint_id`` refers to nothing any more: the files no other registered checkpoint
        refers to, now discarded (the caller deletes them)."""
        freed = []
        for path in sorted(self._by_checkpoint.pop(checkpoint_id, ())):
            refs = self._refs.get(path)
            if refs is None:
                continue
            refs.discard(checkpoint_id)
            if not refs:
                del self._refs[path]
                freed.append(self._handles.pop(path))
                self._discarded[path] = checkpoint_id
        while len(self._discarded) > MAX_DISCARDED_REMEMBERED:
            self._discarded.popitem(last=False)
        return freed
