"""The SparkSession of a TaskExecutor process (DESIGN principle 6).

One SparkSession per TaskExecutor process, shared by the tasks of all its slots: started lazily
(the first Spark step asks for it; the JVM starts on a background thread while the step's input
arrives), in local mode with one thread per slot (``local[N]``, N = the TaskExecutor's
``taskmanager.numberOfTaskSlots``), and stopped with the TaskExecutor, JVM included.

Configuration: every ``spark.*`` key that is not a yarnflink option (``spark.micro-batch.*``) of
the TaskExecutor's configuration and then of the job configuration goes to the SparkSession,
over these defaults: the driver binds to
127.0.0.1, the UI is off, the session time zone is UTC, shuffles have N partitions, Python
workers (UDFs in a step's function) use this interpreter. The first job to start the session
sets its static keys; a later job's ``spark.sql.*`` keys apply to that job's steps only (each
step works in its own ``newSession()`` of the shared session: same SparkContext and JVM, its
own temp views and SQL configuration).

The holder also cancels the Spark jobs of a step whose task was cancelled (``running``).
"""

from __future__ import annotations

import atexit
import glob
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from yarnflink.common.config import OPTIONS
from yarnflink.taskexecutor.options import TaskManagerOptions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

_GATEWAY_ATTEMPTS = 3


def _gateway_exited(e: BaseException) -> bool:
    """Whether ``e`` is pyspark's "the Java gateway process exited before sending its port"."""
    text = str(e)  # "[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number."
    return "JAVA_GATEWAY_EXITED" in text or "Java gateway process exited" in text


DEFAULTS: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.log.level": "WARN",
}

#: How often the cancellation watcher looks at the running steps' tasks.
CANCEL_POLL_S = 0.1
#: Work directories are ``<tmp>/yarnflink-spark-<pid>-<random>``.
WORKDIR_PREFIX = "yarnflink-spark-"


def spark_keys(config: Mapping[str, str]) -> dict[str, str]:
    """The ``spark.*`` keys of a yarnflink configuration that are meant for Spark."""
    return {k: str(v) for k, v in config.items() if k.startswith("spark.") and k not in OPTIONS}


def session_conf(
    config: Mapping[str, str], threads: int, local_dir: str, process_config: Mapping[str, str] = {}
) -> dict[str, str]:
    """The SparkConf of a TaskExecutor's session: defaults, then the Spark keys of the
    TaskExecutor's configuration (``process_config``), then the job configuration's."""
    conf = dict(DEFAULTS)
    conf["spark.master"] = f"local[{threads}]"
    conf["spark.app.name"] = f"yarnflink-taskexecutor-{os.getpid()}"
    conf["spark.sql.shuffle.partitions"] = str(threads)
    conf["spark.pyspark.python"] = sys.executable
    conf["spark.local.dir"] = local_dir
    conf.update(spark_keys(process_config))
    conf.update(spark_keys(config))
    return conf


