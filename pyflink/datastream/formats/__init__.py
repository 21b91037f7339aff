"""``pyflink.datastream.formats``: Parquet (``formats.parquet``); other formats are refused."""
