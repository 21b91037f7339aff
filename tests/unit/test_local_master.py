"""A local master starts its ResourceManager (and so its TaskExecutors) before it loads the rest
of the master, unless it is on YARN, highly available, or starts no TaskExecutors."""

from __future__ import annotations

import argparse

import pytest

from yarnflink.common.config import Configuration
from yarnflink.entrypoint.flags import add_master_arguments
from yarnflink.entrypoint.local_master import starts_early


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_master_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(
    ("argv", "config", "early"),
    [
        (("--local-taskexecutors", "2"), {}, True),
        (("--local-taskexecutors", "2", "--per-job"), {}, True),
        ((), {}, False),  # standalone: its TaskExecutors register by themselves
        (("--local-taskexecutors", "2", "--yarn"), {}, False),
        (("--local-taskexecutors", "2"), {"high-availability.type": "zookeeper"}, False),
    ],
)
def test_which_masters_start_their_resource_manager_first(
    argv: tuple[str, ...], config: dict[str, str], early: bool
) -> None:
    assert starts_early(_args(*argv), Configuration(config)) is early
