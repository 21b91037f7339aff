"""Mutual TLS on the data transport: real sockets on loopback, real handshakes."""

from __future__ import annotations

import socket
import ssl

import numpy as np
import pyarrow as pa
import pytest

from yarnflink.common.config import Configuration
from yarnflink.network import InputChannelSpec, PartitionException, ShuffleEnvironment
from yarnflink.network.common import parse_address
from yarnflink.network.protocol import FrameType, encode_request, send_frame
from yarnflink.security import internal


def make_batch(start: int, rows: int = 100) -> pa.RecordBatch:
    return pa.record_batch({"c0": pa.array(np.arange(start, start + rows, dtype=np.int64))})


def _env() -> ShuffleEnvironment:
    env = ShuffleEnvironment("127.0.0.1", 0, partition_request_timeout=5.0)
    env.start()
    return env


def _drain(env: ShuffleEnvironment, spec: InputChannelSpec) -> int:
    gate = env.create_input_gate([spec])
    rows = 0
    try:
        while (item := gate.next(timeout=20)) is not None:
            rows += item.batch.num_rows
    finally:
        gate.close()
    return rows


def test_partitions_flow_between_members_of_the_cluster(installed: internal.InternalTls) -> None:
    producer, consumer = _env(), _env()
    try:
        part = producer.create_result_partition("p1", 1)
        for i in range(5):
            part.emit(0, make_batch(i * 100))
        part.finish()
        assert _drain(consumer, InputChannelSpec("p1", 0, producer.address)) == 500
    finally:
        producer.close()
        consumer.close()


def test_a_member_of_another_cluster_cannot_fetch_partitions(
    installed: internal.InternalTls, foreign_conf: Configuration
) -> None:
    producer = _env()
    try:
        part = producer.create_result_partition("secret", 1)
        part.emit(0, make_batch(0))
        part.finish()
        foreign = internal.InternalTls.from_config(foreign_conf)
        assert foreign is not None
        host, port = parse_address(producer.address)
        with socket.create_connection((host, port), timeout=10) as raw:
            # the client does not trust the server's CA: refused while connecting
            with pytest.raises(ssl.SSLCertVerificationError):
                foreign.ssl_context(server_side=False).wrap_socket(raw, server_hostname=host)
        # a client that trusts anything but presents the foreign certificate
        lenient = foreign.ssl_context(server_side=False)
        lenient.check_hostname = False
        lenient.verify_mode = ssl.CERT_NONE
        with socket.create_connection((host, port), timeout=10) as raw:
            with pytest.raises((ssl.SSLError, ConnectionError)):
                tls = lenient.wrap_socket(raw, server_hostname=host)
                send_frame(tls, FrameType.REQUEST, [encode_request("secret", 0)])
                assert tls.recv(1) == b""  # TLS 1.3: the server's alert arrives on the first read
                raise ConnectionError("closed without data")
    finally:
        producer.close()


def test_plaintext_peers_get_nothing(installed: internal.InternalTls) -> None:
    producer = _env()
    try:
        part = producer.create_result_partition("secret", 1)
        part.emit(0, make_batch(0))
        part.finish()
        host, port = parse_address(producer.address)
        with socket.create_connection((host, port), timeout=10) as raw:
            send_frame(raw, FrameType.REQUEST, [encode_request("secret", 0)])
            received = b""
            try:
                while chunk := raw.recv(65536):
                    received += chunk
            except ConnectionResetError:
                pass
        assert b"YFN1" not in received and b"secret" not in received
        assert not received.startswith(b"\x02")  # no DATA frame; at most a TLS alert
    finally:
        producer.close()


def test_a_consumer_of_another_cluster_reports_a_clear_failure(
    tmp_path, installed: internal.InternalTls, foreign_conf: Configuration
) -> None:  # type: ignore[no-untyped-def]
    producer = _env()
    address = producer.address
    internal.install(foreign_conf)  # this process now belongs to the other cluster
    consumer = _env()
    try:
        with pytest.raises(PartitionException, match="CERTIFICATE_VERIFY_FAILED|certificate"):
            _drain(consumer, InputChannelSpec("p", 0, address))
    finally:
        consumer.close()
        producer.close()
