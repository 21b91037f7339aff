"""Process metrics (Flink's ``Status.JVM.*``, here ``Status.Python.*``) of the master or a
TaskExecutor process, read with psutil."""

from __future__ import annotations

import gc
import os
import sys
import threading
import time

import psutil

from yarnflink.metrics import names as n

#: The CPU load is re-measured at most this often; callers in between get the last value.
CPU_SAMPLE_INTERVAL_S = 1.0


class ProcessMetrics:
    def __init__(self) -> None:
        self._proc = psutil.Process()
        self._started = self._proc.create_time()
        try:
            self._cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            self._cores = os.cpu_count() or 1
        self._lock = threading.Lock()
        self._cpu_sample = (time.monotonic(), self._cpu_seconds())
        self._load = 0.0

    def _cpu_seconds(self) -> float:
        t = self._proc.cpu_times()
        return float(t.user + t.system)

    def _cpu_load(self, now: float, cpu: float) -> float:
        with self._lock:
            t0, c0 = self._cpu_sample
            if now - t0 >= CPU_SAMPLE_INTERVAL_S or self._load == 0.0 and now - t0 >= 0.1:
                self._load = max(0.0, min(1.0, (cpu - c0) / (now - t0) / self._cores))
                self._cpu_sample = (now, cpu)
            return self._load

    def snapshot(self) -> dict[str, float]:
        now = time.monotonic()
        cpu = self._cpu_seconds()
        with self._proc.oneshot():
            mem = self._proc.memory_info()
            threads = self._proc.num_threads()
            try:
                fds = self._proc.num_fds()
            except (AttributeError, psutil.Error):
                fds = -1
        out = {
            n.CPU_LOAD: self._cpu_load(now, cpu),
            n.CPU_TIME: cpu * 1e9,
            n.CPU_CORES: float(self._cores),
            n.MEMORY_RSS: float(mem.rss),
            n.MEMORY_VMS: float(mem.vms),
            n.MEMORY_ARROW: float(_arrow_allocated()),
            n.THREADS: float(threads),
            n.FILE_DESCRIPTORS: float(fds),
            n.UPTIME: max(0.0, (time.time() - self._started) * 1000),
        }
        for gen, stats in enumerate(gc.get_stats()):
            out[n.GC_COUNT.format(gen)] = float(stats.get("collections", 0))
        return out


def _arrow_allocated() -> int:
    """What Arrow's default pool holds; 0 in a process that has not loaded pyarrow (a master or
    TaskExecutor that has run no job yet: importing it here would cost ~80 MB and 0.3 s of start-up)."""
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is None:
        return 0
    try:
        return int(pyarrow.total_allocated_bytes())
    except Exception:  # noqa: BLE001 - pyarrow broken: report nothing
        return 0


_instance: ProcessMetrics | None = None
_instance_lock = threading.Lock()


def process_metrics() -> ProcessMetrics:
    """The one ProcessMetrics of this process (so CPU load samples are shared by all readers)."""
    global _instance
    with _instance_lock:
        if _instance is None:
            _instance = ProcessMetrics()
        return _instance
