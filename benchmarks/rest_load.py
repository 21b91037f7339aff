"""The REST endpoint under load (issue 22, point 3): a session cluster (a master and two TaskExecutor
processes) runs a streaming job while C concurrent clients, each on its own HTTP connection, send
``GET /jobs/overview`` in a loop and every tenth client also submits small bounded jobs with
``POST /jobs``. At the end every submitted job must have FINISHED (none lost), the streaming job must
still be RUNNING, and the master's resident set size is sampled before, at the peak and after the
submitted jobs' JobMasters have stopped.

    scripts/bench --suite rest_load [--clients 200] [--requests 25] [--submissions 2] [--abuse] [--json]

Prints latency percentiles per request kind, every non-2xx answer and transport error by kind, and
the master's RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import platform
import socket
import ssl
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psutil

from yarnflink import DiscardingSink, StreamExecutionEnvironment
from yarnflink.client.rest_client import RestClient, find_credentials
from yarnflink.common.config import Configuration
from yarnflink.deployment.local.cluster import start_local_cluster, stop_process

#: An ended job's JobMaster runs on this long before the Dispatcher stops it (a little more than
#: yarnflink.dispatcher.dispatcher.JOB_MASTER_LINGER_S).
SETTLE_S = 4.0
REQUEST_TIMEOUT_S = 60.0


def streaming_job() -> dict[str, Any]:
    """Runs until cancelled: the job the cluster serves while the clients hammer its REST API."""
    env = StreamExecutionEnvironment()
    env.from_sequence(0, 10**15).set_parallelism(1).uid("source").sink_to(DiscardingSink()).set_parallelism(1)
    return env.get_job_graph("long-running streaming job").to_json()


def bounded_job(n: int) -> dict[str, Any]:
    env = StreamExecutionEnvironment()
    env.from_collection(list(range(100))).map(lambda x: x + 1).sink_to(DiscardingSink())
    return env.get_job_graph(f"submitted under load {n}").to_json()


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)

    return {
        "n": len(ordered),
        "p50_ms": at(0.50),
        "p90_ms": at(0.90),
        "p99_ms": at(0.99),
        "max_ms": round(ordered[-1] * 1000, 1),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 1),
    }


class Recorder:
    def __init__(self) -> None:
        self.latencies: dict[str, list[float]] = {"GET /jobs/overview": [], "POST /jobs": []}
        self.errors: Counter[str] = Counter()
        self.job_ids: list[str] = []

    async def timed(self, client: httpx.AsyncClient, kind: str, method: str, path: str, **kw: Any) -> Any:
        started = time.perf_counter()
        try:
            response = await client.request(method, path, **kw)
        except httpx.HTTPError as e:
            self.errors[f"{kind}: {type(e).__name__}"] += 1
            return None
        self.latencies[kind].append(time.perf_counter() - started)
        if response.status_code >= 300:
            self.errors[f"{kind}: HTTP {response.status_code}"] += 1
            return None
        return response.json()


async def one_client(
    n: int, base_url: str, headers: dict[str, str], verify: Any, requests: int, submissions: int, rec: Recorder
) -> None:
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with httpx.AsyncClient(
        base_url=base_url, headers=headers, verify=verify, timeout=REQUEST_TIMEOUT_S, limits=limits, trust_env=False
    ) as client:
        submitting = n % 10 == 0
        for i in range(requests):
            if submitting and i < submissions:
                graph = bounded_job(n * 1000 + i)
                if await rec.timed(client, "POST /jobs", "POST", "/jobs", json=graph) is not None:
                    rec.job_ids.append(str(graph["jobId"]))
            await rec.timed(client, "GET /jobs/overview", "GET", "/jobs/overview")


def load(base_url: str, clients: int, requests: int, submissions: int, master: psutil.Process) -> dict[str, Any]:
    creds = find_credentials(base_url)
    headers = {"authorization": f"Bearer {creds.token}"} if creds.token else {}
    verify: Any = ssl.create_default_context(cafile=creds.ca_file) if creds.ca_file else True
    rec = Recorder()
    peak = [master.memory_info().rss]
    done = threading.Event()

    def sample_peak() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], master.memory_info().rss)

    sampler = threading.Thread(target=sample_peak, daemon=True)
    sampler.start()

    async def all_clients() -> None:
        await asyncio.gather(
            *(one_client(n, base_url, headers, verify, requests, submissions, rec) for n in range(clients))
        )

    started = time.monotonic()
    asyncio.run(all_clients())
    elapsed = time.monotonic() - started
    done.set()
    sampler.join()
    total = sum(len(v) for v in rec.latencies.values())
    return {
        "seconds": round(elapsed, 1),
        "requests_per_s": round(total / elapsed, 1),
        "latency": {kind: percentiles(v) for kind, v in rec.latencies.items()},
        "errors": dict(rec.errors),
        "job_ids": rec.job_ids,
        "peak_rss_mb": round(peak[0] / 2**20, 1),
    }


def abuse(base_url: str, master: psutil.Process, max_body: int) -> dict[str, Any]:
    """Hostile requests, each answered with a clear 4xx and the master still serving: bodies over
    ``rest.server.max-content-length`` declared and chunked, a body the client never finishes, an
    unauthenticated large body, encodings the endpoint does not take, nesting too deep, and 300
    connections held open with half-sent headers while a normal client polls."""
    creds = find_credentials(base_url)
    auth = {"authorization": f"Bearer {creds.token}"} if creds.token else {}
    verify: Any = ssl.create_default_context(cafile=creds.ca_file) if creds.ca_file else ssl.create_default_context()
    graph = json.dumps(bounded_job(-2)).encode()
    mb = 2**20

    def chunks(total: int, size: int = mb) -> Any:
        sent = 0
        while sent < total:
            yield b" " * min(size, total - sent)
            sent += size

    cases: list[tuple[str, dict[str, Any]]] = [
        ("chunked body over the limit", {"content": chunks(max_body + 20 * mb)}),
        ("unauthenticated 50 MB body", {"content": b" " * (50 * mb), "no_auth": True}),
        ("gzip-encoded JobGraph", {"headers": {"content-encoding": "gzip"}, "content": gzip.compress(graph)}),
        ("invalid UTF-8", {"content": b'{"jobId": "\xff\xfe"}'}),
        ("nesting 200,000 deep", {"content": b"[" * 200_000 + b"]" * 200_000}),
        ("a million keys", {"content": json.dumps({f"k{i}": i for i in range(1_000_000)}).encode()}),
        ("JSON that is no JobGraph", {"content": b'{"jobId": 1, "vertices": "x"}'}),
    ]
    url = httpx.URL(base_url)
    started = time.perf_counter()
    with socket.create_connection((url.host, url.port or 80), timeout=REQUEST_TIMEOUT_S) as raw:
        conn = verify.wrap_socket(raw, server_hostname=url.host) if url.scheme == "https" else raw
        token = auth.get("authorization", "")
        conn.sendall(
            f"POST /jobs HTTP/1.1\r\nHost: {url.host}\r\nAuthorization: {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {max_body + 1}\r\n\r\n{{}}".encode()
        )  # the client claims a body over the limit and never sends it
        status_line = conn.recv(4096).split(b"\r\n", 1)[0].decode()
    results: dict[str, Any] = {
        "declared body over the limit, never sent": {
            "status": int(status_line.split()[1]) if status_line else "no answer",
            "ms": round((time.perf_counter() - started) * 1000, 1),
        }
    }
    with httpx.Client(base_url=base_url, verify=verify, timeout=REQUEST_TIMEOUT_S, trust_env=False) as client:
        for name, case in cases:
            headers = {"content-type": "application/json", **case.get("headers", {})}
            if not case.get("no_auth"):
                headers.update(auth)
            started = time.perf_counter()
            try:
                r = client.post("/jobs", content=case["content"], headers=headers)
                outcome: Any = r.status_code
            except httpx.HTTPError as e:
                outcome = type(e).__name__
            results[name] = {"status": outcome, "ms": round((time.perf_counter() - started) * 1000, 1)}
        results["rss_after_bodies_mb"] = round(master.memory_info().rss / 2**20, 1)

    async def held_connections() -> dict[str, Any]:
        url = httpx.URL(base_url)
        ctx = ssl.create_default_context(cafile=creds.ca_file) if url.scheme == "https" else None
        writers = []
        for _ in range(300):
            try:
                _, w = await asyncio.open_connection(url.host, url.port, ssl=ctx)
            except OSError:
                break
            w.write(b"GET /jobs/overview HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # never finished
            writers.append(w)
        latencies = []
        async with httpx.AsyncClient(base_url=base_url, headers=auth, verify=verify, trust_env=False) as c:
            for _ in range(20):
                t = time.perf_counter()
                r = await c.get("/jobs/overview")
                r.raise_for_status()
                latencies.append(time.perf_counter() - t)
        for w in writers:
            w.close()
        return {"held": len(writers), "polling_while_held": percentiles(latencies)}

    results["300 connections with half-sent headers"] = asyncio.run(held_connections())
    return results


def until(cond: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def run(clients: int, requests: int, submissions: int, workdir: Path, hostile: bool) -> dict[str, Any]:
    config = Configuration()
    config.set("taskmanager.numberOfTaskSlots", "2")
    proc, info = start_local_cluster(config, taskexecutors=2, workdir=workdir / "cluster", detached=False)
    try:
        master = psutil.Process(int(info["pid"]))
        base_url = str(info["rest_url"])
        with RestClient(base_url) as rest:
            streaming = rest.submit_job(streaming_job())
            until(lambda: rest.job(streaming)["state"] == "RUNNING", 60, "the streaming job running")
            warm = rest.submit_job(bounded_job(-1))  # the first job's imports, executors and connections
            until(lambda: rest.job(warm)["state"] == "FINISHED", 60, "the warm-up job")
            time.sleep(SETTLE_S)
            before = round(master.memory_info().rss / 2**20, 1)
            result = load(base_url, clients, requests, submissions, master)
            states = {}
            for job_id in result["job_ids"]:
                states[job_id] = until(
                    lambda j=job_id: (s := rest.job(j)["state"]) in ("FINISHED", "FAILED", "CANCELED") and s,
                    300,
                    f"submitted job {job_id} ended",
                )
            time.sleep(SETTLE_S)  # their JobMasters stopped
            after = round(master.memory_info().rss / 2**20, 1)
            if hostile:
                result["abuse"] = abuse(base_url, master, 100 * 2**20)
                result["abuse"]["rss_after_mb"] = round(master.memory_info().rss / 2**20, 1)
            streaming_state = rest.job(streaming)["state"]
            rest.cancel(streaming)
        result["submitted_jobs"] = len(result.pop("job_ids"))
        result["submitted_job_states"] = dict(Counter(states.values()))
        result["streaming_job_state_after"] = streaming_state
        result["rss_mb"] = {"before": before, "peak": result.pop("peak_rss_mb"), "after": after}
        return result
    finally:
        stop_process(proc.pid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--requests", type=int, default=25, help="GET /jobs/overview per client")
    parser.add_argument("--submissions", type=int, default=2, help="POST /jobs per submitting client")
    parser.add_argument("--abuse", action="store_true", help="then send hostile requests (sizes, encodings)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    print(f"# {platform.node()}: {os.cpu_count()} cores, python {platform.python_version()}, load {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="yarnflink-bench-") as tmp:
        result = run(args.clients, args.requests, args.submissions, Path(tmp), args.abuse)
    if args.json:
        print(json.dumps(result))
        return
    print(f"{args.clients} clients, {result['seconds']} s, {result['requests_per_s']} requests/s")
    for kind, p in result["latency"].items():
        print(f"  {kind:<20} " + " ".join(f"{k}={v}" for k, v in p.items()))
    print(f"  errors: {result['errors'] or 'none'}")
    print(f"  submitted jobs: {result['submitted_jobs']} -> {result['submitted_job_states']}")
    print(f"  streaming job after the load: {result['streaming_job_state_after']}")
    rss = result["rss_mb"]
    print(f"  master RSS MB: before {rss['before']}, peak {rss['peak']}, after {rss['after']}")
    for name, outcome in result.get("abuse", {}).items():
        print(f"  abuse: {name}: {outcome}")


if __name__ == "__main__":
    main()
