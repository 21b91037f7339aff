"""A task's mailbox (Flink's ``TaskMailbox`` and ``MailboxProcessor``).

Everything that must happen on a task's thread arrives as a ``Mail`` in one queue: input becoming
available, checkpoint triggers, checkpoint completion and abort notifications, processing-time
timers, cancellation. Any thread may put a mail; only the task thread takes and runs them, so
nothing races the task's state and nothing polls:

* ``TaskMailbox``: the queue. Urgent mails (``put_first``) go before the others, which keep their
  order. A timer (``schedule``) becomes a mail once the clock reaches its due time; a blocked
  ``take`` wakes for it then, and for a ``put`` at once. ``quiesce`` refuses new mails and keeps
  the queued ones; ``close`` refuses new mails and returns the queued ones unrun.
* ``MailboxProcessor``: the task thread's loop. It runs every mail that is ready, then one unit of
  the default action (a batch from the source, an element of the input). A default action with
  nothing to do suspends itself and the loop blocks in ``take`` until a mail (e.g. "input
  available") resumes it; ``all_actions_completed`` ends the loop.

The mailbox has no thread of its own and its clock is injectable, so its ordering, priorities,
timers and close semantics are tested with no thread beyond the test's.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from queue import Empty, SimpleQueue
from typing import Protocol

__all__ = [
    "Mail",
    "MailboxClosed",
    "MailboxController",
    "MailboxProcessor",
    "ScheduledMail",
    "TaskMailbox",
]


class MailboxClosed(Exception):
    """A mail was put into (or taken from) a mailbox that no longer accepts mails."""


@dataclass(frozen=True, slots=True)
class Mail:
    """A unit of work for the task thread. ``description`` names it in logs and tests."""

    action: Callable[[], None]
    description: str

    def run(self) -> None:
        self.action()


@dataclass(eq=False, slots=True)
class ScheduledMail:
    """A mail due at ``due`` (the mailbox's clock); ``cancel`` before then and it never runs."""

    due: float
    mail: Mail
    cancelled: bool = False


OPEN, QUIESCED, CLOSED = "OPEN", "QUIESCED", "CLOSED"
_NEVER = float("inf")


@dataclass(order=True, slots=True)
class _Timer:
    due: float
    seq: int
    scheduled: ScheduledMail = field(compare=False)


class TaskMailbox:
    """The queue of one task. ``put``/``put_first``/``schedule`` from any thread; ``take``,
    ``try_take`` and ``has_mail`` from the task thread only."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._queue: deque[Mail] = deque()
        self._timers: list[_Timer] = []
        self._seq = itertools.count()
        #: due time of the earliest live timer (inf: none), read without the lock by ``has_mail``
        self._next_due = _NEVER
        self.state = OPEN
        # A blocked ``take`` sleeps in ``_wakeups.get`` (C code, no Python-level Condition: a mail
        # per input batch must stay cheap); whoever changes what it waits for while ``_waiting``
        # is set (under the lock) clears the flag and puts one token. A stale token only makes
        # ``take`` look again.
        self._waiting = False
        self._wakeups: SimpleQueue[None] = SimpleQueue()

    # ------------------------------------------------------------------ any thread
    def put(self, mail: Mail) -> None:
        """Queue ``mail`` behind the others; raises MailboxClosed unless the mailbox is open."""
        with self._lock:
            self._check_open()
            self._queue.append(mail)
            if self._waiting:
                self._wake()

    def put_first(self, mail: Mail) -> None:
        """Queue ``mail`` before every other (e.g. cancellation)."""
        with self._lock:
            self._check_open()
            self._queue.appendleft(mail)
            if self._waiting:
                self._wake()

    def try_put(self, mail: Mail, first: bool = False) -> bool:
        """``put`` (``first``: ``put_first``) that returns False instead of raising once the
        mailbox no longer accepts mails (for callers that may come after the task ended)."""
        try:
            if first:
                self.put_first(mail)
            else:
                self.put(mail)
        except MailboxClosed:
            return False
        return True

    def schedule(self, due: float, mail: Mail) -> ScheduledMail:
        """Queue ``mail`` once the clock reaches ``due``."""
        scheduled = ScheduledMail(due, mail)
        with self._lock:
            self._check_open()
            heapq.heappush(self._timers, _Timer(due, next(self._seq), scheduled))
            if due < self._next_due:
                self._next_due = due
                if self._waiting:
                    self._wake()  # a blocked take waits for an earlier time now
        return scheduled

    def cancel(self, scheduled: ScheduledMail) -> None:
        """The timer will not run (nothing happens if it ran already)."""
        with self._lock:
            scheduled.cancelled = True
            self._drop_cancelled_timers()

    def _check_open(self) -> None:
        if self.state != OPEN:
            raise MailboxClosed(f"the mailbox is {self.state.lower()}")

    def _wake(self) -> None:
        """Lock held, ``_waiting`` set: the blocked ``take`` looks again."""
        self._waiting = False
        self._wakeups.put(None)

    # ------------------------------------------------------------------ the task thread
    def has_mail(self) -> bool:
        """A mail is ready (queued, or a timer due). Cheap: the task thread asks between units."""
        if self._queue:
            return True
        due = self._next_due
        return due != _NEVER and due <= self._clock()

    def try_take(self) -> Mail | None:
        """The next ready mail, or None."""
        with self._lock:
            if self.state == CLOSED:
                raise MailboxClosed("the mailbox is closed")
            self._enqueue_due_timers()
            return self._queue.popleft() if self._queue else None

    def take(self) -> Mail:
        """The next ready mail, blocking until one is put or a timer is due. Raises MailboxClosed
        once the mailbox is closed, or quiesced with nothing left to run."""
        while True:
            with self._lock:
                self._waiting = False
                if self.state == CLOSED:
                    raise MailboxClosed("the mailbox is closed")
                self._enqueue_due_timers()
                if self._queue:
                    return self._queue.popleft()
                if self.state == QUIESCED and not self._timers:
                    raise MailboxClosed("the mailbox is quiesced and empty")
                wait = None if not self._timers else max(0.0, self._next_due - self._clock())
                self._waiting = True
            try:
                self._wakeups.get(timeout=wait)
            except Empty:
                pass  # a timer is due

    def quiesce(self) -> None:
        """Refuse new mails; the queued ones (and timers) still run."""
        with self._lock:
            if self.state == OPEN:
                self.state = QUIESCED
            if self._waiting:
                self._wake()

    def close(self) -> list[Mail]:
        """Refuse new mails and drop the queued ones (returned, in order, unrun; timers are
        dropped silently); a blocked ``take`` raises MailboxClosed."""
        with self._lock:
            self.state = CLOSED
            dropped = list(self._queue)
            self._queue.clear()
            for t in self._timers:
                t.scheduled.cancelled = True
            self._timers.clear()
            self._next_due = _NEVER
            if self._waiting:
                self._wake()
        return dropped

    def _enqueue_due_timers(self) -> None:
        timers = self._timers
        if not timers:
            return
        now = self._clock()
        while timers and timers[0].due <= now:
            scheduled = heapq.heappop(timers).scheduled
            if not scheduled.cancelled:
                scheduled.cancelled = True  # ran: a late cancel is a no-op
                self._queue.append(scheduled.mail)
        self._drop_cancelled_timers()

    def _drop_cancelled_timers(self) -> None:
        timers = self._timers
        while timers and timers[0].scheduled.cancelled:
            heapq.heappop(timers)
        self._next_due = timers[0].due if timers else _NEVER


class MailboxController(Protocol):
    """What a default action may do to the loop that runs it (task thread only)."""

    def suspend_default_action(self) -> None: ...

    def resume_default_action(self) -> None: ...

    def all_actions_completed(self) -> None: ...


class MailboxProcessor:
    """Runs a task's mails and its default action on the task thread.

    The default action does one bounded unit of work per call (one batch, one input element) and
    must not block on input: with nothing to do it calls ``suspend_default_action`` and arranges
    for a mail to ``resume_default_action`` (e.g. an availability callback of its input gate).
    """

    def __init__(self, mailbox: TaskMailbox) -> None:
        self.mailbox = mailbox
        self._suspended = False
        self._completed = False

    @property
    def is_default_action_suspended(self) -> bool:
        return self._suspended

    def suspend_default_action(self) -> None:
        self._suspended = True

    def resume_default_action(self) -> None:
        self._suspended = False

    def all_actions_completed(self) -> None:
        self._completed = True

    def run_mailbox_loop(self, default_action: Callable[[MailboxController], None]) -> None:
        """Until ``all_actions_completed``: every ready mail, then one unit of ``default_action``;
        while it is suspended, wait for the next mail."""
        self._completed = False
        self._suspended = False
        mailbox = self.mailbox
        while not self._completed:
            mail = mailbox.try_take() if mailbox.has_mail() else None
            if mail is not None:
                mail.run()
            elif self._suspended:
                mailbox.take().run()
            else:
                default_action(self)

    def run_ready_mails(self) -> None:
        """Every mail ready now, without waiting for any."""
        while (mail := self.mailbox.try_take()) is not None:
            mail.run()

    def run_until(self, done: Callable[[], bool]) -> None:
        """Run mails (waiting for them) until ``done()``; no default action runs meanwhile."""
        self.run_ready_mails()
        while not done():
            self.mailbox.take().run()
