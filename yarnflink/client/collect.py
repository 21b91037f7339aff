"""``execute_and_collect()``'s iterator: the job is submitted when it is made; it reads the results
while the job runs (``GET /jobs/:jobid/collect?offset=n``) and ends when the job has finished and
every result was read. Closing it (``close()``, or leaving a ``with`` block) before the end cancels
the job, as PyFlink's CloseableIterator does."""

from __future__ import annotations

import base64
import time
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from yarnflink.client.polling import poll_intervals
from yarnflink.client.rest_client import RestClientError
from yarnflink.common.records import arrow_to_records

if TYPE_CHECKING:
    from yarnflink.client.executor import RestClusterExecutor


class CollectResultIterator(Iterator[Any]):
    def __init__(self, executor: RestClusterExecutor, job_id: str, job_name: str, poll_interval: float = 0.1):
        self._executor = executor
        self.job_id = job_id
        self._job_name = job_name
        self._poll_interval = poll_interval
        self._buffer: deque[Any] = deque()
        self._offset = 0
        self._done = False
        self._delays = poll_intervals(poll_interval)

    def __iter__(self) -> CollectResultIterator:
        return self

    def __next__(self) -> Any:
        while not self._buffer:
            if self._done:
                raise StopIteration
            self._fetch()
        return self._buffer.popleft()

    def _fetch(self) -> None:
        got = self._executor.rest.collected(self.job_id, self._offset)
        if got["stale"]:
            self._done = True
            raise RuntimeError(
                f"job {self.job_id} restarted after execute_and_collect() returned some of its results; "
                "the results read so far may be repeated, so the iterator stops here"
            )
        self._offset = int(got["offset"])
        if got["payloads"]:  # results flow: the next empty answer is polled for soon again
            self._delays = poll_intervals(self._poll_interval)
        for payload in got["payloads"]:
            with pa.ipc.open_stream(base64.b64decode(payload)) as reader:
                for rb in reader:
                    self._buffer.extend(arrow_to_records(rb))
        if not got["payloads"]:
            if got["done"]:
                self._done = True
                self._executor.wait(self.job_id, self._job_name)  # raises if the job did not finish
            else:
                time.sleep(next(self._delays))

    def close(self) -> None:
        """Stops reading; a job still running is cancelled."""
        if self._done:
            return
        self._done = True
        self._buffer.clear()
        try:
            self._executor.rest.cancel(self.job_id)
        except RestClientError:
            pass  # it ended meanwhile

    def __enter__(self) -> CollectResultIterator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
