"""The logging of a cluster process (master, TaskExecutor): to its log file, or to stderr."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any


def setup_logging(log_file: Path | None) -> None:
    """Level from ``YARNFLINK_LOG_LEVEL`` (INFO unless set)."""
    level = os.environ.get("YARNFLINK_LOG_LEVEL", "INFO").upper()
    kwargs: dict[str, Any] = {"filename": str(log_file)} if log_file else {"stream": sys.stderr}
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", **kwargs)
