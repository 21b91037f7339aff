"""``pyflink.common.job_execution_result``."""

from yarnflink.api.common import JobExecutionResult

__all__ = ["JobExecutionResult"]
