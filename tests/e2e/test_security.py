"""Security by default, with real master and TaskExecutor processes, real gRPC, TLS and HTTP on
loopback: the REST token, mutual TLS inside the cluster, loopback binding and input limits."""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import re
import socket
import ssl
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import psutil
import pytest

from yarnflink import StreamExecutionEnvironment
from yarnflink.api.environment import set_default_executor
from yarnflink.client.rest_client import RestClient
from yarnflink.common.config import Configuration
from yarnflink.jobmaster.gateway import OfferSlots, TaskManagerHeartbeat
from yarnflink.network.protocol import FrameType, encode_request, send_frame
from yarnflink.resourcemanager.gateway import RegisterTaskExecutor
from yarnflink.rpc import convert
from yarnflink.security.ca import ClusterCA
from yarnflink.security.material import ensure_cluster_security
from yarnflink.taskexecutor.gateway import RequestTaskExecutorInfo

from .conftest import Cluster, start_cluster, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

RM = "/yarnflink.rpc.ResourceManagerGateway/"
TE = "/yarnflink.rpc.TaskExecutorGateway/"
JM = "/yarnflink.rpc.JobMasterGateway/"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("secured"), taskexecutors=2, slots=2)
    yield c
    set_default_executor(None)
    c.stop()


@pytest.fixture(scope="module")
def foreign(tmp_path_factory: pytest.TempPathFactory) -> Configuration:
    """Another cluster's material: a CA, a certificate it issued, a token."""
    return ensure_cluster_security(Configuration(), tmp_path_factory.mktemp("foreign") / "security")


def _pem(conf: Configuration, what: str) -> bytes:
    return Path(conf.get(f"security.ssl.internal.{what}")).read_bytes()


def _channel(address: str, conf: Configuration | None) -> grpc.Channel:
    """A channel presenting ``conf``'s certificate (and trusting its CA); plaintext for None."""
    if conf is None:
        return grpc.insecure_channel(address)
    creds = grpc.ssl_channel_credentials(_pem(conf, "ca"), _pem(conf, "key"), _pem(conf, "cert"))
    return grpc.secure_channel(address, creds, options=[("grpc.max_send_message_length", 128 << 20)])


def _status(address: str, conf: Configuration | None, method: str, payload: bytes) -> tuple[grpc.StatusCode, str]:
    with _channel(address, conf) as ch:
        try:
            ch.unary_unary(method)(payload, timeout=20)
        except grpc.RpcError as e:
            return e.code(), e.details() or ""  # type: ignore[attr-defined]
    return grpc.StatusCode.OK, ""


def _call(address: str, conf: Configuration | None, method: str, payload: bytes) -> grpc.StatusCode:
    return _status(address, conf, method, payload)[0]


def _cluster_conf(c: Cluster) -> Configuration:
    sec = Path(c.workdir) / "security"
    return Configuration(
        {
            "security.ssl.internal.ca": str(sec / "ca.pem"),
            "security.ssl.internal.cert": str(sec / "cluster.pem"),
            "security.ssl.internal.key": str(sec / "cluster-key.pem"),
        }
    )


def _listening(pid: int) -> set[tuple[str, int]]:
    return {
        (s.laddr.ip, s.laddr.port)
        for s in psutil.Process(pid).net_connections(kind="inet")
        if s.status == psutil.CONN_LISTEN
    }


def _loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    mapped = getattr(addr, "ipv4_mapped", None)  # gRPC listens on v4-mapped IPv6 sockets
    return addr.is_loopback or (mapped is not None and mapped.is_loopback)


def _rest_port(c: Cluster) -> int:
    return int(c.rest_url.rsplit(":", 1)[1])


def _start_forever_job(c: Cluster) -> str:
    set_default_executor(c.executor())
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_sequence(1, 10**12).rebalance().filter(lambda x: x < 0).print()
    job_id = env.execute_async("forever").get_job_id()
    wait_until(lambda: all(v["status"] == "RUNNING" for v in c.rest.job(job_id)["vertices"]), message="job running")
    return job_id


def _cancel(c: Cluster, job_id: str) -> None:
    c.rest.cancel(job_id)
    wait_until(lambda: c.rest.job(job_id)["state"] == "CANCELED", message="job canceled")


# ---------------------------------------------------------------------- REST
def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "0123456789abcdef0123456789abcdef", path)


