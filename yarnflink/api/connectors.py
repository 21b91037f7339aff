"""File connectors: ``FileSource`` for ``env.from_source`` and ``FileSink`` for ``ds.sink_to``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from yarnflink.common.typeinfo import RowTypeInfo, Types
from yarnflink.operators.specs import DiscardingSinkSpec, FileSinkSpec, FileSourceSpec, SequenceSourceSpec

SOURCE_FORMATS = ("parquet", "csv", "jsonl", "text")
SINK_FORMATS = ("jsonl", "parquet", "csv", "text")
_EXTENSIONS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".txt": "text",
}


def _check_path(path: Any, what: str) -> str:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path.strip():
        raise TypeError(f"{what} path must be a non-empty string (a path or fsspec URL), got {path!r}")
    return path


def _check_format(fmt: Any, allowed: tuple[str, ...], what: str) -> str:
    if not isinstance(fmt, str) or fmt.lower() not in allowed:
        raise ValueError(f"unknown {what} format {fmt!r}: expected one of {', '.join(allowed)}")
    return fmt.lower()


def _check_storage_options(opts: Any, what: str) -> dict[str, Any]:
    if opts is None:
        return {}
    if not isinstance(opts, dict):
        raise TypeError(f"{what} storage_options must be a dict, got {type(opts).__name__}")
    return dict(opts)


@dataclass
class FileSource:
    """Reads a file or every file below a directory (sorted); ``path`` is an fsspec URL.

    ``format`` is ``"parquet"``, ``"csv"``, ``"jsonl"`` or ``"text"``; if omitted it is taken from
    the file extension (``.parquet``, ``.csv``, ``.jsonl``/``.ndjson``, ``.txt``). Records are
    dicts (one per row), or one string per line for ``"text"``.

    PyFlink's builders make one too:
    ``FileSource.for_record_stream_format(StreamFormat.text_line_format(), path).process_static_file_set().build()``
    and ``FileSource.for_bulk_file_format(ParquetColumnarRowInputFormat(row_type), path).build()``."""

    path: str
    format: str | None = None
    storage_options: dict[str, Any] = field(default_factory=dict)
    #: the records' type (Types.STRING() for text lines; a row type given with a bulk format)
    output_type: Any = None

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: Any) -> FileSourceBuilder:
        if not isinstance(stream_format, StreamFormat):
            raise TypeError(
                "FileSource.for_record_stream_format() needs a StreamFormat such as "
                f"StreamFormat.text_line_format(), got {stream_format!r}"
            )
        return FileSourceBuilder(stream_format.format, stream_format.output_type, paths)

    @staticmethod
    def for_bulk_file_format(bulk_format: BulkFormat, *paths: Any) -> FileSourceBuilder:
        if not isinstance(bulk_format, BulkFormat):
            raise TypeError(
                "FileSource.for_bulk_file_format() needs a bulk format such as "
                f"ParquetColumnarRowInputFormat(row_type), got {bulk_format!r}"
            )
        return FileSourceBuilder(bulk_format.format, bulk_format.output_type, paths)

    def __post_init__(self) -> None:
        self.path = _check_path(self.path, "FileSource")
        if self.format is None:
            ext = os.path.splitext(self.path.rstrip("/"))[1].lower()
            if ext not in _EXTENSIONS:
                raise ValueError(
                    f"FileSource({self.path!r}): cannot infer the format from the path; pass "
                    f"format= one of {', '.join(SOURCE_FORMATS)}"
                )
            self.format = _EXTENSIONS[ext]
        self.format = _check_format(self.format, SOURCE_FORMATS, "FileSource")
        self.storage_options = _check_storage_options(self.storage_options, "FileSource")

    def to_spec(self) -> Any:
        return FileSourceSpec(path=self.path, format=self.format, storage_options=dict(self.storage_options))  # type: ignore[arg-type]


@dataclass
class FileSink:
    """Writes one file per subtask, ``<path>/<part_prefix>-<subtask>-0<part_suffix>`` (by default
    ``part-<subtask>-0.<ext>``); ``format`` is ``"jsonl"``, ``"parquet"``, ``"csv"`` or ``"text"``
    (one ``str(record)`` per line; typed records as Flink's ``toString``).

    PyFlink's builders make one too: ``FileSink.for_row_format(path, Encoder.simple_string_encoder())
    .with_output_file_config(OutputFileConfig.builder().with_part_prefix("p").build()).build()`` and
    ``FileSink.for_bulk_format(path, ParquetBulkWriters.for_row_type(row_type)).build()``."""

    path: str
    format: str
    storage_options: dict[str, Any] = field(default_factory=dict)
    part_prefix: str = "part"
    part_suffix: str | None = None

    def __post_init__(self) -> None:
        self.path = _check_path(self.path, "FileSink")
        self.format = _check_format(self.format, SINK_FORMATS, "FileSink")
        self.storage_options = _check_storage_options(self.storage_options, "FileSink")
        if not isinstance(self.part_prefix, str) or not self.part_prefix or "/" in self.part_prefix:
            raise ValueError(f"FileSink: the part prefix must be a non-empty file name part, got {self.part_prefix!r}")
        if self.part_suffix is not None and (not isinstance(self.part_suffix, str) or "/" in self.part_suffix):
            raise ValueError(f"FileSink: the part suffix must be a file name part, got {self.part_suffix!r}")

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> FileSinkBuilder:
        if not isinstance(encoder, Encoder):
            raise TypeError(
                f"FileSink.for_row_format() needs an Encoder such as Encoder.simple_string_encoder(), got {encoder!r}"
            )
        return FileSinkBuilder(base_path, "text")

    @staticmethod
    def for_bulk_format(base_path: str, writer_factory: BulkWriterFactory) -> FileSinkBuilder:
        if not isinstance(writer_factory, BulkWriterFactory):
            raise TypeError(
                "FileSink.for_bulk_format() needs a bulk writer factory such as "
                f"ParquetBulkWriters.for_row_type(row_type), got {writer_factory!r}"
            )
        return FileSinkBuilder(base_path, writer_factory.format)

    def to_spec(self) -> Any:
        return FileSinkSpec(
            path=self.path,
            format=self.format,  # type: ignore[arg-type]
            storage_options=dict(self.storage_options),
            part_prefix=self.part_prefix,
            part_suffix=self.part_suffix,
        )


# ----------------------------------------------------------------------------- PyFlink's builders
class StreamFormat:
    """How a FileSource reads records from a file stream: ``StreamFormat.text_line_format()``."""

    def __init__(self, format: str, output_type: Any = None):
        self.format = format
        self.output_type = output_type

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8") -> StreamFormat:
        if str(charset_name).replace("-", "").upper() != "UTF8":
            raise ValueError(f"StreamFormat.text_line_format(): only UTF-8 files are read, got {charset_name!r}")
        return StreamFormat("text", Types.STRING())


class BulkFormat:
    """A columnar file format for ``FileSource.for_bulk_file_format`` (Parquet)."""

    def __init__(self, format: str, output_type: Any = None):
        self.format = format
        self.output_type = output_type


class ParquetColumnarRowInputFormat(BulkFormat):
    """Parquet files, records as Rows of ``row_type`` (a ``Types.ROW_NAMED``) or, without one,
    dicts. ``hadoop_config`` and the reader options are accepted and not needed."""

    def __init__(
        self,
        row_type: Any = None,
        hadoop_config: Any = None,
        batch_size: int = 2048,
        is_utc_timestamp: bool = False,
        is_case_sensitive: bool = True,
    ):
        if row_type is not None and not isinstance(row_type, RowTypeInfo):
            raise TypeError(
                "ParquetColumnarRowInputFormat: yarnflink takes the row type as Types.ROW_NAMED(names, types) "
                f"(the Table API's DataTypes are not available), got {row_type!r}"
            )
        super().__init__("parquet", row_type)


class Encoder:
    """How a row-format FileSink writes a record: ``Encoder.simple_string_encoder()`` (one line
    per record, as Flink's ``toString``)."""

    def __init__(self, charset_name: str = "UTF-8"):
        self.charset_name = charset_name

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> Encoder:
        if str(charset_name).replace("-", "").upper() != "UTF8":
            raise ValueError(f"Encoder.simple_string_encoder(): only UTF-8 is written, got {charset_name!r}")
        return Encoder(charset_name)


class BulkWriterFactory:
    """A columnar writer for ``FileSink.for_bulk_format`` (``ParquetBulkWriters.for_row_type``)."""

    def __init__(self, format: str, row_type: Any = None):
        self.format = format
        self.row_type = row_type


class ParquetBulkWriters:
    @staticmethod
    def for_row_type(row_type: Any = None, hadoop_config: Any = None, utc_timestamp: bool = False) -> BulkWriterFactory:
        """Parquet files with one column per field of the records (Rows, tuples or dicts)."""
        return BulkWriterFactory("parquet", row_type)


class FileSourceBuilder:
    def __init__(self, format: str, output_type: Any, paths: tuple[Any, ...]):
        if len(paths) != 1:
            raise ValueError(
                f"FileSource: yarnflink reads one path (a file or a directory) per source, got {len(paths)} paths "
                "(put the files in one directory, or union() several sources)"
            )
        self._source = FileSource(paths[0], format, output_type=output_type)

    def process_static_file_set(self) -> FileSourceBuilder:
        return self

    def monitor_continuously(self, discovery_interval: Any) -> FileSourceBuilder:
        raise NotImplementedError(
            "FileSourceBuilder.monitor_continuously(): yarnflink's file sources are bounded (they read the files "
            "there at the start); use process_static_file_set()"
        )

    def set_file_enumerator(self, file_enumerator: Any) -> FileSourceBuilder:
        return self  # files are listed by yarnflink (every file below the path, sorted)

    def set_split_assigner(self, split_assigner: Any) -> FileSourceBuilder:
        return self  # files are assigned round-robin to the subtasks

    def build(self) -> FileSource:
        return self._source


class OutputFileConfig:
    """Part file names: ``<part_prefix>-<subtask>-<n><part_suffix>``."""

    def __init__(self, part_prefix: str = "part", part_suffix: str = ""):
        self.part_prefix = part_prefix
        self.part_suffix = part_suffix

    def get_part_prefix(self) -> str:
        return self.part_prefix

    def get_part_suffix(self) -> str:
        return self.part_suffix

    @staticmethod
    def builder() -> OutputFileConfigBuilder:
        return OutputFileConfigBuilder()


class OutputFileConfigBuilder:
    def __init__(self) -> None:
        self._prefix = "part"
        self._suffix = ""

    def with_part_prefix(self, prefix: str) -> OutputFileConfigBuilder:
        self._prefix = prefix
        return self

    def with_part_suffix(self, suffix: str) -> OutputFileConfigBuilder:
        self._suffix = suffix
        return self

    def build(self) -> OutputFileConfig:
        return OutputFileConfig(self._prefix, self._suffix)


OutputFileConfig.OutputFileConfigBuilder = OutputFileConfigBuilder  # type: ignore[attr-defined]


class RollingPolicy:
    """When a part file is closed. yarnflink writes one file per subtask, or (with checkpointing)
    one per checkpoint interval; the sizes and intervals are accepted and not used."""

    def __init__(self, kind: str, **settings: Any):
        self.kind = kind
        self.settings = settings

    @staticmethod
    def default_rolling_policy(
        part_size: int = 1024 * 1024 * 128, rollover_interval: int = 60 * 1000, inactivity_interval: int = 60 * 1000
    ) -> RollingPolicy:
        return RollingPolicy(
            "default", part_size=part_size, rollover_interval=rollover_interval, inactivity_interval=inactivity_interval
        )

    @staticmethod
    def on_checkpoint_rolling_policy() -> RollingPolicy:
        return RollingPolicy("on-checkpoint")


class BucketAssigner:
    """Sub-directories of a FileSink's base path: yarnflink writes every part file directly in
    the base path (``base_path_bucket_assigner``); a date-time assigner is refused."""

    def __init__(self, kind: str):
        self.kind = kind

    @staticmethod
    def base_path_bucket_assigner() -> BucketAssigner:
        return BucketAssigner("base-path")

    @staticmethod
    def date_time_bucket_assigner(format_str: str = "yyyy-MM-dd--HH", timezone_id: str | None = None) -> BucketAssigner:
        return BucketAssigner("date-time")


class FileSinkBuilder:
    """``FileSink.for_row_format(...)`` / ``for_bulk_format(...)``: ``with_output_file_config``,
    ``with_rolling_policy``, ``with_bucket_assigner``, then ``build()``."""

    def __init__(self, base_path: str, format: str):
        self._path = _check_path(base_path, "FileSink")
        self._format = format
        self._config = OutputFileConfig("part", "" if format == "text" else f".{format}")

    def with_output_file_config(self, output_file_config: OutputFileConfig) -> FileSinkBuilder:
        if not isinstance(output_file_config, OutputFileConfig):
            raise TypeError(f"with_output_file_config() needs an OutputFileConfig, got {output_file_config!r}")
        self._config = output_file_config
        return self

    def with_rolling_policy(self, rolling_policy: RollingPolicy) -> FileSinkBuilder:
        if not isinstance(rolling_policy, RollingPolicy):
            raise TypeError(f"with_rolling_policy() needs a RollingPolicy, got {rolling_policy!r}")
        return self

    def with_bucket_assigner(self, bucket_assigner: BucketAssigner) -> FileSinkBuilder:
        if not isinstance(bucket_assigner, BucketAssigner):
            raise TypeError(f"with_bucket_assigner() needs a BucketAssigner, got {bucket_assigner!r}")
        if bucket_assigner.kind != "base-path":
            raise NotImplementedError(
                "FileSink.with_bucket_assigner(BucketAssigner.date_time_bucket_assigner()): yarnflink writes the "
                "part files directly in the base path; use BucketAssigner.base_path_bucket_assigner()"
            )
        return self

    def with_bucket_check_interval(self, interval: int) -> FileSinkBuilder:
        return self

    def enable_compact(self, strategy: Any, compactor: Any) -> FileSinkBuilder:
        raise NotImplementedError("FileSink.enable_compact(): file compaction is not supported by yarnflink")

    def disable_compact(self) -> FileSinkBuilder:
        return self

    def build(self) -> FileSink:
        return FileSink(
            self._path,
            self._format,
            part_prefix=self._config.part_prefix,
            part_suffix=self._config.part_suffix,
        )


@runtime_checkable
class Source(Protocol):
    """What ``env.from_source`` takes: ``to_spec()`` gives the source operator's spec (a spec
    whose ``kind`` is ``"source"``, see ``yarnflink.operators.specs``); an ``output_type``
    attribute, if present, is the records' type."""

    def to_spec(self) -> Any: ...


class NumberSequenceSource:
    """The integers ``start`` .. ``end`` (both included), split across the subtasks (PyFlink's
    ``NumberSequenceSource``; the same as ``env.from_sequence``)."""

    output_type = Types.LONG()

    def __init__(self, start: int, end: int):
        for what, v in (("start", start), ("end", end)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"NumberSequenceSource: {what} must be an integer, got {type(v).__name__} {v!r}")
        if start > end:
            raise ValueError(f"NumberSequenceSource: start ({start}) must not be larger than end ({end})")
        self.start, self.end = start, end

    def to_spec(self) -> Any:
        return SequenceSourceSpec(start=self.start, end=self.end)


@dataclass
class DiscardingSink:
    """Drops every record (Flink's DiscardingSink), e.g. for benchmarks."""

    def to_spec(self) -> Any:
        return DiscardingSinkSpec()
