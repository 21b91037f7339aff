"""``pyflink.datastream.connectors.file_system``: FileSource / FileSink and their builders
(``yarnflink.api.connectors``)."""

from yarnflink.api.connectors import (
    BucketAssigner,
    BulkFormat,
    FileSink,
    FileSinkBuilder,
    FileSource,
    FileSourceBuilder,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
)
from yarnflink.api.connectors import RollingPolicy as DefaultRollingPolicy
from yarnflink.api.connectors import RollingPolicy as OnCheckpointRollingPolicy

__all__ = [
    "BucketAssigner",
    "BulkFormat",
    "DefaultRollingPolicy",
    "FileSink",
    "FileSinkBuilder",
    "FileSource",
    "FileSourceBuilder",
    "OnCheckpointRollingPolicy",
    "OutputFileConfig",
    "RollingPolicy",
    "StreamFormat",
]
