"""The client side of YARN deployment: submitting session, per-job and application clusters,
finding a session's REST address by application id (or the last one started), listing and
stopping them. skein is reached through ``client_factory`` (tests pass a fake client)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from yarnflink.client.leader import register_resolver
from yarnflink.client.sessions import sessions_dir
from yarnflink.common.config import Configuration
from yarnflink.deployment.local.ha_session import client_ha_config
from yarnflink.deployment.yarn import YarnDeploymentError, import_skein
from yarnflink.deployment.yarn.environment import Packer, pack_environment, ship_client_environment
from yarnflink.deployment.yarn.options import YarnConfigOptions
from yarnflink.deployment.yarn.spec import (
    CLIENT_DONE_KEY,
    REST_URL_KEY,
    START_ERROR_KEY,
    ClusterRequest,
    attempts_warning,
    build_application_spec,
    check_staging_filesystem,
    default_filesystem,
    job_files,
    ship_configuration,
)
from yarnflink.dispatcher.options import RestOptions
from yarnflink.highavailability import create_ha_services, ha_enabled
from yarnflink.highavailability.options import HighAvailabilityOptions
from yarnflink.security.client import RestCredentials, register, url_key
from yarnflink.security.material import ensure_cluster_security, private_directory
from yarnflink.security.options import SecurityOptions

log = logging.getLogger(__name__)

ClientFactory = Callable[[Configuration], Any]
LIVE_STATES = ("SUBMITTED", "ACCEPTED", "RUNNING")


def skein_client(config: Configuration) -> Any:
    """A ``skein.Client`` (its own driver, TLS to the ApplicationMaster by skein's default
    Security), logged in with the Kerberos principal and keytab when configured."""
    skein = import_skein()
    principal = config.get(SecurityOptions.KERBEROS_LOGIN_PRINCIPAL)
    keytab = config.get(SecurityOptions.KERBEROS_LOGIN_KEYTAB)
    if bool(principal) != bool(keytab):
        raise YarnDeploymentError("Kerberos needs both security.kerberos.login.principal and .keytab")
    if keytab and not Path(keytab).is_file():
        raise YarnDeploymentError(f"keytab {keytab} does not exist")
    return skein.Client(principal=principal, keytab=keytab) if principal else skein.Client()


def _factory(client_factory: ClientFactory | None) -> ClientFactory:
    return client_factory or skein_client  # looked up per call: tests replace the module's skein_client


@dataclass
class YarnCluster:
    app_id: str
    rest_url: str
    mode: str
    created: float
    token_file: str = ""  # the REST token (0600, in the staging directory) and REST CA, "" if off
    rest_ca: str = ""
    staging: str = ""  # the client's staging directory (configuration, TLS keys, REST token): removed at stop
    #: ZooKeeper HA: the keys that find the cluster's ZooKeeper nodes and HA storage (removed at stop)
    ha_config: dict[str, str] = field(default_factory=dict)


def _record_file(app_id: str) -> Path:
    return sessions_dir() / f"yarn-{app_id}.json"


def record_session(cluster: YarnCluster) -> None:
    path = _record_file(cluster.app_id)
    path.write_text(json.dumps(asdict(cluster)))
    os.chmod(path, 0o600)


def last_session() -> YarnCluster | None:
    records = []
    for p in sessions_dir().glob("yarn-*.json"):
        try:
            records.append(YarnCluster(**json.loads(p.read_text())))
        except (OSError, ValueError, TypeError):
            continue
    return max(records, key=lambda r: r.created) if records else None


def submit_cluster(
    config: Configuration,
    request: ClusterRequest,
    *,
    client_factory: ClientFactory | None = None,
    timeout: float = 300.0,
    staging: Path | None = None,
    wait_rest: bool = True,
    environment_packer: Packer = pack_environment,
) -> YarnCluster:
    """Submits the application and (``wait_rest``) waits until its master published the REST
    address. Without ``yarn.ship-archives`` / ``yarn.python.executable`` the client's environment
    is shipped (``environment``), when there is a cluster filesystem to upload it to."""
    check_staging_filesystem(os.environ.get("HADOOP_CONF_DIR"))
    warning = attempts_warning(config, os.environ.get("HADOOP_CONF_DIR"))
    if warning:
        print(f"yarnflink: warning: {warning}", file=sys.stderr)
    config = _with_client_environment(config, environment_packer)
    own_staging = staging is None
    staging = staging or Path(tempfile.mkdtemp(prefix="yarnflink-yarn-"))
    try:
        cluster = _submit(config, request, client_factory, timeout, staging, wait_rest)
    except BaseException:
        if own_staging:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    # skein uploaded the files at submission; the token and CA stay while a client may use them
    if request.mode == "session" or (request.mode == "per-job" and request.attached):
        _STAGING[cluster.app_id] = str(staging)
    elif own_staging:
        shutil.rmtree(staging, ignore_errors=True)
    return cluster


def _with_client_environment(config: Configuration, packer: Packer) -> Configuration:
    if not config.get(YarnConfigOptions.SHIP_ENVIRONMENT):
        return config
    default_fs = default_filesystem(os.environ.get("HADOOP_CONF_DIR"))
    if not config.get(YarnConfigOptions.ENVIRONMENT_DIR) and (not default_fs or default_fs.startswith("file:")):
        return config  # nowhere to upload it: the nodes' python3, as configured
    return ship_client_environment(config, default_fs, packer=packer)


#: app id -> staging directory of the clusters this process submitted (removed when done with)
_STAGING: dict[str, str] = {}


def _submit(
    config: Configuration,
    request: ClusterRequest,
    client_factory: ClientFactory | None,
    timeout: float,
    staging: Path,
    wait_rest: bool,
) -> YarnCluster:
    private_directory(staging)
    client = _factory(client_factory)(config)
    # the internal TLS certificate must name every node a master or TaskExecutor may run on
    config = ensure_cluster_security(config, staging / "security", extra_hosts=node_hosts(client))
    _, files = ship_configuration(config, staging)
    if request.job_file:
        files.update(job_files(request.job_file))
    spec = build_application_spec(config, request, files)
    try:
        app_id = client.submit(spec)
    except YarnDeploymentError:
        raise
    except Exception as e:  # skein's errors (YARN unreachable, queue refused, ...): the user's to fix
        raise YarnDeploymentError(f"YARN did not accept the application: {type(e).__name__}: {e}") from None
    creds = RestCredentials.from_config(config)
    cluster = YarnCluster(
        app_id,
        "",
        request.mode,
        time.time(),
        creds.token_file or "",
        creds.ca_file or "",
        staging=str(staging),
        ha_config=cluster_ha_config(config, app_id),
    )
    if wait_rest:
        cluster.rest_url = wait_for_rest_url(client, app_id, timeout)
        register(cluster.rest_url, creds)
        follow_application(config, app_id, cluster.rest_url, client_factory=client_factory)
    if request.mode == "session":
        record_session(cluster)
    return cluster


def cluster_ha_config(config: Configuration, app_id: str) -> dict[str, str]:
    """The HA keys of application ``app_id``'s cluster ({} without HA): its cluster id is the
    application id unless configured (as its processes make it)."""
    if not ha_enabled(config):
        return {}
    keys = client_ha_config(config)
    keys.setdefault(HighAvailabilityOptions.HA_CLUSTER_ID.key, app_id)
    return keys


def node_hosts(client: Any) -> list[str]:
    """Host names of the cluster's RUNNING NodeManagers (skein node ids are ``host:port``)."""
    try:
        nodes = client.get_nodes(states=["RUNNING"])
    except Exception:
        return []
    return sorted({str(n.id).rsplit(":", 1)[0] for n in nodes})