def test_every_endpoint_but_health_needs_the_token(secured: Cluster) -> None:
    spec = httpx.get(secured.rest_url + "/openapi.json", headers=secured.auth, timeout=30).json()
    operations = [(m.upper(), p) for p, item in spec["paths"].items() for m in item if m != "parameters"]
    assert len(operations) >= 14 and ("DELETE", "/cluster") in operations
    for creds in (
        {},
        {"authorization": "Bearer wrong"},
        {"cookie": "yarnflink-auth-0=1"},
        {"authorization": f"Basic {secured.auth['authorization'].split()[1]}"},
    ):
        for method, path in operations + [("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/")]:
            r = httpx.request(
                method,
                secured.rest_url + _concrete(path),
                headers=creds,
                content=b"{}" if method in ("POST", "PATCH") else None,
                timeout=30,
            )
            if path == "/health":
                assert r.status_code == 200, r.text
            else:
                assert r.status_code == 401, (method, path, creds, r.status_code)
                assert r.headers["www-authenticate"].startswith("Bearer")
    assert secured.rest.overview()["taskmanagers"] == 2  # DELETE /cluster without the token did nothing
    token_file = Path(secured.info["token_file"])
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700


def test_session_token_is_private_and_the_cli_uses_it(tmp_path: Path) -> None:
    env = dict(os.environ, YARNFLINK_SESSIONS_DIR=str(tmp_path / "sessions"), YARNFLINK_CONF_DIR=str(tmp_path))
    (tmp_path / "yarnflink.yaml").write_text("rest.port: 0\njobmanager.rpc.port: 0\n")

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "yarnflink.cli.main", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )

    r = cli("session", "start", "-n", "1", "-s", "1")
    assert r.returncode == 0, r.stderr
    session_id = re.search(r"Session (\S+) started", r.stdout).group(1)  # type: ignore[union-attr]
    try:
        info = json.loads((tmp_path / "sessions" / session_id / "session.json").read_text())
        workdir, token_file = Path(info["workdir"]), Path(info["token_file"])
        token = token_file.read_text().strip()
        assert f"REST token: in {token_file}" in r.stdout and token not in r.stdout
        assert token_file.parent == workdir / "security"
        for d in (workdir, workdir / "security"):
            assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
        for f in (workdir / "security").iterdir():
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
        assert token not in json.dumps(info)
        # no process of the cluster carries the token where other users could read it
        master = psutil.Process(info["pid"])
        for p in [master, *master.children(recursive=True)]:
            try:
                cmdline = p.cmdline()
            except (psutil.NoSuchProcess, psutil.ZombieProcess):  # a short-lived child just ended
                continue
            assert token not in " ".join(cmdline), cmdline
        assert httpx.get(info["rest_url"] + "/overview", timeout=30).status_code == 401
        assert (
            httpx.get(
                info["rest_url"] + "/overview", headers={"authorization": f"Bearer {token}"}, timeout=30
            ).status_code
            == 200
        )
        r = cli("list")  # the user never types the token
        assert r.returncode == 0 and "No jobs." in r.stdout, r.stderr
        r = cli("list", "-m", info["rest_url"])
        assert r.returncode == 0, r.stderr
    finally:
        r = cli("session", "stop", session_id)
    assert r.returncode == 0, r.stderr


def test_authentication_none_turns_it_off(tmp_path: Path) -> None:
    c = start_cluster(tmp_path, taskexecutors=1, slots=1, security_rest_authentication="none")
    try:
        assert c.info["token_file"] == "" and not (tmp_path / "security" / "rest-token").exists()
        assert httpx.get(c.rest_url + "/overview", timeout=30).json()["taskmanagers"] == 1
    finally:
        c.stop()


def test_https_with_a_given_certificate(tmp_path: Path) -> None:
    ca = ClusterCA.generate("the user's own CA")
    issued = ca.issue("rest", ["127.0.0.1"])
    for name, data in (("ca.pem", ca.cert_pem), ("rest.pem", issued.cert_pem), ("rest-key.pem", issued.key_pem)):
        (tmp_path / name).write_bytes(data)
    c = start_cluster(
        tmp_path / "w",
        taskexecutors=1,
        slots=1,
        security_ssl_rest_enabled="true",
        security_ssl_rest_cert=str(tmp_path / "rest.pem"),
        security_ssl_rest_key=str(tmp_path / "rest-key.pem"),
        security_ssl_rest_ca=str(tmp_path / "ca.pem"),
    )
    try:
        assert c.rest_url.startswith("https://127.0.0.1:")
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(c.rest_url + "/health", timeout=30)  # the system trust store does not know the user's CA
        with pytest.raises(httpx.HTTPError):
            httpx.get(c.rest_url.replace("https:", "http:") + "/health", timeout=30)
        assert (
            httpx.get(
                c.rest_url + "/overview", verify=ssl.create_default_context(cafile=str(tmp_path / "ca.pem")), timeout=30
            ).status_code
            == 401
        )
        set_default_executor(c.executor())  # token and CA found by the URL
        env = StreamExecutionEnvironment.get_execution_environment()
        assert sorted(env.from_collection([1, 2, 3]).map(lambda x: x * 10).execute_and_collect()) == [10, 20, 30]
    finally:
        set_default_executor(None)
        c.stop()


