"""The task mailbox and its processor loop, on the test's own thread with a fake clock: the order
of mails, urgent mails, timers, quiesce and close, and how the loop interleaves mails with the
default action, suspends it and ends."""

from __future__ import annotations

import time

import pytest

from yarnflink.taskexecutor.mailbox import (
    Mail,
    MailboxClosed,
    MailboxController,
    MailboxProcessor,
    TaskMailbox,
)


class FakeClock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class Log:
    """Mails that record their name when they run."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def mail(self, name: str) -> Mail:
        return Mail(lambda: self.ran.append(name), name)


def _drain(mailbox: TaskMailbox) -> list[str]:
    names = []
    while (mail := mailbox.try_take()) is not None:
        names.append(mail.description)
    return names


def test_mails_are_taken_in_the_order_they_were_put_and_urgent_ones_first() -> None:
    mailbox, log = TaskMailbox(FakeClock()), Log()
    mailbox.put(log.mail("trigger 1"))
    mailbox.put(log.mail("notify 1"))
    mailbox.put_first(log.mail("cancel"))
    mailbox.put(log.mail("trigger 2"))
    assert mailbox.has_mail()
    assert _drain(mailbox) == ["cancel", "trigger 1", "notify 1", "trigger 2"]
    assert not mailbox.has_mail() and mailbox.try_take() is None


def test_a_timer_becomes_a_mail_at_its_due_time_in_due_order() -> None:
    clock = FakeClock(100.0)
    mailbox, log = TaskMailbox(clock), Log()
    mailbox.schedule(100.5, log.mail("late"))
    mailbox.schedule(100.2, log.mail("early"))
    mailbox.schedule(100.2, log.mail("early, scheduled second"))
    assert not mailbox.has_mail() and mailbox.try_take() is None
    clock.t = 100.2
    assert mailbox.has_mail()
    mailbox.put(log.mail("put after the timer came due"))
    # a due timer queues behind what is already queued when the mailbox notices it
    assert _drain(mailbox) == ["put after the timer came due", "early", "early, scheduled second"]
    clock.t = 101.0
    assert _drain(mailbox) == ["late"]


def test_a_cancelled_timer_never_runs_and_cancelling_a_run_timer_changes_nothing() -> None:
    clock = FakeClock(0.0)
    mailbox, log = TaskMailbox(clock), Log()
    first = mailbox.schedule(1.0, log.mail("cancelled"))
    mailbox.schedule(2.0, log.mail("kept"))
    mailbox.cancel(first)
    clock.t = 1.5
    assert not mailbox.has_mail()  # the next live timer is at 2.0
    clock.t = 2.0
    ran = mailbox.try_take()
    assert ran is not None and ran.description == "kept"
    mailbox.cancel(first)
    assert mailbox.try_take() is None


def test_take_blocks_until_a_timer_is_due() -> None:
    mailbox, log = TaskMailbox(), Log()
    started = time.monotonic()
    mailbox.schedule(started + 0.05, log.mail("timer"))
    mail = mailbox.take()
    assert mail.description == "timer"
    assert time.monotonic() - started >= 0.05


def test_close_returns_the_queued_mails_unrun_and_refuses_new_ones() -> None:
    clock = FakeClock(0.0)
    mailbox, log = TaskMailbox(clock), Log()
    mailbox.put(log.mail("a"))
    mailbox.put(log.mail("b"))
    timer = mailbox.schedule(1.0, log.mail("timer"))
    dropped = mailbox.close()
    assert [m.description for m in dropped] == ["a", "b"] and log.ran == []
    assert timer.cancelled
    with pytest.raises(MailboxClosed):
        mailbox.put(log.mail("c"))
    with pytest.raises(MailboxClosed):
        mailbox.schedule(2.0, log.mail("d"))
    assert not mailbox.try_put(log.mail("e")) and not mailbox.try_put(log.mail("f"), first=True)
    with pytest.raises(MailboxClosed):
        mailbox.take()
    clock.t = 5.0
    assert not mailbox.has_mail()
    assert mailbox.close() == []


def test_a_quiesced_mailbox_refuses_new_mails_but_runs_the_queued_ones() -> None:
    mailbox, log = TaskMailbox(FakeClock()), Log()
    mailbox.put(log.mail("queued"))
    mailbox.quiesce()
    assert not mailbox.try_put(log.mail("late"))
    assert mailbox.take().description == "queued"
    with pytest.raises(MailboxClosed):
        mailbox.take()  # nothing left and nothing can come


class Source:
    """A default action emitting ``n`` units, then completing; records into ``log``."""

    def __init__(self, log: Log, n: int) -> None:
        self.log = log
        self.left = n

    def __call__(self, controller: MailboxController) -> None:
        if self.left == 0:
            controller.all_actions_completed()
            return
        self.left -= 1
        self.log.ran.append("unit")


def test_the_loop_runs_every_ready_mail_before_the_next_unit_of_the_default_action() -> None:
    mailbox, log = TaskMailbox(FakeClock()), Log()
    processor = MailboxProcessor(mailbox)
    source = Source(log, 3)

    def action(controller: MailboxController) -> None:
        source(controller)
        if log.ran.count("unit") == 1:  # mails put by the default action run before its next unit
            mailbox.put(log.mail("trigger"))
            mailbox.put(log.mail("notify"))

    mailbox.put(log.mail("before the first unit"))
    processor.run_mailbox_loop(action)
    assert log.ran == ["before the first unit", "unit", "trigger", "notify", "unit", "unit"]


def test_a_suspended_default_action_waits_for_mails_and_a_mail_resumes_it() -> None:
    clock = FakeClock(0.0)
    mailbox, log = TaskMailbox(clock), Log()
    processor = MailboxProcessor(mailbox)
    calls = 0

    def action(controller: MailboxController) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:  # no input: suspend until "input available"
            controller.suspend_default_action()
            mailbox.put(log.mail("trigger while waiting"))
            mailbox.put(Mail(processor.resume_default_action, "input available"))
            mailbox.put(log.mail("notify"))
        else:
            log.ran.append("unit")
            controller.all_actions_completed()

    processor.run_mailbox_loop(action)
    assert calls == 2
    assert log.ran == ["trigger while waiting", "notify", "unit"]


def test_a_due_timer_resumes_a_suspended_loop() -> None:
    clock = FakeClock(0.0)
    mailbox, log = TaskMailbox(clock), Log()
    processor = MailboxProcessor(mailbox)

    def action(controller: MailboxController) -> None:
        if not log.ran:
            controller.suspend_default_action()

            def fire() -> None:
                log.ran.append("timer")
                processor.resume_default_action()

            mailbox.schedule(1.0, Mail(fire, "processing time"))
            clock.t = 1.0  # due before the loop blocks: take() returns it without waiting
        else:
            controller.all_actions_completed()

    processor.run_mailbox_loop(action)
    assert log.ran == ["timer"]


def test_an_exception_of_a_mail_ends_the_loop_and_the_rest_stays_queued() -> None:
    mailbox, log = TaskMailbox(FakeClock()), Log()
    processor = MailboxProcessor(mailbox)

    def cancel() -> None:
        raise RuntimeError("cancelled")

    mailbox.put(log.mail("trigger"))
    mailbox.put_first(Mail(cancel, "cancel"))
    with pytest.raises(RuntimeError, match="cancelled"):
        processor.run_mailbox_loop(Source(log, 10))
    assert log.ran == []
    assert [m.description for m in mailbox.close()] == ["trigger"]


def test_run_until_runs_mails_without_the_default_action() -> None:
    clock = FakeClock(0.0)
    mailbox, log = TaskMailbox(clock), Log()
    processor = MailboxProcessor(mailbox)
    done = False

    def finish() -> None:
        nonlocal done
        done = True

    mailbox.put(log.mail("a"))
    mailbox.schedule(3.0, Mail(finish, "outcome"))
    clock.t = 3.0
    processor.run_until(lambda: done)
    assert log.ran == ["a"] and done