class SparkSessionHolder:
    """Process-wide, thread-safe holder of the SparkSession (use the module's ``holder``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._future: Future[SparkSession] | None = None
        self._num_slots: int | None = None
        self._conf: dict[str, str] = {}
        self._process_config: dict[str, str] = {}
        self._warned: set[str] = set()
        self.workdir: str | None = None
        #: Sessions created by this holder so far (tests check that slots share one).
        self.starts = 0
        self._watched: dict[str, tuple[Any, Callable[[], bool]]] = {}
        self._watcher: threading.Thread | None = None
        self._atexit = False

    # ------------------------------------------------------------------ lifecycle
    def configure(self, *, num_slots: int) -> None:
        """The TaskExecutor's slot count (threads of the next session); set at its start."""
        self._num_slots = max(1, int(num_slots))

    def set_process_config(self, config: Mapping[str, str]) -> None:
        """The TaskExecutor's own configuration: its ``spark.*`` keys go to every session it starts
        (under the job's)."""
        self._process_config = spark_keys(config)

    def start(self, config: Mapping[str, str]) -> Future[SparkSession]:
        """Start the session in the background unless it is running or starting; its future."""
        with self._lock:
            fut = self._future
            if fut is not None and fut.done() and fut.exception() is None and not _usable(fut.result()):
                log.warning("the SparkSession is gone (its JVM exited, or it was stopped); starting a new one")
                _discard(fut.result())
                fut = self._future = None
            if fut is not None and not (fut.done() and fut.exception() is not None):
                return fut
            threads = self._num_slots or int(TaskManagerOptions.NUM_TASK_SLOTS.read(config) or 1)
            if self.workdir is None:  # kept after a failed start
                _remove_stale_workdirs()
                self.workdir = tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-")
                if not self._atexit:
                    atexit.register(self.stop)  # this process may end without a TaskExecutor stop
                    self._atexit = True
            self._conf = session_conf(config, threads, os.path.join(self.workdir, "spark-local"), self._process_config)
            self._warned.clear()
            fut = self._future = Future()
            conf = dict(self._conf)
        threading.Thread(target=self._create, args=(fut, conf), name="SparkSession start", daemon=True).start()
        return fut

    def _create(self, fut: Future[SparkSession], conf: dict[str, str]) -> None:
        try:
            from pyspark.sql import SparkSession  # deferred: pyspark, in Spark steps only

            # Spark looks up this host's address even when told to bind to loopback
            os.environ.setdefault("SPARK_LOCAL_IP", conf.get("spark.driver.bindAddress", "127.0.0.1"))
            # local mode starts Python workers with $PYSPARK_PYTHON (default python3), not with
            # spark.pyspark.python: they need this interpreter (yarnflink, pyarrow)
            os.environ.setdefault("PYSPARK_PYTHON", conf.get("spark.pyspark.python", sys.executable))
            builder = SparkSession.builder
            for k, v in conf.items():
                builder = builder.config(k, v)
            log.info("starting the SparkSession (%s)", conf["spark.master"])
            session = self._get_or_create(builder)
            self.starts += 1
            fut.set_result(session)
        except BaseException as e:  # noqa: BLE001 - handed to every step waiting for the session
            log.warning("the SparkSession failed to start: %s", e)
            fut.set_exception(e)

    @staticmethod
    def _get_or_create(builder: Any) -> SparkSession:
        """``builder.getOrCreate()``, tried again when the JVM exits while starting up. Launching
        the JVM forks this multi-threaded process (pyspark passes a ``preexec_fn``); on a loaded
        machine the gateway JVM has been seen to exit within milliseconds of the fork, once in
        several hundred starts. A second launch succeeds; any other error is raised at once."""
        for attempt in range(1, _GATEWAY_ATTEMPTS + 1):
            try:
                return builder.getOrCreate()
            except Exception as e:  # noqa: BLE001 - only the gateway's early exit is retried
                if attempt == _GATEWAY_ATTEMPTS or not _gateway_exited(e):
                    raise
                log.warning(
                    "the Spark JVM exited while starting (attempt %d of %d): %s; starting it again",
                    attempt,
                    _GATEWAY_ATTEMPTS,
                    e,
                )
                time.sleep(0.5 * attempt)
        raise AssertionError("unreachable")

    def get(self, config: Mapping[str, str]) -> SparkSession:
        """The session (started if needed; waits for a start under way). ``config`` is the job
        configuration; its static Spark keys that differ from the running session's are logged."""
        session = self.start(config).result()
        for k, v in spark_keys(config).items():
            if not k.startswith("spark.sql.") and self._conf.get(k) != v and k not in self._warned:
                self._warned.add(k)
                log.warning(
                    "%s=%s is ignored: the TaskExecutor's SparkSession was started with %s",
                    k,
                    v,
                    self._conf.get(k, "its default"),
                )
        return session

    @property
    def active(self) -> bool:
        fut = self._future
        return fut is not None and fut.done() and fut.exception() is None

    def stop(self) -> None:
        """Stop the session and its JVM and remove the work directory (waits for a start under
        way). A later ``get`` starts a new session."""
        with self._lock:
            fut, self._future = self._future, None
            workdir, self.workdir = self.workdir, None
            self._watched.clear()
        if fut is None:
            return
        try:
            session = fut.result()
        except BaseException:  # noqa: BLE001 - it never started
            session = None
        if session is not None:
            log.info("stopping the SparkSession")
            _discard(session)
            _shutdown_gateway()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)

    def new_workdir(self, prefix: str) -> str:
        """A fresh directory under the session's work directory (removed with the session)."""
        base = self.workdir or tempfile.gettempdir()
        os.makedirs(base, exist_ok=True)
        return tempfile.mkdtemp(prefix=prefix, dir=base)

    # ------------------------------------------------------------------ cancellation
    @contextmanager
    def running(self, session: SparkSession, group: str, is_running: Callable[[], bool]) -> Iterator[None]:
        """Run Spark jobs of this thread in job group ``group``; cancel them once ``is_running()``
        turns false (the task was cancelled)."""
        sc = session.sparkContext
        sc.setJobGroup(group, group, interruptOnCancel=True)
        with self._lock:
            self._watched[group] = (sc, is_running)
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, name="Spark step canceller", daemon=True)
                self._watcher.start()
        try:
            yield
        finally:
            with self._lock:
                self._watched.pop(group, None)
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]  # None removes it

    def _watch(self) -> None:
        idle = threading.Event()
        while True:
            idle.wait(CANCEL_POLL_S)
            with self._lock:
                if not self._watched:
                    self._watcher = None
                    return
                items = list(self._watched.items())
            for group, (sc, is_running) in items:
                try:
                    if not is_running():
                        log.info("cancelling the Spark jobs of %s", group)
                        with self._lock:
                            self._watched.pop(group, None)
                        sc.cancelJobGroup(group)
                except Exception:  # a stopped context: nothing left to cancel
                    log.debug("cancelling %s failed", group, exc_info=True)