# ---------------------------------------------------------------------- inside the cluster
def test_every_port_binds_to_loopback(secured: Cluster) -> None:
    job_id = _start_forever_job(secured)  # a JobMaster has its port too
    try:
        pids = [secured.proc.pid, *secured.taskexecutor_pids()]
        ports = {pid: _listening(pid) for pid in pids}
        assert all(ports.values()) and len(ports[secured.proc.pid]) >= 3  # REST, ResourceManager, JobMaster
        for pid, bound in ports.items():
            assert all(_loopback(ip) for ip, _ in bound), (pid, bound)
    finally:
        _cancel(secured, job_id)


def test_gateways_and_data_servers_refuse_peers_without_the_clusters_certificate(
    secured: Cluster, foreign: Configuration
) -> None:
    own = _cluster_conf(secured)
    job_id = _start_forever_job(secured)
    try:
        tms = secured.rest.taskmanagers()
        rm = str(secured.info["rpc_address"])
        te_rpc = [tm["path"] for tm in tms]
        master_ports = {p for _, p in _listening(secured.proc.pid)} - {_rest_port(secured), int(rm.rsplit(":", 1)[1])}
        # the JobMaster(s): ports where a call with the cluster's certificate reaches the servicer
        heartbeat = convert.task_manager_heartbeat_to_pb(TaskManagerHeartbeat("", "")).SerializeToString()
        jms = [
            f"127.0.0.1:{p}"
            for p in master_ports
            if _call(f"127.0.0.1:{p}", own, JM + "HeartbeatFromTaskManager", heartbeat)
            == grpc.StatusCode.FAILED_PRECONDITION
        ]
        assert jms, "no JobMaster port found"
        calls = [
            (
                rm,
                RM + "RegisterTaskExecutor",
                convert.register_task_executor_to_pb(
                    RegisterTaskExecutor("intruder", "127.0.0.1:1", "127.0.0.1:2", num_slots=8)
                ),
            ),
            *[
                (a, TE + "RequestTaskExecutorInfo", convert.task_executor_info_request_to_pb(RequestTaskExecutorInfo()))
                for a in te_rpc
            ],
            *[(a, JM + "OfferSlots", convert.offer_slots_to_pb(OfferSlots("x", "", ()))) for a in jms],
        ]
        for address, method, request in calls:
            payload = request.SerializeToString()
            for peer in (None, foreign):  # plaintext, and another cluster's certificate
                assert _call(address, peer, method, payload) == grpc.StatusCode.UNAVAILABLE, (address, method, peer)
        # control: with the cluster's certificate the same TaskExecutors answer
        assert all(_call(a, own, TE + "RequestTaskExecutorInfo", b"") == grpc.StatusCode.OK for a in te_rpc)
        # data servers: no partition for plaintext peers or other clusters' certificates
        for tm in tms:
            address = ("127.0.0.1", tm["dataPort"])
            with socket.create_connection(address, timeout=20) as raw:
                send_frame(raw, FrameType.REQUEST, [encode_request("0" * 32, 0)])
                try:
                    data = raw.recv(65536)
                except ConnectionResetError:
                    data = b""
                assert not data.startswith((b"\x02", b"\x05")), data[:16]  # neither DATA nor a protocol ERROR
            ctx = ssl.create_default_context(cafile=foreign.get("security.ssl.internal.ca"))
            ctx.load_cert_chain(foreign.get("security.ssl.internal.cert"), foreign.get("security.ssl.internal.key"))
            with socket.create_connection(address, timeout=20) as raw, pytest.raises(ssl.SSLError):
                ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        assert len(secured.rest.taskmanagers()) == 2  # the intruder never registered
        assert secured.rest.job(job_id)["state"] == "RUNNING"
    finally:
        _cancel(secured, job_id)


