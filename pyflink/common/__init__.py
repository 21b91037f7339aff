"""``pyflink.common`` on yarnflink."""

from pyflink.common.configuration import Configuration
from pyflink.common.job_execution_result import JobExecutionResult
from pyflink.common.serialization import Encoder, SimpleStringSchema
from pyflink.common.time import Duration, Instant, Time
from pyflink.common.typeinfo import RowTypeInfo, TupleTypeInfo, TypeInformation, Types
from pyflink.common.types import Row, RowKind
from pyflink.common.watermark_strategy import TimestampAssigner, WatermarkStrategy

__all__ = [
    "Configuration",
    "Duration",
    "Encoder",
    "Instant",
    "JobExecutionResult",
    "Row",
    "RowKind",
    "RowTypeInfo",
    "SimpleStringSchema",
    "Time",
    "TimestampAssigner",
    "TupleTypeInfo",
    "TypeInformation",
    "Types",
    "WatermarkStrategy",
]
