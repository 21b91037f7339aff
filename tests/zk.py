"""A real ZooKeeper for tests: a standalone server or a 3-node ensemble on loopback ports.

The server is Apache ZooKeeper as Debian packages it (``apt-get install zookeeper``, which
``scripts/setup`` does when run as root); elsewhere point ``ZOOKEEPER_CLASSPATH`` at the server's
jars. Each server gets its own free client port and data directory; ``start`` returns once the
server answers the ``srvr`` four-letter word with a mode (standalone, leader or follower), which is
true only when it serves requests (``ruok`` answers ``imok`` before that).

``ZkProxy`` sits between one client and the server to cut the network without touching either
process: ``blackhole()`` keeps the TCP connections open but forwards nothing (and hangs new ones),
as a partition does, so the client notices only by its own timeouts; ``heal()`` lifts it.

Tests give every case its own root path (kazoo's harness gives each test a chroot): see
``unique_root``.
"""

from __future__ import annotations

import glob
import os
import random
import selectors
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
DEBIAN_JAR = "/usr/share/java/zookeeper.jar"  # its manifest's Class-Path names the dependencies
SLF4J_SIMPLE = "/usr/share/java/slf4j-simple.jar"  # server log to the log file instead of nowhere
INSTALL_HINT = (
    "ZooKeeper server not found: install Debian's 'zookeeper' package (scripts/setup does "
    "as root) or set ZOOKEEPER_CLASSPATH to the server's jars"
)


T = TypeVar("T")


class ZooKeeperNotInstalled(RuntimeError):
    pass


def zookeeper_classpath() -> str:
    """Classpath of the ZooKeeper server, or ``ZooKeeperNotInstalled``."""
    env = os.environ.get("ZOOKEEPER_CLASSPATH")
    if env:
        return env
    home = os.environ.get("ZOOKEEPER_HOME")
    if home:
        jars = sorted(glob.glob(os.path.join(home, "lib", "*.jar")) + glob.glob(os.path.join(home, "*.jar")))
        if jars:
            return os.pathsep.join(jars)
    if os.path.exists(DEBIAN_JAR):
        return os.pathsep.join([DEBIAN_JAR] + ([SLF4J_SIMPLE] if os.path.exists(SLF4J_SIMPLE) else []))
    raise ZooKeeperNotInstalled(INSTALL_HINT)


def java_executable() -> str:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise ZooKeeperNotInstalled("java not found (ZooKeeper needs a JRE; set JAVA_HOME or install one)")
    return java


def _ephemeral_port_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 right now (all held open until all are picked).

    The ports are picked *below* the kernel's ephemeral range: the ZooKeeper server binds them
    only later (a JVM start, seconds on a loaded machine), and a port from ``bind(0)`` is one the
    kernel hands out again at once to any other ``bind(0)`` or outgoing connection of the test
    session (every master, TaskExecutor and client here uses port 0), so a port from the
    ephemeral range can be taken in between. Below it only another explicit pick competes."""
    lo, _hi = _ephemeral_port_range()
    floor = 10000
    rng = random.SystemRandom()
    socks: list[socket.socket] = []
    picked: set[int] = set()
    try:
        for _ in range(200 * n):
            if len(socks) == n or lo - floor < 1000:
                break
            port = rng.randrange(floor, lo)
            if port in picked:
                continue
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            socks.append(s)
            picked.add(port)
        while len(socks) < n:  # no room below the ephemeral range: let the kernel pick
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def four_letter_word(port: int, word: str, timeout: float = 2.0) -> str:
    """The answer of a ZooKeeper four-letter word ('' if the server does not answer)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while True:
                b = s.recv(4096)
                if not b:
                    break
                chunks.append(b)
        return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def wait_for(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.05) -> object:
    """Polls ``predicate`` until it returns something true; AssertionError naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def unique_root(prefix: str = "t") -> str:
    """A fresh ZooKeeper path for one test (``high-availability.zookeeper.path.root``)."""
    return f"/{prefix}-{uuid.uuid4().hex[:12]}"


def die_with_parent(cmd: list[str]) -> list[str]:
    """``cmd`` wrapped so that on Linux the server gets SIGKILL when the thread that started it dies
    (a killed test run must not leave servers behind). util-linux's ``setpriv`` sets
    PR_SET_PDEATHSIG and execs ``cmd`` in the same process, so the pid stays the server's and no
    Python code runs between fork and exec: a ``preexec_fn`` in this multi-threaded test process is
    not fork-safe, and once failed a ZooKeeper restart in a drill."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", *cmd] if setpriv else cmd


