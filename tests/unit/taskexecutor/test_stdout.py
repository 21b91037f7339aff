"""The TaskExecutor's stdout: whole lines, at once, never two threads' text within one line."""

from __future__ import annotations

import io
import threading

from yarnflink.taskexecutor.stdout import LineStdout


class CountingStream(io.StringIO):
    """A StringIO that records how it was written and flushed."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []
        self.flushes = 0

    def write(self, s: str) -> int:
        self.writes.append(s)
        return super().write(s)

    def flush(self) -> None:
        self.flushes += 1


def test_a_printed_line_is_written_and_flushed_at_once() -> None:
    target = CountingStream()
    out = LineStdout(target)
    print("in map", 1, file=out)  # two writes: the text, then the newline
    assert target.getvalue() == "in map 1\n"
    assert target.writes == ["in map 1\n"] and target.flushes == 1


def test_an_unfinished_line_waits_for_its_end_or_a_flush() -> None:
    target = CountingStream()
    out = LineStdout(target)
    out.write("a")
    out.write("b")
    assert target.getvalue() == ""
    out.write("c\nd")
    assert target.getvalue() == "abc\n"
    out.flush()
    assert target.getvalue() == "abc\nd"


def test_threads_printing_at_once_never_share_a_line() -> None:
    target = io.StringIO()
    out = LineStdout(target)
    go = threading.Barrier(4)

    def worker(n: int) -> None:
        go.wait()
        for i in range(300):
            out.write(f"thread {n} ")
            out.write(f"line {i}")
            out.write("\n")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = target.getvalue().splitlines()
    assert sorted(lines) == sorted(f"thread {n} line {i}" for n in range(4) for i in range(300))


def test_bytes_written_to_its_buffer_reach_the_target() -> None:
    raw = io.BytesIO()
    target = io.TextIOWrapper(raw, encoding="utf-8")
    out = LineStdout(target)
    out.buffer.write(b"raw bytes\n")  # type: ignore[attr-defined]
    assert raw.getvalue() == b"raw bytes\n"
