"""Clickstream sessions: the main example (README quick start).

Generated click events of a web shop -> a Spark SQL step that cleans them (drops bots and
malformed rows, normalises urls) and enriches them (page category through a broadcast join with a
small inline table, device from the user agent, traffic source from the referrer) -> event
timestamps with bounded out-of-orderness -> ``key_by`` user -> event-time session windows -> one
record per session (clicks, distinct pages, duration, landing page, converted) -> an exactly-once
``FileSink`` writing Parquet, committed on checkpoint completion. STREAMING mode, a checkpoint
every second.

    yarnflink run examples/clickstream.py [--events N] [--seed S] [--output DIR] [--gap SECONDS]

The job prints nothing; when it is done the script reads the committed Parquet files back with
pyarrow and prints a short summary. The events are generated from their index and the seed alone
(``generate``), so a run is reproducible and a test can compute the same sessions without yarnflink.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
from typing import Any

import numpy as np
import pyarrow as pa

from yarnflink import (
    AggregateFunction,
    Duration,
    EventTimeSessionWindows,
    FileSink,
    ProcessWindowFunction,
    RuntimeExecutionMode,
    StreamExecutionEnvironment,
    Time,
    WatermarkStrategy,
)

# ----------------------------------------------------------------------------- the events
#: 2026-11-22T08:00:00Z in epoch milliseconds: the first event's time.
T0_MS = 1_795_334_400_000
#: One click on the site every STEP_MS (before jitter); clicks arrive up to MAX_DELAY_MS late.
STEP_MS = 100
MAX_DELAY_MS = 5_000
#: Users come and go in phases of PHASE_EVENTS clicks; ACTIVE users are on the site at a time,
#: half of them stay into the next phase.
USERS, ACTIVE, PHASE_EVENTS = 1_000, 100, 3_000
HOST = "https://shop.example.com"
PAGES = (
    ["/", "/products", "/search", "/cart", "/checkout", "/help", "/about"]
    + [f"/products/{n}" for n in range(1, 31)]
    + [f"/blog/{n}" for n in range(1, 6)]
)
# a url as it reaches the server: as is, with a trailing slash, in capitals, with a tracking query
URLS = [
    u
    for p in PAGES
    for u in (
        HOST + p,
        HOST + p.rstrip("/") + "/",
        HOST + p.upper(),
        f"{HOST}{p}?utm_source=newsletter&utm_medium=email",
    )
]
REFERRERS = [
    None,
    "",
    "https://www.google.com/search?q=shoes",
    "https://www.bing.com/search?q=shop",
    "https://news.example.org/deals",
    "https://social.example.net/post/42",
    HOST + "/",
]
USER_AGENTS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 15; Pixel 9) AppleWebKit/537.36 Chrome/131.0 Mobile Safari/537.36",
    "Mozilla/5.0 (iPad; CPU OS 18_1 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
]
BOT_AGENTS = [
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
    "python-requests/2.32.3",
]
SCHEMA = "user_id STRING, url STRING, referrer STRING, ts BIGINT, user_agent STRING"


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: well-spread uint64 bits from a counter (vectorised)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def generate(index: np.ndarray, seed: int) -> pa.RecordBatch:
    """The click events number ``index`` (int64 array) of the run with ``seed``: columns
    user_id, url, referrer, ts (epoch ms), user_agent. About 1% are malformed (no user, a broken
    url, a zero time) and 3% come from bots."""
    i = index.astype(np.uint64)
    h1 = _mix(i ^ (np.uint64(seed & 0xFFFFFFFF) << np.uint64(32)))
    h2, h3, h4 = _mix(h1), _mix(h1 + np.uint64(1)), _mix(h1 + np.uint64(2))
    phase = index // PHASE_EVENTS
    user = (phase * (ACTIVE // 2) + (h1 % np.uint64(ACTIVE)).astype(np.int64)) % USERS
    ts = T0_MS + index * STEP_MS + (h2 % np.uint64(MAX_DELAY_MS)).astype(np.int64)
    # product pages are most visited: a page is drawn from PAGES, then maybe moved to a product
    page = (h3 % np.uint64(len(PAGES))).astype(np.int64)
    product = 7 + ((h3 >> np.uint64(24)) % np.uint64(30)).astype(np.int64)
    page = np.where((h3 >> np.uint64(20)) % np.uint64(3) == 0, product, page)
    url = page * 4 + ((h3 >> np.uint64(40)) % np.uint64(4)).astype(np.int64)
    referrer = ((h4 % np.uint64(len(REFERRERS) * 3)) // np.uint64(3)).astype(np.int64)
    agent = ((h4 >> np.uint64(8)) % np.uint64(len(USER_AGENTS))).astype(np.int64)
    defect = ((h4 >> np.uint64(16)) % np.uint64(1000)).astype(np.int64)  # < 30: a bot, 30..39: malformed

    user_ids = np.array([f"u{u:04d}" for u in range(USERS)], dtype=object)[user]
    urls = np.array(URLS, dtype=object)[url]
    agents = np.array(USER_AGENTS, dtype=object)[agent]
    bots = defect < 30
    agents[bots] = np.array(BOT_AGENTS, dtype=object)[defect[bots] % len(BOT_AGENTS)]
    user_ids[defect == 30] = None
    user_ids[defect == 31] = "  "
    urls[defect == 32] = "shop.example.com/products"  # no scheme
    urls[defect == 33] = None
    ts = np.where(defect == 34, 0, ts)
    return pa.record_batch(
        [
            pa.array(user_ids, pa.string()),
            pa.array(urls, pa.string()),
            pa.array(np.array(REFERRERS, dtype=object)[referrer], pa.string()),
            pa.array(ts, pa.int64()),
            pa.array(agents, pa.string()),
        ],
        names=["user_id", "url", "referrer", "ts", "user_agent"],
    )


# ----------------------------------------------------------------------------- cleaning in Spark
#: Runs per micro-batch (STREAMING) in the TaskExecutor's SparkSession; row by row, so the
#: result does not depend on how the input is cut into micro-batches.
CLEAN_SQL = r"""
WITH clicks AS (
  SELECT trim(user_id) AS user_id,
         ts,
         -- the path, lower case, without query, fragment or trailing slash
         regexp_replace(lower(regexp_extract(url, '^https?://[^/?#]+([^?#]*)', 1)), '/+$', '') AS path,
         regexp_extract(referrer, '^https?://([^/?#]+)', 1) AS referrer_host,
         CASE WHEN user_agent RLIKE '(?i)ipad|tablet' THEN 'tablet'
              WHEN user_agent RLIKE '(?i)mobile|iphone|android' THEN 'mobile'
              ELSE 'desktop' END AS device
  FROM input
  WHERE user_id IS NOT NULL AND trim(user_id) <> ''
    AND ts > 0
    AND url RLIKE '^https?://'
    AND NOT coalesce(user_agent RLIKE '(?i)bot|crawler|spider|python-requests|curl/', false)
),
categories(section, category) AS (
  VALUES ('', 'home'), ('products', 'catalog'), ('search', 'search'), ('cart', 'checkout'),
         ('checkout', 'checkout'), ('blog', 'content'), ('help', 'support'), ('about', 'content')
)
SELECT /*+ BROADCAST(categories) */
       c.user_id,
       c.ts,
       CASE WHEN c.path = '' THEN '/' ELSE c.path END AS page,
       coalesce(categories.category, 'other') AS category,
       c.device,
       CASE WHEN c.referrer_host IS NULL OR c.referrer_host = '' THEN 'direct'
            WHEN c.referrer_host = 'shop.example.com' THEN 'internal'
            WHEN c.referrer_host RLIKE '(^|\\.)(google|bing)\\.' THEN 'search'
            ELSE 'referral' END AS source