def wait_for_rest_url(client: Any, app_id: str, timeout: float, poll: float = 0.5) -> str:
    """The REST address the application's master published; a YarnDeploymentError with the
    master's own words when it did not start (its start error, or the application's diagnostics)."""
    deadline = time.monotonic() + timeout
    start_error = ""
    while True:
        report = client.application_report(app_id)
        state = str(report.state)
        if state in ("FINISHED", "FAILED", "KILLED"):
            raise YarnDeploymentError(
                f"YARN application {app_id} ended ({state}) before its master started: "
                f"{start_error or report.diagnostics or 'see yarn logs -applicationId ' + app_id}"
            )
        if state == "RUNNING":
            try:
                kv = client.connect(app_id, wait=False).kv
                value = kv.get(REST_URL_KEY)
                start_error = _text(kv.get(START_ERROR_KEY)) or start_error
            except (ConnectionError, OSError) as e:  # the ApplicationMaster is gone or not serving yet
                value = None
                log.info("YARN application %s: its ApplicationMaster does not answer (%s)", app_id, e)
            if value:
                return _text(value)
        if time.monotonic() > deadline:
            raise YarnDeploymentError(
                f"YARN application {app_id} published no REST address within {timeout:.0f}s (state {state})"
                + (f": {start_error}" if start_error else "")
            )
        time.sleep(poll)