def _remove_stale_workdirs() -> None:
    """Remove the work directories of processes that are gone (killed before they cleaned up)."""
    for path in glob.glob(os.path.join(tempfile.gettempdir(), WORKDIR_PREFIX + "*")):
        pid = os.path.basename(path)[len(WORKDIR_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _usable(session: SparkSession) -> bool:
    """False once the session was stopped (by a step's function, say) or its JVM died."""
    from pyspark import SparkContext  # deferred: pyspark, in Spark steps only

    proc = getattr(SparkContext._gateway, "proc", None)
    return session.sparkContext._jsc is not None and (proc is None or proc.poll() is None)


def _discard(session: SparkSession) -> None:
    """Forget a broken session so that the next ``getOrCreate`` makes a new one (and a new JVM
    if the old one died: stopping then fails half-way, leaving PySpark's singletons set)."""
    from pyspark import SparkContext  # deferred: pyspark, in Spark steps only
    from pyspark.sql import SparkSession  # deferred: pyspark, in Spark steps only

    try:
        session.stop()
    except Exception:
        log.debug("stopping a broken SparkSession failed", exc_info=True)
    with SparkContext._lock:
        SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is not None and proc.poll() is not None:
        _shutdown_gateway()


def _shutdown_gateway() -> None:
    """End the JVM behind PySpark's gateway (it exits when its stdin closes)."""
    from pyspark import SparkContext  # deferred: pyspark, in Spark steps only

    gateway = SparkContext._gateway
    if gateway is None:
        return
    SparkContext._gateway = None
    SparkContext._jvm = None  # type: ignore[assignment]
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    except Exception:
        log.debug("py4j gateway shutdown failed", exc_info=True)
    if proc is not None:
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=30)
        except Exception:  # still alive after 30 s
            proc.kill()
            proc.wait()


#: The holder of this process's SparkSession.
holder = SparkSessionHolder()