class ZooKeeperServer:
    """One ZooKeeper server process: standalone, or member ``server_id`` of an ensemble whose
    members are ``peers`` (id -> (client port, quorum port, election port))."""

    def __init__(
        self,
        workdir: Path,
        client_port: int,
        *,
        server_id: int | None = None,
        peers: dict[int, tuple[int, int, int]] | None = None,
        tick_ms: int = 200,
    ) -> None:
        self.workdir = Path(workdir)
        self.client_port = client_port
        self.server_id = server_id
        self.peers = peers or {}
        self.tick_ms = tick_ms
        self.proc: subprocess.Popen[bytes] | None = None
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "zookeeper.log"
        self._write_config()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def _write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={self.tick_ms}",
            f"dataDir={self.data_dir}",
            f"clientPort={self.client_port}",
            "clientPortAddress=127.0.0.1",
            "admin.enableServer=false",
            "4lw.commands.whitelist=*",
            f"minSessionTimeout={2 * self.tick_ms}",
            "maxSessionTimeout=120000",
            "preAllocSize=1024",  # KB; the default preallocates 64 MB of log per server
            "forceSync=no",  # tests need no fsync; a loaded CI disk makes it slow
        ]
        if self.peers:
            # generous limits: a loaded 2-core machine must not drop followers
            lines += [
                "initLimit=50",
                "syncLimit=25",
                "standaloneEnabled=false",
                "reconfigEnabled=false",
                "electionPortBindRetry=0",
            ]
            for sid, (_cp, qp, ep) in sorted(self.peers.items()):
                lines.append(f"server.{sid}=127.0.0.1:{qp}:{ep}")
            (self.data_dir / "myid").write_text(f"{self.server_id}\n")
        (self.workdir / "zoo.cfg").write_text("\n".join(lines) + "\n")

    # ------------------------------------------------------------------ lifecycle
    def launch(self) -> None:
        """Starts the process without waiting for it to serve."""
        if self.is_running():
            return
        cmd = [
            java_executable(),
            "-Xmx160m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-cp",
            zookeeper_classpath(),
            MAIN_CLASS,
            str(self.workdir / "zoo.cfg"),
        ]
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                die_with_parent(cmd),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                start_new_session=True,
            )
        finally:
            log.close()

    def start(self, timeout: float = 60.0) -> ZooKeeperServer:  # a JVM start: slow on a loaded CI
        self.launch()
        self.wait_serving(timeout)
        return self

    def mode(self) -> str | None:
        """``standalone``, ``leader`` or ``follower`` while the server serves, else None."""
        for line in four_letter_word(self.client_port, "srvr", timeout=1.0).splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    def wait_serving(self, timeout: float = 30.0) -> str:
        def serving() -> str | None:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper on port {self.client_port} exited with {self.proc.returncode}; log:\n{self.log_tail()}"
                )
            return self.mode()

        try:
            return str(wait_for(serving, timeout, f"ZooKeeper on port {self.client_port} to serve"))
        except AssertionError as e:
            raise AssertionError(f"{e}; log:\n{self.log_tail()}") from None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it does not exit within ``timeout``."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        """SIGKILL: the server vanishes as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def restart(self, timeout: float = 60.0) -> str:
        self.kill()
        self.launch()
        return self.wait_serving(timeout)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "<no log>"


class ZooKeeperEnsemble:
    """``size`` servers on loopback forming one ensemble (a quorum needs a majority of them)."""

    def __init__(self, workdir: Path, size: int = 3, tick_ms: int = 200) -> None:
        ports = free_ports(3 * size)
        peers = {i + 1: (ports[3 * i], ports[3 * i + 1], ports[3 * i + 2]) for i in range(size)}
        self.servers = [
            ZooKeeperServer(Path(workdir) / f"zk{sid}", cp, server_id=sid, peers=peers, tick_ms=tick_ms)
            for sid, (cp, _qp, _ep) in peers.items()
        ]

    @property
    def hosts(self) -> str:
        return ",".join(s.address for s in self.servers)

    def start(self, timeout: float = 120.0) -> ZooKeeperEnsemble:  # three JVMs and an election
        for s in self.servers:
            s.launch()
        deadline = time.monotonic() + timeout
        for s in self.servers:
            s.wait_serving(max(1.0, deadline - time.monotonic()))
        return self

    def leader(self) -> ZooKeeperServer:
        return next(s for s in self.servers if s.mode() == "leader")

    def stop(self) -> None:
        for s in self.servers:
            s.kill()