def _text(value: Any) -> str:
    if not value:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def release_job_cluster(
    config: Configuration, app_id: str, *, attached: bool = True, client_factory: ClientFactory | None = None
) -> None:
    """Per-job: this client is done with the application. Attached: it has its results, the
    application's master may end now. Its staging directory goes either way."""
    if attached:
        try:
            _factory(client_factory)(config).connect(app_id, wait=False).kv[CLIENT_DONE_KEY] = b"1"
        except Exception as e:  # noqa: BLE001 - the master ends after yarn.per-job.result-timeout anyway
            log.info("cannot tell YARN application %s that its client is done: %s", app_id, e)
    _remove_staging(app_id, None)


def rest_url_of(config: Configuration, app_id: str | None, *, client_factory: ClientFactory | None = None) -> str:
    """The REST address of application ``app_id``, or of the last YARN session started. Clients of
    this process follow the application's master from then on (``YarnRestLeaderResolver``)."""
    if app_id is None:
        last = last_session()
        if last is None:
            raise YarnDeploymentError(
                "no YARN session: start one with 'yarnflink session start --target yarn' or pass -yid APPLICATION_ID"
            )
        app_id = last.app_id
    client = _factory(client_factory)(config)
    try:
        report = client.application_report(app_id)
    except Exception as e:
        raise YarnDeploymentError(f"no YARN application {app_id}: {e}") from None
    if str(report.state) != "RUNNING":
        raise YarnDeploymentError(f"YARN application {app_id} is {report.state}")
    try:
        value = client.connect(app_id, wait=False).kv.get(REST_URL_KEY)
    except (ConnectionError, OSError) as e:
        raise YarnDeploymentError(f"YARN application {app_id}: its ApplicationMaster does not answer ({e})") from None
    if not value:
        raise YarnDeploymentError(f"YARN application {app_id} is not a yarnflink cluster (no REST address)")
    url = _text(value)
    _register_session_credentials(app_id, url)
    follow_application(config, app_id, url, client_factory=client_factory)
    return url


class YarnRestLeaderResolver:
    """Where application ``app_id``'s master serves REST now (``RestClient``'s leader resolver):
    after an ApplicationMaster failover YARN's next attempt publishes its new address in the new
    ApplicationMaster's key-value store, which this reads again (with or without ZooKeeper HA)."""

    def __init__(self, config: Configuration, app_id: str, client_factory: ClientFactory | None = None) -> None:
        self.config = config
        self.app_id = app_id
        self.client_factory = client_factory
        # a new attempt takes a container, a Python start and a job recovery: more than a standby's takeover
        self.await_leader_timeout_s = (
            config.get_seconds(RestOptions.AWAIT_LEADER_TIMEOUT) or 30.0
            if config.contains(RestOptions.AWAIT_LEADER_TIMEOUT)
            else YARN_AWAIT_LEADER_TIMEOUT_S
        )

    #: why no master will come (the application ended), "" while one may
    ended = ""

    def current(self) -> str | None:
        client = _factory(self.client_factory)(self.config)
        report = client.application_report(self.app_id)
        state = str(report.state)
        if state in ("FINISHED", "FAILED", "KILLED"):
            self.ended = f"YARN application {self.app_id} has ended ({state}, {report.final_status})"
            return None
        if state != "RUNNING":
            return None
        try:
            return _text(client.connect(self.app_id, wait=False).kv.get(REST_URL_KEY)) or None
        except (ConnectionError, OSError):  # between attempts
            return None

    def remember(self, url: str) -> None:
        follow_application(self.config, self.app_id, url, client_factory=self.client_factory)

    def close(self) -> None:
        pass