def test_taskexecutor_with_another_clusters_certificate_is_refused(
    secured: Cluster, foreign: Configuration, tmp_path: Path
) -> None:
    rm = str(secured.info["rpc_address"])
    base = [sys.executable, "-m", "yarnflink.cli.main", "taskexecutor", "start", "--master", rm]
    intruders = {
        "foreign": [
            f"security.ssl.internal.{k}={foreign.get(f'security.ssl.internal.{k}')}" for k in ("ca", "cert", "key")
        ],
        "plaintext": ["security.ssl.internal.enabled=false"],
    }
    procs = {}
    try:
        for name, dynamic in intruders.items():
            args = [*base, "--log-file", str(tmp_path / f"{name}.log")]
            for d in dynamic:
                args += ["-D", d]
            procs[name] = subprocess.Popen(
                args, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        for name in procs:  # each has tried and been refused at least twice
            wait_until(
                lambda: (
                    len(
                        re.findall(
                            r"registration at .* failed \(StatusCode.UNAVAILABLE\)", _read(tmp_path / f"{name}.log")
                        )
                    )
                    >= 2
                ),
                message=f"{name} TaskExecutor refused",
            )
        assert all(p.poll() is None for p in procs.values())  # still knocking, never let in
        assert len(secured.rest.taskmanagers()) == 2 and "registered at" not in _read(tmp_path / "foreign.log")
        # without any certificate a TaskExecutor does not even start
        r = subprocess.run(base, cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert r.returncode == 2 and "security.ssl.internal.cert" in r.stderr, r.stderr
    finally:
        for p in procs.values():
            p.kill()
            p.wait()
    # the cluster keeps running jobs
    set_default_executor(secured.executor())
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    assert sum(env.from_sequence(1, 1000).rebalance().map(lambda x: x).execute_and_collect()) == 500500


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


# ---------------------------------------------------------------------- input limits
def test_malformed_and_oversized_messages_are_rejected_without_disturbing_jobs(secured: Cluster) -> None:
    own = _cluster_conf(secured)
    job_id = _start_forever_job(secured)
    try:
        rm = str(secured.info["rpc_address"])
        te = secured.rest.taskmanagers()[0]["path"]
        garbage = b"\xff\xff\xff\xff\x0f garbage"
        for address, method in (
            (rm, RM + "RegisterTaskExecutor"),
            (rm, RM + "DeclareRequiredResources"),
            (te, TE + "SubmitTask"),
            (te, TE + "RequestSlot"),
        ):
            code, details = _status(address, own, method, garbage)
            assert code == grpc.StatusCode.UNKNOWN and "Error parsing message" in details, (code, details)
        huge = convert.register_task_executor_to_pb(
            RegisterTaskExecutor("x" * (65 << 20), "", "", 0)
        ).SerializeToString()
        code, details = _status(rm, own, RM + "RegisterTaskExecutor", huge)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details, (code, details)
        for body in (b"{", b"\xff\xfe", b'{"jobId": 1}', b"[]" * 1000, b"[" * 100_000, b'{"a":' * 100_000):
            r = httpx.post(
                secured.rest_url + "/jobs",
                content=body,
                headers={"content-type": "application/json", **secured.auth},
                timeout=30,
            )
            assert r.status_code == 400, r.text
        assert secured.rest.job(job_id)["state"] == "RUNNING"
        assert all(v["status"] == "RUNNING" for v in secured.rest.job(job_id)["vertices"])
        assert secured.rest.overview()["taskmanagers"] == 2
    finally:
        _cancel(secured, job_id)


def test_request_bodies_and_job_graphs_have_size_limits(secured: Cluster) -> None:
    host, port = secured.rest_url.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:  # a declared size above the limit is refused before a byte of the body is sent
        conn.putrequest("PATCH", "/jobs/" + "a" * 32 + "?mode=cancel")
        conn.putheader("Authorization", secured.auth["authorization"])
        conn.putheader("Content-Length", str(1 << 40))
        conn.endheaders()
        r = conn.getresponse()
        assert r.status == 413 and b"max-content-length" in r.read()
    finally:
        conn.close()
    # a vertex whose code exceeds the RPC message limit could never be deployed: refused at once
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1]).map(lambda x: x).print()
    graph = env.get_job_graph()
    graph.vertices[0].operators[0].spec = b"\0" * (65 << 20)
    r = httpx.post(
        secured.rest_url + "/jobs",
        content=json.dumps(graph.to_json()).encode(),
        headers={"content-type": "application/json", **secured.auth},
        timeout=120,
    )
    assert r.status_code == 413 and "RPC message limit" in r.json()["errors"][0], r.text[:300]
    assert secured.rest.overview()["taskmanagers"] == 2
    assert RestClient(secured.rest_url).jobs_overview() is not None
