"""How often the client asks the cluster about a job: often at first, then at most every
``maximum`` seconds. A short job on a local cluster ends within a few hundred milliseconds, and a
fixed 0.2 s poll added up to that much to each phase it waited on (job end, execution result,
collected results); a long job is asked no more often than before."""

from __future__ import annotations

from collections.abc import Iterator

#: The first wait between two polls.
FIRST_POLL_S = 0.01


def poll_intervals(maximum: float, first: float = FIRST_POLL_S) -> Iterator[float]:
    """``first``, doubling up to ``maximum``, then ``maximum`` for ever (first >= maximum: maximum;
    0: no wait, as a caller that polls a local fake asks)."""
    if maximum < 0:
        raise ValueError(f"the poll interval must not be negative, got {maximum}")
    delay = min(first, maximum)
    while True:
        yield delay
        delay = min(delay * 2, maximum)
