"""The web dashboard in a real headless Chromium (Debian's ``chromium``, driven by Playwright):
it loads, refreshes by itself, draws a running job's JobGraph with the right vertices and
parallelism, shows subtasks, TaskExecutors and metrics, and cancels the job."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from yarnflink import StreamExecutionEnvironment
from yarnflink.api.environment import set_default_executor

from .conftest import Cluster, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: how long the page may take to show something (a loaded 2-core machine, refresh every 500 ms)
UI_TIMEOUT_MS = 30_000


@pytest.fixture
def dcluster(monitoring_cluster: Cluster) -> Iterator[Cluster]:
    """2 TaskExecutors x 2 slots; the dashboard refreshes every 500 ms, metrics every 200 ms."""
    monitoring_cluster.executor()
    yield monitoring_cluster
    set_default_executor(None)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is not installed (scripts/setup installs it)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield b
        b.close()


def submit_forever_job() -> str:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(3)
    (
        env.from_sequence(1, 10**12)
        .name("numbers")
        .set_parallelism(2)
        .map(lambda x: x * 3)
        .name("triple")
        .set_parallelism(2)
        .rebalance()
        .filter(lambda x: x < 0)
        .name("drop all")
        .print()
    )
    return env.execute_async("dashboard-job").get_job_id()


def test_dashboard_shows_a_running_job_and_cancels_it(dcluster: Cluster, browser: Any, tmp_path: Path) -> None:
    c = dcluster
    context = browser.new_context(extra_http_headers=c.auth, viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_default_timeout(UI_TIMEOUT_MS)
    try:
        page.goto(c.rest_url + "/")
        # the cluster overview: TaskExecutors, slots total and free, jobs by state (earlier tests'
        # jobs may still be giving their slots back)
        page.wait_for_selector("#ov-taskmanagers .value:text-is('2')")
        assert page.inner_text("#ov-slots-total .value") == "4"
        page.wait_for_selector("#ov-jobs-running .value:text-is('0')")
        page.wait_for_selector("#ov-slots-free .value:text-is('4')")
        cancelled_before = int(page.inner_text("#ov-jobs-cancelled .value"))

        # a job submitted after the page loaded shows up without a reload (it refreshes by itself)
        job_id = submit_forever_job()
        # (the page re-renders every 500 ms: click by selector, which Playwright re-resolves)
        page.wait_for_selector(f"#running-jobs tr[data-job-id='{job_id}']")
        page.wait_for_selector("#ov-jobs-running .value:text-is('1')")
        page.click(f"#running-jobs tr[data-job-id='{job_id}'] a")

        # the job page: one box per JobVertex with its chained operators and parallelism
        page.wait_for_url(re.compile(f"#/jobs/{job_id}"))
        details = c.rest.job(job_id)
        vertices = details["vertices"]
        assert len(vertices) == 2
        page.wait_for_selector("#job-graph .vertex")
        assert page.locator("#job-graph .vertex").count() == len(vertices)
        for v in vertices:
            box = page.locator(f"#job-graph .vertex[data-vertex-id='{v['id']}']")
            assert box.locator(".parallelism").inner_text() == str(v["parallelism"])
            assert box.locator(".op").all_inner_texts() == v["operators"]
        assert sorted(v["parallelism"] for v in vertices) == [2, 3]
        assert page.locator("#job-graph path.edge").count() == 1
        assert page.locator("#job-graph text.edge-label").all_text_contents() == ["REBALANCE"]
        assert page.inner_text("#job-name") == "dashboard-job"

        # state and records flow in: every vertex RUNNING, the source's records out counting up
        source, sink = vertices
        page.wait_for_function(
            """ids => ids.every(id => {
                 const b = document.querySelector(`#job-graph .vertex[data-vertex-id='${id}'] .badge`);
                 return b && b.textContent === 'RUNNING'; })""",
            arg=[v["id"] for v in vertices],
        )
        page.wait_for_function(
            """id => { const t = document.querySelector(`#job-graph .vertex[data-vertex-id='${id}'] .records-out`);
                      return t && !t.textContent.startsWith('0 ') && !t.textContent.startsWith('- '); }""",
            arg=source["id"],
        )
        page.wait_for_function(
            """id => { const t = document.querySelector(`#job-graph .vertex[data-vertex-id='${id}'] .records-in`);
                      return t && !t.textContent.startsWith('0 ') && !t.textContent.startsWith('- '); }""",
            arg=sink["id"],
        )

        # subtasks of a vertex, with the TaskExecutor and slot each runs in
        page.click(f"#job-graph .vertex[data-vertex-id='{sink['id']}']")
        page.wait_for_selector(f"#vertex-table tr.selected[data-vertex-id='{sink['id']}']")
        page.wait_for_function("() => document.querySelectorAll('#subtask-table tr.subtask-row').length === 3")
        tm_ids = {tm["id"] for tm in c.rest.taskmanagers()}
        shown = set(page.locator("#subtask-table a.tm-link").all_inner_texts())
        assert shown and shown <= tm_ids
        assert all(s.strip().isdigit() for s in page.locator("#subtask-table td.slot").all_inner_texts())
        page.screenshot(path=str(tmp_path / "job.png"), full_page=True)

        # the other tabs: no exceptions, an empty checkpoint history, the configuration
        page.click("a[data-tab='exceptions']")
        page.wait_for_selector("#exceptions:text('No exceptions')")
        page.click("a[data-tab='checkpoints']")
        page.wait_for_selector("#checkpoint-history:text('No checkpoints yet')")
        page.click("a[data-tab='configuration']")
        page.wait_for_selector("#job-config")

        # a TaskExecutor's page: its slots and the job's tasks in them, memory
        page.goto(f"{c.rest_url}/#/taskmanagers/{sorted(shown)[0]}")
        page.wait_for_selector("#tm-slot-table tr.task-in-slot")
        assert any("drop all" in t or "numbers" in t for t in page.locator("#tm-slot-table").all_inner_texts())
        assert re.search(r"\d", page.inner_text("#tm-rss .value"))

        # cancel the job from its page
        page.goto(f"{c.rest_url}/#/jobs/{job_id}")
        page.wait_for_selector("#cancel-job")
        page.once("dialog", lambda d: d.accept())
        page.click("#cancel-job")
        page.wait_for_selector("#job-state:text-is('CANCELED')")
        wait_until(lambda: c.rest.job(job_id)["state"] == "CANCELED", message="job canceled")
        assert page.locator("#cancel-job").count() == 0
        page.click("a[data-nav='overview']")
        page.wait_for_selector(f"#ov-jobs-cancelled .value:text-is('{cancelled_before + 1}')")
        page.wait_for_selector(f"#completed-jobs tr[data-job-id='{job_id}'] .badge:text-is('CANCELED')")
        page.screenshot(path=str(tmp_path / "canceled.png"), full_page=True)
        assert not errors, errors
    finally:
        context.close()
        for j in c.rest.jobs_overview():
            if j["state"] not in ("FINISHED", "FAILED", "CANCELED"):
                c.rest.cancel(j["jid"])


def test_a_click_held_down_across_refreshes_still_follows_the_link(dcluster: Cluster, browser: Any) -> None:
    """The page re-renders every 500 ms. A click whose mousedown and mouseup land on two
    different elements (the link was re-rendered in between: a slow click, or a loaded machine)
    is lost by the browser, so no refresh replaces the page while a mouse button is down."""
    context = dcluster_context(dcluster, browser)
    page = context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    try:
        page.goto(dcluster.rest_url + "/#/jobmanager/config")
        page.wait_for_selector("#jm-config")
        # a refresh may replace the link between finding it and pressing on it (the button is not
        # down yet): measure whichever link is there, then hold on to the element under the button
        box = wait_until(
            lambda: page.wait_for_selector("a[href='#/jobmanager/metrics']").bounding_box(),
            timeout=UI_TIMEOUT_MS / 1000,
            message="the metrics link laid out",
        )
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2  # type: ignore[index]
        page.mouse.move(x, y)
        page.mouse.down()
        link = page.evaluate_handle("([x, y]) => document.elementFromPoint(x, y).closest('a')", [x, y])
        assert link.evaluate("e => e !== null && e.getAttribute('href')") == "#/jobmanager/metrics"
        page.wait_for_timeout(2_000)  # four refresh intervals with the button held down
        assert link.evaluate("e => e.isConnected"), "a refresh replaced the link under the pressed button"
        page.mouse.up()
        page.wait_for_url(re.compile("#/jobmanager/metrics$"))
        # refreshing resumes once the button is up: the page keeps re-rendering by itself
        metrics_page = page.wait_for_selector("a[href='#/jobmanager/config']")
        page.wait_for_function("e => !e.isConnected", arg=metrics_page)
    finally:
        context.close()


def dcluster_context(c: Cluster, browser: Any) -> Any:
    return browser.new_context(extra_http_headers=c.auth, viewport={"width": 1400, "height": 1000})


def test_dashboard_pages_for_cluster_and_logs(dcluster: Cluster, browser: Any) -> None:
    c = dcluster
    context = browser.new_context(extra_http_headers=c.auth)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_default_timeout(UI_TIMEOUT_MS)
    try:
        page.goto(c.rest_url + "/#/taskmanagers")
        page.wait_for_function("() => document.querySelectorAll('#tm-table tr.tm-row').length === 2")
        page.goto(c.rest_url + "/#/jobmanager/config")
        page.wait_for_selector("#jm-config td:text-is('taskmanager.numberOfTaskSlots')")
        page.goto(c.rest_url + "/#/jobmanager/logs")
        page.wait_for_selector("#log-table a:text-is('master.log')")
        page.click("#log-table a:text-is('master.log')")
        page.wait_for_selector("#log-content")
        assert "INFO" in page.inner_text("#log-content")
        assert not errors, errors
    finally:
        context.close()
