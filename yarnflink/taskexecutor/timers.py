"""A task's processing time (Flink's ``ProcessingTimeService`` feeding the mailbox).

The chain says when it next needs the task's attention without input: an operator's processing
time (timers, periodic watermarks, idleness; wall-clock ms) and the earliest buffered output due
to be flushed (``execution.buffer-timeout``; monotonic s). ``ProcessingTimeTimer`` keeps one
mailbox timer at the earlier of the two, so a task blocked on empty input wakes exactly then, and
a busy task runs it between two units of input.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from yarnflink.operators.chain import OperatorChain
from yarnflink.taskexecutor.mailbox import Mail, ScheduledMail, TaskMailbox


def _now_ms() -> int:
    return int(time.time() * 1000)


class ProcessingTimeTimer:
    """One mailbox timer at the chain's next due time; none while ``suspended()`` (a stop's
    savepoint: no processing time until its outcome) or after ``stop()``."""

    def __init__(self, mailbox: TaskMailbox, chain: OperatorChain, suspended: Callable[[], bool]) -> None:
        self._mailbox = mailbox
        self._chain = chain
        self._suspended = suspended
        self._mail = Mail(self._fire, "processing time")
        self._scheduled: ScheduledMail | None = None
        #: (flush deadline, processing time) the scheduled timer is for
        self._key: tuple[float | None, int | None] | None = None
        self._stopped = False

    def reschedule(self) -> None:
        """After the chain's deadlines may have changed (a unit of input, a checkpoint, a
        resumed stop): move the timer to the new due time. Cheap when nothing changed."""
        chain = self._chain
        if self._stopped or self._suspended():
            key = None
        else:
            key = (chain.next_flush_deadline(), chain.next_processing_time())
            if key == (None, None):
                key = None
        if key == self._key and (key is None or self._scheduled is not None):
            return
        if self._scheduled is not None:
            self._mailbox.cancel(self._scheduled)
            self._scheduled = None
        self._key = key
        if key is None:
            return
        flush, pt = key
        due = flush if flush is not None else float("inf")
        if pt is not None:
            due = min(due, time.monotonic() + (pt - _now_ms()) / 1000.0)
        self._scheduled = self._mailbox.schedule(due, self._mail)

    def stop(self) -> None:
        """No processing time from now on (the input ended)."""
        self._stopped = True
        self.reschedule()

    def _fire(self) -> None:
        self._scheduled = None
        if not self._suspended() and not self._stopped:
            chain = self._chain
            pt = chain.next_processing_time()
            if pt is not None:
                now = _now_ms()
                if pt <= now:
                    chain.on_processing_time(now)
            chain.flush_if_due()
        self.reschedule()