#: How long a client of a YARN application waits for its next attempt's master by default.
YARN_AWAIT_LEADER_TIMEOUT_S = 300.0


def follow_application(
    config: Configuration, app_id: str, url: str, *, client_factory: ClientFactory | None = None
) -> None:
    """Clients of this process reaching ``url`` follow application ``app_id``'s master."""
    register_resolver([url], lambda: YarnRestLeaderResolver(config, app_id, client_factory))


def _register_session_credentials(app_id: str, url: str) -> None:
    """A session this machine started: its REST token and CA are in the staging directory."""
    path = _record_file(app_id)
    if path.is_file():
        rec = YarnCluster(**json.loads(path.read_text()))
        register(url, RestCredentials(rec.token_file or None, rec.rest_ca or None))


def register_credentials_by_url(url: str) -> None:
    """``-m URL`` of a YARN session this machine started: its REST token and CA, without
    YARNFLINK_REST_TOKEN_FILE (the session's record names them)."""
    key = url_key(url)
    for p in sessions_dir().glob("yarn-*.json"):
        try:
            rec = YarnCluster(**json.loads(p.read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if rec.rest_url and url_key(rec.rest_url) == key:
            register(url, RestCredentials(rec.token_file or None, rec.rest_ca or None))
            return


def list_clusters(config: Configuration, *, client_factory: ClientFactory | None = None) -> list[Any]:
    """Live YARN applications started by yarnflink (tagged ``yarnflink``)."""
    client = _factory(client_factory)(config)
    apps = client.get_applications(states=list(LIVE_STATES))
    return [a for a in apps if "yarnflink" in set(a.tags or ())]


def stop_cluster(
    config: Configuration,
    app_id: str,
    *,
    client_factory: ClientFactory | None = None,
    cleanup_timeout: float = 120.0,
    poll: float = 0.5,
) -> None:
    """Shuts the application down through its ApplicationMaster, else kills it through YARN; then
    removes what it leaves: with ZooKeeper HA its ZooKeeper nodes and HA storage (once YARN says
    it ended, so no master writes them again), and this machine's staging directory."""
    record = _read_record(app_id)
    client = _factory(client_factory)(config)
    try:
        client.connect(app_id, wait=False).shutdown("SUCCEEDED", diagnostics="stopped by yarnflink session stop")
    except Exception:
        try:
            client.kill_application(app_id)
        except Exception as e:
            raise YarnDeploymentError(f"cannot stop YARN application {app_id}: {e}") from None
    _record_file(app_id).unlink(missing_ok=True)
    ha_keys = record.ha_config if record is not None and record.ha_config else cluster_ha_config(config, app_id)
    if ha_keys:
        _cleanup_ha_data(client, app_id, ha_keys, cleanup_timeout, poll)
    _remove_staging(app_id, record)


def _read_record(app_id: str) -> YarnCluster | None:
    try:
        return YarnCluster(**json.loads(_record_file(app_id).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _remove_staging(app_id: str, record: YarnCluster | None) -> None:
    staging = _STAGING.pop(app_id, None) or (record.staging if record is not None else "")
    if staging and Path(staging).name.startswith("yarnflink-yarn-"):
        shutil.rmtree(staging, ignore_errors=True)


def _cleanup_ha_data(client: Any, app_id: str, ha_keys: dict[str, str], timeout: float, poll: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            ended = str(client.application_report(app_id).state) in ("FINISHED", "FAILED", "KILLED")
        except Exception:  # noqa: BLE001 - unknown to YARN: nothing runs
            ended = True
        if ended:
            break
        if time.monotonic() > deadline:
            print(
                f"yarnflink: warning: YARN application {app_id} did not end within {timeout:.0f}s: "
                f"its HA data (ZooKeeper, {ha_keys.get(HighAvailabilityOptions.HA_STORAGE_PATH.key)}) stays",
                file=sys.stderr,
            )
            return
        time.sleep(poll)
    try:
        create_ha_services(Configuration(ha_keys)).close_and_cleanup_all_data()
    except Exception as e:  # noqa: BLE001 - the application is gone; say what stays
        print(f"yarnflink: warning: the HA data of {app_id} could not be removed: {e}", file=sys.stderr)
