"""The dashboard in a real browser (Debian's chromium through chromedriver and selenium), /metrics
against REST, and the token on both (issue 31).

One MiniCluster with the REST API in front of it: 20 finished jobs, one running job with 8
subtasks per vertex (a rate-limited generator -> rebalance -> map, 300 ms checkpoints). The browser
signs in, opens the running job's page, sees its 2 vertices and their edge, record counts that grow,
a completed checkpoint, and triggers a savepoint from the page. Screenshots go to
$MILLRACE_SCREENSHOTS (docs/images when refreshed by hand) or the test's folder.
"""
from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from runtime.api.common import WatermarkStrategy
from runtime.api.connectors.base import RateLimiterStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniClusterConfig
from tests.integration.rest.conftest import TOKEN, RestCluster, start_rest_cluster
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def dashboard_cluster() -> Iterator[RestCluster]:
    yield from start_rest_cluster(MiniClusterConfig(
        provider="local", initial_task_managers=2, min_task_managers=2, max_task_managers=2, slots_per_task_manager=8,
        tm_log_level=os.environ.get("MILLRACE_TM_LOG_LEVEL", "WARNING"),
    ))


@pytest.fixture(scope="module")
def jobs(dashboard_cluster: RestCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """20 finished jobs, then the running one (8 subtasks per vertex) and a job blocked at a gate."""
    client = dashboard_cluster.client()
    for i in range(20):
        env = StreamExecutionEnvironment.get_execution_environment()
        env.from_collection(list(range(10))).map(lambda x: x + 1).print()
        job_id = client.submit_job(env.get_job_graph(f"finished {i}"))
        wait_until(lambda j=job_id: client.job_result(j).status is JobStatus.FINISHED, timeout=60, what=f"job {i} FINISHED")
    savepoints = tmp_path_factory.mktemp("savepoints")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.configure({"state.savepoints.dir": str(savepoints)})
    env.set_parallelism(8)
    env.enable_checkpointing(300)
    src = DataGeneratorSource(lambda i: i, 10_000_000, rate_limiter_strategy=RateLimiterStrategy.per_second(2_000))
    env.from_source(src, WatermarkStrategy.no_watermarks(), "numbers").rebalance().map(lambda x: x * 2).name("double").print()
    running = client.submit_job(env.get_job_graph("live numbers"))
    gate = tmp_path_factory.mktemp("gate") / "open"
    blocked = client.submit_job(_gated_job(gate))
    wait_until(lambda: client.job_checkpoints(running).counts.completed >= 1, timeout=60, what="a completed checkpoint")
    yield {"running": running, "blocked": blocked, "savepoints": savepoints}
    gate.touch()
    client.cancel_job(running)


def _gated_job(gate: Path) -> Any:
    path = str(gate)

    def wait(x: int) -> int:
        deadline = time.monotonic() + 120
        while x == 5 and not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)
        return x

    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection(list(range(100))).disable_chaining().map(wait).name("gated").disable_chaining().print()
    return env.get_job_graph("blocked at a gate")


