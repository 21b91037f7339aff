"""execute_and_collect(): the results as the client reads them while the job runs (the JobMaster's
collect log) and the closeable iterator that reads them."""

import base64

import pytest

from yarnflink.client.collect import CollectResultIterator
from yarnflink.common.records import records_to_arrow, to_ipc_bytes
from yarnflink.jobmaster.collect import CollectLog


def test_the_log_serves_what_came_after_an_offset():
    log = CollectLog()
    log.add("a1", b"x")
    log.add("b1", b"y")
    first = log.since(0, lambda a: True)
    assert (first.payloads, first.offset, first.stale) == ([b"x", b"y"], 2, False)
    log.add("a1", b"z")
    assert log.since(2, lambda a: True).payloads == [b"z"]
    with pytest.raises(ValueError, match="outside"):
        log.since(5, lambda a: True)


def test_results_of_a_replaced_attempt_are_not_served_and_mark_what_was_read_stale():
    log = CollectLog()
    log.add("a1", b"x")
    log.add("a1", b"y")
    current = {"a2"}
    assert log.since(0, current.__contains__).payloads == []  # never read: just dropped
    got = log.since(1, current.__contains__)
    assert got.stale  # b"x" was read and its attempt was replaced
    frozen = log.frozen(current.__contains__)
    assert frozen.since(0).payloads == [] and frozen.since(2).stale


def payload(records):
    return base64.b64encode(to_ipc_bytes(records_to_arrow(records))).decode("ascii")


class FakeRest:
    """Answers ``collected`` from a script of responses; records cancels."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.offsets = []
        self.cancelled = []

    def collected(self, job_id, offset):
        self.offsets.append(offset)
        return self.answers.pop(0)

    def cancel(self, job_id):
        self.cancelled.append(job_id)


class FakeExecutor:
    def __init__(self, rest):
        self.rest = rest
        self.waited = []

    def wait(self, job_id, job_name=""):
        self.waited.append(job_id)


def test_the_iterator_streams_results_while_the_job_runs_and_ends_with_it():
    rest = FakeRest(
        [
            {"payloads": [payload([1, 2])], "offset": 1, "stale": False, "done": False},
            {"payloads": [], "offset": 1, "stale": False, "done": False},
            {"payloads": [payload([3])], "offset": 2, "stale": False, "done": True},
            {"payloads": [], "offset": 2, "stale": False, "done": True},
        ]
    )
    ex = FakeExecutor(rest)
    it = CollectResultIterator(ex, "job", "name", poll_interval=0)
    assert next(it) == 1  # before the job ended
    assert list(it) == [2, 3]
    assert rest.offsets == [0, 1, 1, 2] and ex.waited == ["job"] and rest.cancelled == []


def test_closing_the_iterator_early_cancels_the_job():
    rest = FakeRest([{"payloads": [payload([1, 2])], "offset": 1, "stale": False, "done": False}])
    with CollectResultIterator(FakeExecutor(rest), "job", "name", poll_interval=0) as it:
        assert next(it) == 1
    assert rest.cancelled == ["job"]
    assert list(it) == []


def test_a_restart_after_results_were_read_stops_the_iterator_with_a_clear_error():
    rest = FakeRest([{"payloads": [], "offset": 3, "stale": True, "done": False}])
    with pytest.raises(RuntimeError, match="restarted after execute_and_collect"):
        next(CollectResultIterator(FakeExecutor(rest), "job", "name", poll_interval=0))


def test_execute_and_collect_submits_at_the_call_not_at_the_first_next():
    from yarnflink.api import StreamExecutionEnvironment
    from yarnflink.client.executor import RestClusterExecutor

    class SubmittingRest(FakeRest):
        def __init__(self):
            super().__init__([{"payloads": [payload([7])], "offset": 1, "stale": False, "done": True}])
            self.submitted = []

        def submit_job(self, job_graph_json):
            self.submitted.append(job_graph_json)
            return "job-1"

    executor = RestClusterExecutor("http://127.0.0.1:1")
    rest = executor.rest = SubmittingRest()  # type: ignore[assignment]
    env = StreamExecutionEnvironment(executor=executor)
    results = env.from_collection([7]).execute_and_collect()
    assert len(rest.submitted) == 1 and rest.offsets == []  # submitted, nothing read yet
    with results:
        assert next(results) == 7
    assert executor.submitted == ["job-1"]
