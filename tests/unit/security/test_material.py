"""Generating a cluster's material and handing it over as private files."""

from __future__ import annotations

import os
import ssl
import stat
from pathlib import Path

import pytest

from yarnflink.common.config import Configuration
from yarnflink.security import SecurityConfigError, internal
from yarnflink.security.ca import ClusterCA
from yarnflink.security.material import ensure_cluster_security

from .conftest import material


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_material_is_private_even_with_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        conf = material(tmp_path / "security")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "security") == 0o700
    files = sorted((tmp_path / "security").iterdir())
    assert [f.name for f in files] == ["ca.pem", "cluster-key.pem", "cluster.pem", "rest-token"]
    assert all(_mode(f) == 0o600 for f in files)
    for key in (
        "security.ssl.internal.ca",
        "security.ssl.internal.cert",
        "security.ssl.internal.key",
        "security.rest.token-file",
    ):
        assert Path(conf.get(key)).parent == tmp_path / "security"
    token = Path(conf.get("security.rest.token-file")).read_text().strip()
    assert len(token) >= 40  # 256 random bits


def test_each_cluster_gets_its_own_ca_and_token(tmp_path: Path) -> None:
    a, b = material(tmp_path / "a"), material(tmp_path / "b")
    for key in ("security.ssl.internal.ca", "security.rest.token-file"):
        assert Path(a.get(key)).read_bytes() != Path(b.get(key)).read_bytes()


def test_configured_material_is_kept_and_switched_off_parts_are_not_generated(tmp_path: Path) -> None:
    conf = material(tmp_path / "first")
    again = ensure_cluster_security(conf, tmp_path / "second")
    assert again == conf and not (tmp_path / "second").exists()
    off = Configuration({"security.ssl.internal.enabled": "false", "security.rest.authentication": "none"})
    assert ensure_cluster_security(off, tmp_path / "third") == off
    assert not (tmp_path / "third").exists()


def test_https_without_a_given_certificate_gets_one_from_the_cluster_ca(tmp_path: Path) -> None:
    conf = ensure_cluster_security(Configuration({"security.ssl.rest.enabled": "true"}), tmp_path / "s")
    assert conf.get("security.ssl.rest.ca") == conf.get("security.ssl.internal.ca")
    ctx = ssl.create_default_context(cafile=conf.get("security.ssl.rest.ca"))
    ctx.load_cert_chain(conf.get("security.ssl.rest.cert"), conf.get("security.ssl.rest.key"))


def test_a_process_without_the_clusters_certificate_refuses_to_start() -> None:
    with pytest.raises(SecurityConfigError, match="security.ssl.internal.ca, security.ssl.internal.cert"):
        internal.InternalTls.from_config(Configuration())
    assert internal.InternalTls.from_config(Configuration({"security.ssl.internal.enabled": "false"})) is None


def test_unreadable_or_non_pem_material_is_named(tmp_path: Path) -> None:
    conf = material(tmp_path / "s")
    (tmp_path / "junk").write_text("not a certificate")
    conf.set("security.ssl.internal.cert", str(tmp_path / "junk"))
    with pytest.raises(SecurityConfigError, match="security.ssl.internal.cert .* not PEM"):
        internal.InternalTls.from_config(conf)
    conf.set("security.ssl.internal.cert", str(tmp_path / "missing.pem"))
    with pytest.raises(SecurityConfigError, match="cannot read security.ssl.internal.cert"):
        internal.InternalTls.from_config(conf)


def test_member_certificates_name_loopback_and_the_given_hosts() -> None:
    from cryptography import x509

    issued = ClusterCA.generate().issue("m", ["node-7.example.org", "10.1.2.3"])
    san = (
        x509.load_pem_x509_certificate(issued.cert_pem)
        .extensions.get_extension_for_class(x509.SubjectAlternativeName)
        .value
    )
    assert {"localhost", "node-7.example.org"} <= set(san.get_values_for_type(x509.DNSName))
    assert {"127.0.0.1", "::1", "10.1.2.3"} <= {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}


def test_a_key_that_does_not_match_its_certificate_is_named(tmp_path: Path) -> None:
    conf, other = material(tmp_path / "a"), material(tmp_path / "b")
    conf.set("security.ssl.internal.key", other.get("security.ssl.internal.key"))
    with pytest.raises(SecurityConfigError, match="cannot be used together"):
        internal.install(conf)
    assert internal.current() is None
