"""The programs of the PyFlink compatibility suite and how their output is compared.

Pure Python without yarnflink or pyflink imports: ``generate_expected.py`` (run with real PyFlink)
and the tests read the same list. A case's output is its stdout (``compare="stdout"``: what the
program and its print sinks print) or the files its FileSink wrote (``compare="files"``: every
non-hidden file under ``--output``, line by line). Lines are compared sorted: Flink defines no
order between the subtasks of a vertex nor between the branches of a job, so a sorted comparison
is the one both engines must meet. At parallelism > 1 the print sink's ``N> `` prefix is dropped
too (``drop_subtask_prefix``): which subtask a record reaches (hash of the key, round robin from a
random channel) is an engine's choice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
DATA = HERE / "data"
EXPECTED = HERE / "expected"


@dataclass(frozen=True)
class Case:
    name: str
    #: a file in programs/, or "example:<path>" under PyFlink's pyflink/examples/datastream
    program: str
    #: arguments; {out} is the case's output directory, {data} the data/ directory
    args: tuple[str, ...] = ()
    compare: str = "stdout"
    drop_subtask_prefix: bool = False
    #: lines the program prints that are not its result (e.g. usage hints), ignored in both
    ignore: tuple[str, ...] = field(default=())

    def program_path(self, examples: Path | None) -> Path:
        if self.program.startswith("example:"):
            if examples is None:
                raise ValueError(f"{self.name} is one of PyFlink's examples: pass their directory")
            return examples / self.program[len("example:") :]
        return PROGRAMS / self.program

    def argv(self, out: Path) -> list[str]:
        return [a.format(out=out, data=DATA) for a in self.args]

    @property
    def expected_file(self) -> Path:
        return EXPECTED / f"{self.name}.txt"


_PREFIX = re.compile(r"^\d+> ")
_USAGE = ("Printing result to stdout. Use --output to specify output path.",)


def normalize(case: Case, stdout: str, out: Path) -> list[str]:
    """The lines compared with the expected file."""
    if case.compare == "files":
        lines = []
        for p in sorted(out.rglob("*")):
            if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(out).parts):
                lines.extend(p.read_text().splitlines())
    else:
        lines = stdout.splitlines()
    if case.drop_subtask_prefix:
        lines = [_PREFIX.sub("", line) for line in lines]
    return sorted(line for line in lines if line.strip() and line not in case.ignore)


EXAMPLES = [
    Case("example_basic_operations", "example:basic_operations.py"),
    Case("example_event_time_timer", "example:event_time_timer.py", drop_subtask_prefix=True),
    Case("example_process_json_data", "example:process_json_data.py", drop_subtask_prefix=True),
    Case("example_state_access", "example:state_access.py", drop_subtask_prefix=True),
    Case("example_word_count", "example:word_count.py", ("--input", "{data}/words.txt", "--output", "{out}"), "files"),
    Case(
        "example_word_count_default",
        "example:word_count.py",
        drop_subtask_prefix=False,
        ignore=(
            "Executing word_count example with default input data set.",
            "Use --input to specify file input.",
            *_USAGE,
        ),
    ),
    Case("example_tumbling_count_window", "example:windowing/tumbling_count_window.py", ignore=_USAGE),
    Case("example_tumbling_time_window", "example:windowing/tumbling_time_window.py", ("--output", "{out}"), "files"),
    Case("example_sliding_time_window", "example:windowing/sliding_time_window.py", ignore=_USAGE),
    Case("example_session_with_gap_window", "example:windowing/session_with_gap_window.py", ignore=_USAGE),
    Case(
        "example_session_with_dynamic_gap_window", "example:windowing/session_with_dynamic_gap_window.py", ignore=_USAGE
    ),
]

OWN = [
    Case("value_state_count", "value_state_count.py"),
    Case("list_state_batches", "list_state_batches.py"),
    Case("map_state_distinct", "map_state_distinct.py"),
    Case("reducing_state_max", "reducing_state_max.py"),
    Case("aggregating_state_avg", "aggregating_state_avg.py"),
    Case("state_clear_sessions", "state_clear_sessions.py"),
    Case("event_time_timers", "event_time_timers.py"),
    Case("timer_delete", "timer_delete.py"),
    Case("tumbling_window_reduce", "tumbling_window_reduce.py"),
    Case("sliding_window_aggregate", "sliding_window_aggregate.py"),
    Case("session_window_process", "session_window_process.py"),
    Case("count_window_reduce", "count_window_reduce.py"),
    Case("window_apply_late_data", "window_apply_late_data.py"),
    Case("window_aggregate_with_process", "window_aggregate_with_process.py"),
    Case("window_all_count", "window_all_count.py"),
    Case("side_outputs", "side_outputs.py"),
    Case("keyed_side_outputs", "keyed_side_outputs.py"),
    Case("keyed_reduce_aggregations", "keyed_reduce_aggregations.py"),
    Case("union_streams", "union_streams.py"),
    Case("connect_co_map", "connect_co_map.py"),
    Case("keyed_co_process_join", "keyed_co_process_join.py", drop_subtask_prefix=True),
    Case("broadcast_state_rules", "broadcast_state_rules.py"),
    Case("file_source_sink", "file_source_sink.py", ("--input", "{data}/lines.txt", "--output", "{out}"), "files"),
    Case("file_sink_output_config", "file_sink_output_config.py", ("--output", "{out}"), "files"),
    Case("file_source_event_time", "file_source_event_time.py", ("--input", "{data}/events.csv")),
    Case("row_named_types", "row_named_types.py"),
    Case("word_count_batch", "word_count_batch.py", drop_subtask_prefix=True),
    Case("number_sequence_source", "number_sequence_source.py", drop_subtask_prefix=True),
    Case("execute_and_collect", "execute_and_collect.py"),
    Case("rich_functions_open", "rich_functions_open.py"),
    Case("console_print", "console_print.py", drop_subtask_prefix=True),
]

ALL = {c.name: c for c in EXAMPLES + OWN}
