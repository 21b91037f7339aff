"""The chaos drivers that need no cluster: the checkpoint disk's fault file system (full,
read-only, slow; switched by its control file) and the S3 endpoint's stoppable TCP proxy."""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.chaos.faultfs import CONTROL_ENV, ChaosFileSystem, FaultControl
from integration.chaos.tcpproxy import TcpProxy


@pytest.fixture
def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ChaosFileSystem, FaultControl, str]:
    control = tmp_path / "control.json"
    monkeypatch.setenv(CONTROL_ENV, str(control))
    root = tmp_path / "disk"
    root.mkdir()
    return ChaosFileSystem(skip_instance_cache=True), FaultControl(str(control)), f"chaosfile://{root}"


def test_the_fault_disk_is_the_local_disk_until_told_otherwise(disk: tuple[ChaosFileSystem, FaultControl, str]) -> None:
    fs, _, root = disk
    fs.makedirs(f"{root}/chk-1", exist_ok=True)
    fs.pipe_file(f"{root}/chk-1/_metadata", b"m")
    fs.mv(f"{root}/chk-1/_metadata", f"{root}/chk-1/x")
    assert fs.cat_file(f"{root}/chk-1/x") == b"m"
    assert fs.unstrip_protocol(f"{root}/chk-1") == f"{root}/chk-1"


def test_full_read_only_and_slow(disk: tuple[ChaosFileSystem, FaultControl, str]) -> None:
    fs, control, root = disk
    fs.pipe_file(f"{root}/a", b"a")
    control.set(full=True)
    with pytest.raises(OSError) as full:
        fs.pipe_file(f"{root}/b", b"b")
    assert full.value.errno == errno.ENOSPC
    assert fs.cat_file(f"{root}/a") == b"a"  # reading still works
    fs.rm_file(f"{root}/a")  # and freeing space
    control.set(readonly=True)
    for change in (
        lambda: fs.pipe_file(f"{root}/c", b"c"),
        lambda: fs.makedirs(f"{root}/d"),
        lambda: fs.rm(root, recursive=True),
    ):
        with pytest.raises(OSError) as ro:
            change()
        assert ro.value.errno == errno.EROFS
    control.set(delay_s=0.2)
    t0 = time.monotonic()
    fs.pipe_file(f"{root}/e", b"e")
    assert time.monotonic() - t0 >= 0.2
    control.set()
    fs.pipe_file(f"{root}/f", b"f")
    with pytest.raises(ValueError, match="negative"):
        control.set(delay_s=-1)


@pytest.fixture
def echo() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(1024):
                    conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def _roundtrip(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        c.sendall(b"ping")
        return c.recv(1024)


def test_the_proxy_forwards_refuses_while_stopped_and_comes_back_on_the_same_port(echo: int) -> None:
    proxy = TcpProxy(echo)
    port = proxy.port
    assert _roundtrip(port) == b"ping"
    held = socket.create_connection(("127.0.0.1", port), timeout=5)
    proxy.stop()
    try:  # open connections are cut: closed or reset
        assert held.recv(1024) == b""
    except ConnectionResetError:
        pass
    held.close()
    with pytest.raises(ConnectionRefusedError):
        _roundtrip(port)
    proxy.start()
    assert proxy.port == port and _roundtrip(port) == b"ping"
    proxy.stop()


def _write(path: Path) -> int:
    """0, or the errno of writing 64 KB to ``path``."""
    try:
        with open(path, "wb") as f:
            f.write(b"x" * 65536)
            f.flush()
            os.fsync(f.fileno())
        return 0
    except OSError as e:
        return e.errno or -1


def test_the_checkpoint_disk_without_a_mount_goes_through_the_fault_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from integration.chaos.disk import CheckpointDisk

    monkeypatch.setenv(CONTROL_ENV, str(tmp_path / "control.json"))
    disk = CheckpointDisk(tmp_path / "disk", FaultControl(str(tmp_path / "control.json")), "wrapper")
    fs = ChaosFileSystem(skip_instance_cache=True)
    assert not disk.mounted and disk.url == f"chaosfile://{tmp_path / 'disk' / 'checkpoints'}"
    assert "ENOSPC" in disk.full()
    with pytest.raises(OSError):
        fs.pipe_file(f"{disk.url}/a", b"a")
    assert "EROFS" in disk.readonly()
    disk.heal()
    fs.pipe_file(f"{disk.url}/a", b"a")
    disk.close()
    with pytest.raises(ValueError, match="auto, tmpfs or wrapper"):
        CheckpointDisk(tmp_path / "other", FaultControl(str(tmp_path / "c2.json")), "loop")


def test_a_tmpfs_checkpoint_disk_gives_the_kernels_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from integration.chaos.disk import CheckpointDisk

    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    monkeypatch.setenv(CONTROL_ENV, str(tmp_path / "control.json"))
    disk = CheckpointDisk(tmp_path / "disk", FaultControl(str(tmp_path / "control.json")))
    if not disk.mounted:
        pytest.skip("mount is not allowed here")
    try:
        target = tmp_path / "disk" / "checkpoints" / "f"
        assert _write(target) == 0
        disk.full()
        assert _write(target.with_name("g")) == errno.ENOSPC
        disk.heal()
        assert _write(target.with_name("g")) == 0
        assert "remounted ro" in disk.readonly()
        assert _write(target.with_name("h")) == errno.EROFS
        disk.heal()
        assert _write(target.with_name("h")) == 0
    finally:
        disk.close()
    assert not os.path.ismount(tmp_path / "disk")
