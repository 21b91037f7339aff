"""Metrics (Flink's metric system): the names (``names``), the task and TaskExecutor metrics, the
Dispatcher's MetricStore, checkpoint statistics and the Prometheus reporter. ``docs/METRICS.md``."""