def zookeeper_or_skip(start: Callable[[], T]) -> T:
    """``start()``; a missing ZooKeeper fails the test unless YARNFLINK_SKIP_ZOOKEEPER_TESTS=1."""
    try:
        return start()
    except ZooKeeperNotInstalled as e:
        if os.environ.get("YARNFLINK_SKIP_ZOOKEEPER_TESTS") == "1":
            import pytest

            pytest.skip(str(e))
        raise


def start_standalone(workdir: Path, tick_ms: int = 200) -> ZooKeeperServer:
    (port,) = free_ports(1)
    return ZooKeeperServer(Path(workdir), port, tick_ms=tick_ms).start()


class ZkProxy:
    """A TCP proxy from a local port to one ZooKeeper server, which a test can partition.

    ``blackhole()`` is a silent network partition: open connections stay open but nothing crosses
    them in either direction (bytes are read and dropped), and new connections are accepted and
    hang the same way. The client notices only by its own read timeout (SUSPENDED after two thirds
    of the session timeout) and the server by the session timeout (the session expires).
    ``heal()`` ends the partition: connections made since then forward again (connections made
    during the partition are closed, so the client reconnects)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._peer: dict[socket.socket, socket.socket] = {}
        self._partitioned = threading.Event()
        self._closed = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._lock = threading.Lock()
        self._pending: list[Callable[[], None]] = []
        self._thread = threading.Thread(target=self._run, name=f"ZkProxy-{self.port}", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def blackhole(self) -> None:
        self._partitioned.set()

    def heal(self) -> None:
        self._run_on_loop(self._heal)

    def drop_connections(self) -> None:
        """Closes every connection (the client sees it at once and reconnects)."""
        self._run_on_loop(self._close_all)

    def close(self) -> None:
        self._run_on_loop(self._shutdown)
        self._thread.join(5)

    # ------------------------------------------------------------------ loop
    def _run_on_loop(self, fn: Callable[[], None]) -> None:
        done = threading.Event()

        def run() -> None:
            try:
                fn()
            finally:
                done.set()

        with self._lock:
            self._pending.append(run)
        try:
            self._wake_w.send(b"x")
        except OSError:
            return
        done.wait(5)

    def _heal(self) -> None:
        self._close_all()
        self._partitioned.clear()

    def _close_all(self) -> None:
        for s in list(self._peer):
            self._drop(s)

    def _shutdown(self) -> None:
        self._close_all()
        self._closed = True

    def _drop(self, s: socket.socket) -> None:
        other = self._peer.pop(s, None)
        for x in (s, other):
            if x is None:
                continue
            self._peer.pop(x, None)
            try:
                self._sel.unregister(x)
            except (KeyError, ValueError):
                pass
            x.close()

    def _run(self) -> None:
        while not self._closed:
            for key, _ in self._sel.select(0.5):
                sock = key.fileobj
                if key.data == "wake":
                    self._wake_r.recv(4096)
                    with self._lock:
                        todo, self._pending = self._pending, []
                    for fn in todo:
                        fn()
                elif sock is self._listener:
                    self._accept()
                elif sock in self._peer:
                    self._forward(sock)  # type: ignore[arg-type]
        for s in (self._listener, self._wake_r, self._wake_w):
            s.close()
        self._sel.close()

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=2)
        except OSError:
            client.close()
            return
        for s in (client, upstream):
            s.setblocking(False)
        self._peer[client] = upstream
        self._peer[upstream] = client
        self._sel.register(client, selectors.EVENT_READ, None)
        self._sel.register(upstream, selectors.EVENT_READ, None)

    def _forward(self, s: socket.socket) -> None:
        try:
            data = s.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(s)
            return
        if self._partitioned.is_set():
            return  # a partition: bytes vanish
        other = self._peer.get(s)
        if other is None:
            return
        try:
            other.setblocking(True)
            other.settimeout(5)
            other.sendall(data)
            other.setblocking(False)
        except OSError:
            self._drop(s)
