"""Cancelling a task whose thread does not end by itself (Flink's TaskCanceler, TaskInterrupter
and TaskCancelerWatchDog).

``Task.cancel`` first asks politely: the cancellation flag stops the per-record loops of the
operators between two records, a cancel mail stops the mailbox loop, and the input gate and
result partitions are released so blocked reads and writes return. User code that stays inside
one call (a long pure-Python loop, a sleep per call that never returns to the record loop) is
then interrupted: ``TaskInterrupted`` is raised asynchronously in the task thread
(``PyThreadState_SetAsyncExc``), first ``first_interrupt_s`` after the cancel and again every
``task.cancellation.interval``. An asynchronous exception interrupts Python bytecode only: a
thread inside one C call (``time.sleep``, a socket read, a pyarrow kernel) sees it when that call
returns. A task still alive ``task.cancellation.timeout`` after the cancel (0: never) is a fatal
error of the TaskExecutor: it logs why and its process exits, and its driver starts a new one.

``CancellationWatch`` decides (events in, actions out, a clock passed in); ``TaskCanceler`` is its
thread, which waits on the task thread itself (``join``) so it ends as soon as the task does.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from yarnflink.common.config import ConfigError, Configuration
from yarnflink.taskexecutor.options import TaskManagerOptions

log = logging.getLogger(__name__)

__all__ = [
    "CancellationSettings",
    "CancellationWatch",
    "FailFatally",
    "Interrupt",
    "TaskCanceler",
    "TaskInterrupted",
    "clear_async_exception",
    "raise_async_exception",
]

#: The first interrupt comes at most this long after the cancel: the polite path (flag, mail,
#: released channels) ends almost every task before it, and an asynchronous exception may land
#: anywhere in the thread's Python code, so it is kept for the tasks that need it.
FIRST_INTERRUPT_S = 1.0


class TaskInterrupted(BaseException):
    """Raised asynchronously in a cancelled task's thread. A BaseException (as KeyboardInterrupt):
    user code's ``except Exception`` does not swallow it."""


@dataclass(frozen=True, slots=True)
class Interrupt:
    """Raise TaskInterrupted in the task thread now."""


@dataclass(frozen=True, slots=True)
class FailFatally:
    """The task did not end within the timeout: the TaskExecutor process must go."""

    reason: str


@dataclass(frozen=True, slots=True)
class CancellationSettings:
    """``task.cancellation.interval`` and ``task.cancellation.timeout`` in seconds."""

    interval_s: float = 30.0
    timeout_s: float = 180.0

    def __post_init__(self) -> None:
        if not self.interval_s > 0:
            raise ConfigError(
                f"invalid value for 'task.cancellation.interval': must be positive, got {self.interval_s} s"
            )
        if not self.timeout_s >= 0:
            raise ConfigError(
                f"invalid value for 'task.cancellation.timeout': must not be negative, got {self.timeout_s} s"
            )

    @classmethod
    def from_config(cls, config: Configuration) -> CancellationSettings:
        return cls(
            config.get_seconds(TaskManagerOptions.TASK_CANCELLATION_INTERVAL) or 0.0,
            config.get_seconds(TaskManagerOptions.TASK_CANCELLATION_TIMEOUT) or 0.0,
        )

    def overridden_by(self, job_config: Mapping[str, str]) -> CancellationSettings:
        """A job's own settings (as Flink's ExecutionConfig) win over the TaskExecutor's."""
        keys = (TaskManagerOptions.TASK_CANCELLATION_INTERVAL.key, TaskManagerOptions.TASK_CANCELLATION_TIMEOUT.key)
        own = {k: v for k, v in job_config.items() if k in keys}
        if not own:
            return self
        config = Configuration(own, source="the job's configuration")
        interval, timeout = (config.get_seconds(k) if k in own else None for k in keys)
        return CancellationSettings(
            self.interval_s if interval is None else interval, self.timeout_s if timeout is None else timeout
        )


class CancellationWatch:
    """When to interrupt a cancelled task and when to give up on it, as a pure schedule.

    ``interval_s``: between two interrupts (Flink's ``task.cancellation.interval``);
    ``timeout_s``: after the cancel, the task's thread must have ended (0: no timeout)."""

    def __init__(
        self,
        task_name: str,
        cancelled_at: float,
        interval_s: float,
        timeout_s: float,
        first_interrupt_s: float = FIRST_INTERRUPT_S,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"task.cancellation.interval must be positive, got {interval_s} s")
        if timeout_s < 0:
            raise ValueError(f"task.cancellation.timeout must not be negative, got {timeout_s} s")
        self.task_name = task_name
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._cancelled_at = cancelled_at
        self._next_interrupt = cancelled_at + min(first_interrupt_s, interval_s)
        self._deadline = cancelled_at + timeout_s if timeout_s > 0 else None
        self.interrupts = 0
        self.failed = False

    def next_due(self) -> float | None:
        """When ``on_tick`` has something to do next (None: nothing ever again)."""
        if self.failed:
            return None
        if self._deadline is not None and self._deadline <= self._next_interrupt:
            return self._deadline
        return self._next_interrupt

    def on_tick(self, now: float) -> list[Interrupt | FailFatally]:
        """The task's thread is still alive at ``now``: what to do."""
        if self.failed:
            return []
        if self._deadline is not None and now >= self._deadline:
            self.failed = True
            return [
                FailFatally(
                    f"task {self.task_name} did not react to cancelling within task.cancellation.timeout "
                    f"({self.timeout_s:g} s; interrupted {self.interrupts} times; it is stuck in user code "
                    "that ignores the interrupt or in a blocking C call)"
                )
            ]
        if now < self._next_interrupt:
            return []
        self.interrupts += 1
        # the next one an interval after this one (a late tick does not bunch them up)
        self._next_interrupt = now + self.interval_s
        return [Interrupt()]


def raise_async_exception(thread_id: int, exc_type: type[BaseException]) -> bool:
    """Raises ``exc_type`` in thread ``thread_id`` at its next Python bytecode; False if no such
    thread is running."""
    n: int = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc_type))
    if n > 1:  # cannot happen for one id; undo rather than hit several threads
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)
        return False
    return n == 1


def clear_async_exception(thread_id: int) -> None:
    """Drops an asynchronous exception not yet raised in thread ``thread_id``."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)


class TaskCanceler:
    """The thread that follows one cancelled task until its thread ends: interrupts it
    (``interrupt``) and, past the timeout, reports a fatal error (``fatal_error``)."""

    def __init__(
        self,
        watch: CancellationWatch,
        task_thread: threading.Thread,
        interrupt: Callable[[], None],
        fatal_error: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.watch = watch
        self._task_thread = task_thread
        self._interrupt = interrupt
        self._fatal_error = fatal_error
        self._clock = clock
        self._thread = threading.Thread(target=self.run, name=f"Canceler of {watch.task_name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def run(self) -> None:
        while self._task_thread.is_alive():
            due = self.watch.next_due()
            if due is None:
                return
            self._task_thread.join(max(0.0, due - self._clock()))
            if not self._task_thread.is_alive():
                return
            for action in self.watch.on_tick(self._clock()):
                if isinstance(action, Interrupt):
                    log.info(
                        "interrupting task %s (cancelled, still running; interrupt %d)",
                        self.watch.task_name,
                        self.watch.interrupts,
                    )
                    self._interrupt()
                else:
                    log.critical("%s", action.reason)
                    self._fatal_error(action.reason)
                    return