FROM clicks c
LEFT JOIN categories ON regexp_extract(c.path, '^/([^/]*)', 1) = categories.section
"""


# ----------------------------------------------------------------------------- sessions
class SessionStats(AggregateFunction):
    """Accumulator: (clicks, pages, (first ts, landing page, device, source), last ts, converted);
    the earliest click (ties: the smallest page) is the landing page. Immutable values: the state
    backend snapshots accumulators while the job goes on."""

    def create_accumulator(self) -> Any:
        return (0, frozenset(), None, None, False)

    def add(self, click: dict, acc: Any) -> Any:
        n, pages, first, last, converted = acc
        page, ts = click["page"], click["ts"]
        entry = (ts, page, click["device"], click["source"])
        return (
            n + 1,
            pages | {page},
            entry if first is None or entry < first else first,
            ts if last is None or ts > last else last,
            converted or page == "/checkout",
        )

    def get_result(self, acc: Any) -> Any:
        return acc

    def merge(self, a: Any, b: Any) -> Any:
        if not a[0]:
            return b
        if not b[0]:
            return a
        return (a[0] + b[0], a[1] | b[1], min(a[2], b[2]), max(a[3], b[3]), a[4] or b[4])


class SessionRecord(ProcessWindowFunction):
    def process(self, key: str, context: Any, elements: Any) -> Any:
        for n, pages, (first_ts, landing, device, source), last_ts, converted in elements:
            yield session_record(key, n, pages, first_ts, last_ts, landing, device, source, converted)


def session_record(
    user: str,
    clicks: int,
    pages: Any,
    first_ts: int,
    last_ts: int,
    landing: str,
    device: str,
    source: str,
    converted: bool,
) -> dict:
    """One output row (the Parquet columns, in order); the device and traffic source are the
    landing click's."""
    return {
        "user_id": user,
        "session_start_ms": first_ts,
        "session_end_ms": last_ts,
        "duration_s": (last_ts - first_ts) / 1000.0,
        "clicks": clicks,
        "distinct_pages": len(pages),
        "landing_page": landing,
        "device": device,
        "source": source,
        "converted": converted,
    }


