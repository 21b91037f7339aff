"""``pyflink.datastream.formats.parquet``: Parquet through pyarrow. The row type is a
``Types.ROW_NAMED(...)`` (the Table API's ``DataTypes`` are not available); Avro-based readers and
writers are refused."""

from pyflink.datastream.connectors._refused import refused
from yarnflink.api.connectors import ParquetBulkWriters, ParquetColumnarRowInputFormat

AvroParquetReaders = refused("AvroParquetReaders", "Avro on Parquet")
AvroParquetWriters = refused("AvroParquetWriters", "Avro on Parquet")

__all__ = ["AvroParquetReaders", "AvroParquetWriters", "ParquetBulkWriters", "ParquetColumnarRowInputFormat"]
