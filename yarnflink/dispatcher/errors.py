"""The Dispatcher's errors, which its REST API (``rest``) answers: a job id submitted twice, a
job it does not know."""

from __future__ import annotations


class DuplicateJobSubmission(Exception):
    pass


class UnknownJob(KeyError):
    pass