def build(
    env: StreamExecutionEnvironment, *, events: int, seed: int, output: str, gap_s: float, clean: Any = None
) -> None:
    """The pipeline. ``clean(stream) -> stream`` replaces the Spark SQL step (tests inject faults)."""
    clicks = (
        env.from_sequence(0, events - 1)
        .name("Event ids")
        .map_batches(lambda rb: generate(rb.column(0).to_numpy(), seed))
        .name("Click events")
    )
    cleaned = (
        clean(clicks) if clean is not None else clicks.spark_sql(CLEAN_SQL, schema=SCHEMA).name("Clean and enrich")
    )
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(MAX_DELAY_MS)).with_timestamp_assigner(
        lambda click, _ts: click["ts"]
    )
    (
        cleaned.assign_timestamps_and_watermarks(strategy)
        .name("Event time")
        .key_by(lambda click: click["user_id"])
        .window(EventTimeSessionWindows.with_gap(Time.milliseconds(int(gap_s * 1000))))
        .aggregate(SessionStats(), window_function=SessionRecord())
        .name("Sessions")
        .sink_to(FileSink(output, format="parquet"))
        .name("Parquet sink")
    )


def configure(env: StreamExecutionEnvironment, parallelism: int = 2) -> None:
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.set_parallelism(parallelism)
    config = env.get_config()
    config.set("execution.checkpointing.interval", "1 s")  # the sink commits on checkpoint completion
    config.set("spark.micro-batch.max-rows", "20000")
    config.set("spark.micro-batch.max-delay", "500 ms")
    if config.get("restart-strategy.type") is None:
        config.set("restart-strategy.type", "fixed-delay")
        config.set("restart-strategy.fixed-delay.attempts", "3")
        config.set("restart-strategy.fixed-delay.delay", "1 s")


# ----------------------------------------------------------------------------- the summary
def read_sessions(output: str) -> pa.Table:
    """The committed sessions (in-progress files are hidden: ``.part-*``)."""
    import pyarrow.parquet as pq

    files = sorted(glob.glob(os.path.join(output, "part-*.parquet")))
    if not files:
        return pa.table({})
    return pa.concat_tables([pq.read_table(f) for f in files])


def summary(sessions: pa.Table, events: int, runtime_ms: int) -> str:
    import pyarrow.compute as pc

    if sessions.num_rows == 0:
        return f"Clickstream: no sessions from {events:,} events"
    clicks = pc.sum(sessions["clicks"]).as_py()
    lines = [
        f"Clickstream finished in {runtime_ms / 1000:.1f} s: {events:,} events -> {clicks:,} clean clicks -> "
        f"{sessions.num_rows:,} sessions of {len(pc.unique(sessions['user_id'])):,} users",
        f"  clicks per session {clicks / sessions.num_rows:.1f}, median duration "
        f"{pc.approximate_median(sessions['duration_s']).as_py() / 60:.1f} min, "
        f"converted {pc.mean(sessions['converted'].cast(pa.float64())).as_py():.1%}",
        "  top landing pages:",
    ]
    top = sessions.group_by("landing_page").aggregate([("clicks", "count")]).sort_by([("clicks_count", "descending")])
    for page, n in list(zip(top["landing_page"].to_pylist(), top["clicks_count"].to_pylist()))[:5]:
        lines.append(f"    {page:<16} {n:>6,} sessions")
    devices = sessions.group_by("device").aggregate([("clicks", "count")]).sort_by("device")
    lines.append(
        "  sessions by device: "
        + ", ".join(f"{d} {n:,}" for d, n in zip(devices["device"].to_pylist(), devices["clicks_count"].to_pylist()))
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="Clickstream sessions (see the module docstring).")
    parser.add_argument("--events", type=int, default=100_000, help="click events to generate")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--output", default="out/clickstream", help="directory of the Parquet files (a previous run's are replaced)"
    )
    parser.add_argument("--gap", type=float, default=30.0, help="session gap in seconds")
    args = parser.parse_args()
    if args.events < 1 or args.gap <= 0:
        parser.error("--events must be at least 1 and --gap positive")
    if os.path.exists(args.output):  # a previous run's files go; anything else stays
        names = os.listdir(args.output) if os.path.isdir(args.output) else [""]
        if any(not n.lstrip(".").startswith("part-") for n in names):
            parser.error(f"--output {args.output} exists and holds other files than a previous run's part-*")
        shutil.rmtree(args.output)
    env = StreamExecutionEnvironment.get_execution_environment()
    configure(env)
    build(env, events=args.events, seed=args.seed, output=os.path.abspath(args.output), gap_s=args.gap)
    result = env.execute("Clickstream sessions")
    print(summary(read_sessions(args.output), args.events, result.get_net_runtime()))


if __name__ == "__main__":
    main()