def _get(rc: RestCluster, path: str, token: str | None = TOKEN, cookie: str | None = None) -> tuple[int, bytes, dict[str, str]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if cookie:
        headers["Cookie"] = cookie
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(urllib.request.Request(rc.url + path, headers=headers), timeout=30) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def test_without_the_token_the_dashboard_and_its_data_get_401_and_the_pages_send_to_the_login(dashboard_cluster: RestCluster) -> None:
    rc = dashboard_cluster
    for path in ("/jobs/overview", "/overview", "/taskmanagers", "/metrics", "/dashboard/app.js"):
        for cookie in (None, "millrace_token=wrong"):
            status, _, _ = _get(rc, path, token=None, cookie=cookie)
            assert status == 401, (path, cookie, status)
    status, _, headers = _get(rc, "/", token=None)
    assert status == 303 and headers["location"] == "/login"  # the page itself holds no data
    assert _get(rc, "/login", token=None)[0] == 200
    assert _get(rc, "/jobs/overview", token=None, cookie=f"millrace_token={TOKEN}")[0] == 200  # the login's cookie works


def test_metrics_parse_as_prometheus_text_and_the_record_counters_match_rest(dashboard_cluster: RestCluster, jobs: dict[str, Any]) -> None:
    rc, client, job_id = dashboard_cluster, dashboard_cluster.client(), jobs["blocked"]

    def rest_counts() -> dict[tuple[str, str], tuple[int, int]]:
        d = client.job_details(job_id)
        return {(v.name, str(s.subtask)): (s.metrics.read_records, s.metrics.write_records) for v in d.vertices for s in v.subtasks}

    # the gated map holds the job still: wait until two reads agree (the figures are settled)
    wait_until(lambda: rest_counts() == rest_counts() and rest_counts()[("gated", "0")][0] >= 5, timeout=60, what="settled counts")
    expected = rest_counts()
    status, body, headers = _get(rc, "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    got: dict[tuple[str, str], list[int]] = {}
    for name, i in (("millrace_taskmanager_job_task_numRecordsIn", 0), ("millrace_taskmanager_job_task_numRecordsOut", 1)):
        for sample in families[name].samples:
            if sample.labels["job_id"] == job_id:
                got.setdefault((sample.labels["vertex"], sample.labels["subtask_index"]), [0, 0])[i] = int(sample.value)
    assert {k: tuple(v) for k, v in got.items()} == expected
    for name in ("numRecordsInPerSecond", "busyTimeMsPerSecond", "backPressuredTimeMsPerSecond"):
        assert f"millrace_taskmanager_job_task_{name}" in families
    running = jobs["running"]
    completed = [s for s in families["millrace_jobmanager_job_numberOfCompletedCheckpoints"].samples if s.labels["job_id"] == running]
    assert completed and completed[0].value >= 1
    assert any(s.value > 0 for s in families["millrace_jobmanager_job_uptime"].samples if s.labels["job_id"] == running)
    for name in ("lastCheckpointDuration", "lastCheckpointSize", "numberOfFailedCheckpoints", "numRestarts"):
        assert f"millrace_jobmanager_job_{name}" in families
    tm_slots = families["millrace_taskmanager_Status_Slots_Total"].samples
    assert sorted(int(s.value) for s in tm_slots) == [8, 8]
    wait_until(lambda: len([s for s in text_string_to_metric_families(_get(rc, "/metrics")[1].decode())
                            if s.name == "millrace_taskmanager_Status_Process_Memory_RSS" and s.samples]) == 1,
               timeout=30, what="the TaskManagers' memory from their heartbeats")


def test_the_dashboard_in_a_browser_shows_the_running_job_and_takes_a_savepoint(
    dashboard_cluster: RestCluster, jobs: dict[str, Any], tmp_path: Path,
) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    # not skipped when missing: infra/setup.sh installs both (apt, as root), and a browser test that
    # silently does not run shows nothing
    assert CHROMIUM and CHROMEDRIVER, "chromium and chromedriver are missing: infra/setup.sh installs them (apt-get, as root)"
    shots = Path(os.environ.get("MILLRACE_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM or ""
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1400,1000",
                 f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER or ""), options=options)
    wait = WebDriverWait(driver, 30)
    rc, job_id = dashboard_cluster, jobs["running"]
    try:
        driver.get(rc.url + "/")
        wait.until(lambda d: d.current_url.endswith("/login"))
        driver.find_element(By.ID, "token").send_keys(TOKEN)
        driver.find_element(By.ID, "sign-in").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#jobs a.job-link"))
        assert driver.find_element(By.ID, "jobs-finished").text == "20"
        assert driver.find_element(By.ID, "tm-count").text == "2"
        driver.save_screenshot(str(shots / "dashboard-overview.png"))

        # the job page, loaded afresh: done (every call answered, the graph drawn) how long after navigation
        driver.get("about:blank")
        driver.get(f"{rc.url}/#/jobs/{job_id}")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#vertices tr[data-vertex]")) == 2)
        load_ms = driver.execute_script(
            "return Number(document.body.dataset.loaded) - performance.timeOrigin")
        print(f"job page loaded in {load_ms:.0f} ms (20 finished jobs, 8 subtasks per vertex)")
        assert load_ms < 1000, f"the job page took {load_ms:.0f} ms"
        nodes = driver.find_elements(By.CSS_SELECTOR, "#graph g.node")
        edges = driver.find_elements(By.CSS_SELECTOR, "#graph path.edge")
        assert len(nodes) == 2 and len(edges) == 1
        assert "REBALANCE" in driver.find_element(By.ID, "graph").text

        def records_out() -> int:
            cell = driver.find_element(By.CSS_SELECTOR, "#vertices tr[data-vertex] td.records-out")
            return int(cell.text.replace(",", "") or 0)

        first = records_out()
        wait.until(lambda d: records_out() > first)  # the page refreshes by itself
        nodes[1].click()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#vertex-subtasks table.subtasks tr")) == 9)  # 8 subtasks
        driver.save_screenshot(str(shots / "dashboard-job.png"))

        driver.get(f"{rc.url}/#/jobs/{job_id}/checkpoints")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#checkpoints .state.COMPLETED"))
        assert int(driver.find_element(By.ID, "cp-completed").text) >= 1

        driver.find_element(By.ID, "action-savepoint").click()
        wait.until(lambda d: d.find_element(By.ID, "dialog-ok").is_displayed())  # it asks first
        driver.find_element(By.ID, "dialog-ok").click()
        message = "return (document.getElementById('action-message') || {}).textContent || ''"  # replaced as it progresses
        WebDriverWait(driver, 60).until(lambda d: "savepoint completed:" in d.execute_script(message))
        location = driver.execute_script(message).split("savepoint completed: ", 1)[1].strip()
        checkpoints = dashboard_cluster.client().job_checkpoints(job_id)
        assert checkpoints.latest.savepoint is not None and checkpoints.latest.savepoint.external_path == location
        assert Path(location.removeprefix("file://")).exists()
        logs = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        assert not logs, json.dumps(logs)
    finally:
        driver.quit()
