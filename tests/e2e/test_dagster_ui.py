"""Dagster as a user of its UI drives it: `dagster dev` (webserver + daemon) on 127.0.0.1 with a
temporary DAGSTER_HOME holding infra/dagster.yaml; runs launched and terminated through the same
GraphQL mutations the UI sends (LaunchPipelineExecution, i.e. launchRun, and Terminate).

- a run of windowed_sum_table (with its checks) succeeds: materialization metadata over GraphQL,
  the Delta table against the plain-Python reference;
- a run terminated from the UI while its Millrace job runs ends CANCELED, the op cancelled the
  Millrace job first, and the job committed nothing;
- a run with TaskManagers on its Spark executors (the code location's default) terminated while
  Spark starts, while TaskManagers launch or while tasks run leaves no process (run worker, step
  process, Spark's JVM, TaskManagers) and no table behind;
- stopping the server (its process group) leaves no process behind.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from pipelines.jobs import windowed_sum
from tests.e2e.leftovers import alive, command_line, descendants, still_there
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
EVENTS = 20_000
LOCATION = "pipelines.definitions"
REPOSITORY = "__repository__"
ASSET_JOB = "__ASSET_JOB"

LAUNCH = """
mutation LaunchPipelineExecution($executionParams: ExecutionParams!) {
  launchPipelineExecution(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { id runId pipelineName } }
    ... on PythonError { message stack }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on InvalidSubsetError { message }
    ... on PipelineNotFoundError { message }
  }
}"""

TERMINATE = """
mutation Terminate($runIds: [String!]!, $terminatePolicy: TerminateRunPolicy) {
  terminateRuns(runIds: $runIds, terminatePolicy: $terminatePolicy) {
    __typename
    ... on TerminateRunsResult { terminateRunResults { __typename ... on TerminateRunFailure { message } } }
    ... on PythonError { message }
  }
}"""

RUN = """
query Run($runId: ID!) {
  runOrError(runId: $runId) { __typename ... on Run { status } }
}"""

LOGS = """
query Logs($runId: ID!, $after: String) {
  logsForRun(runId: $runId, afterCursor: $after) {
    __typename
    ... on EventConnection {
      cursor hasMore
      events {
        __typename
        ... on MessageEvent { message }
        ... on ErrorEvent { error { message } }
        ... on ExecutionStepFailureEvent { failureMetadata { description } }
      }
    }
  }
}"""

MATERIALIZATION = """
query Materialization($path: [String!]!) {
  assetOrError(assetKey: {path: $path}) {
    __typename
    ... on Asset {
      assetMaterializations(limit: 1) {
        runId
        metadataEntries {
          label
          __typename
          ... on IntMetadataEntry { intValue }
          ... on TextMetadataEntry { text }
          ... on PathMetadataEntry { path }
          ... on MarkdownMetadataEntry { mdStr }
        }
      }
    }
  }
}"""

CHECKS = """
query Checks($path: [String!]!) {
  assetNodeOrError(assetKey: {path: $path}) {
    __typename
    ... on AssetNode {
      assetChecksOrError {
        __typename
        ... on AssetChecks { checks { name executionForLatestMaterialization { status } } }
      }
    }
  }
}"""

LOCATION_STATUS = """
query { workspaceOrError { __typename ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on PythonError { message } } } } } }"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DagsterDev:
    def __init__(self, home: Path, warehouse: Path) -> None:
        self.home, self.warehouse = home, warehouse
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/graphql"
        self.log_path = home / "dagster-dev.log"
        self.seen: set[int] = set()  # every process the server started (TaskManagers live in their own sessions)
        env = dict(os.environ, DAGSTER_HOME=str(home), MILLRACE_WAREHOUSE=str(warehouse))
        env.pop("MILLRACE_URL", None)
        env.pop("MILLRACE_TOKEN", None)
        self._log = open(self.log_path, "w")
        # its own session: `dagster dev` and everything it starts form one process group we can kill
        self.proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "dagster"), "dev", "-h", "127.0.0.1", "-p", str(self.port), "-w", "workspace.yaml"],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def gql(self, query: str, variables: dict[str, Any] | None = None, timeout: float = 30) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        req = urllib.request.Request(self.url, body, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                out = json.loads(resp.read())
        except urllib.error.HTTPError as e:  # GraphQL errors come with a 400: show them
            raise AssertionError(f"GraphQL {e.code}: {e.read().decode(errors='replace')[:2000]}") from None
        assert "errors" not in out, out["errors"]
        return out["data"]

    def track(self) -> None:
        self.seen |= descendants(self.proc.pid)

    def wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"dagster dev exited: {self.log_path.read_text()[-3000:]}"
            try:
                entries = self.gql(LOCATION_STATUS, timeout=5)["workspaceOrError"]["locationEntries"]
                if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                    errors = [e for e in entries if e["locationOrLoadError"]["__typename"] == "PythonError"]
                    assert not errors, errors
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.5)
        raise AssertionError(f"GraphQL did not answer in {timeout}s: {self.log_path.read_text()[-3000:]}")

    def launch_asset(self, asset: str, run_config_yaml: str, checks: list[str]) -> str:
        """What the UI's Materialize button sends: the asset job, the asset and its checks, launchpad YAML."""
        params = {
            "runConfigData": run_config_yaml,
            "selector": {
                "repositoryLocationName": LOCATION,
                "repositoryName": REPOSITORY,
                "pipelineName": ASSET_JOB,
                "assetSelection": [{"path": [asset]}],
                "assetCheckSelection": [{"assetKey": {"path": [asset]}, "name": c} for c in checks],
            },
            "mode": "default",
            "executionMetadata": {"tags": []},
        }
        out = self.gql(LAUNCH, {"executionParams": params})["launchPipelineExecution"]
        assert out["__typename"] == "LaunchRunSuccess", out
        return out["run"]["runId"]

    def status(self, run_id: str) -> str:
        return self.gql(RUN, {"runId": run_id})["runOrError"]["status"]

    def wait_status(self, run_id: str, final: set[str], timeout: float = 300) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.track()
            status = self.status(run_id)
            if status in final:
                return status
            time.sleep(1)
        raise AssertionError(f"run {run_id} still {status} after {timeout}s:\n{self.messages(run_id)[-4000:]}")

    def messages(self, run_id: str) -> str:
        lines, cursor = [], None
        while True:
            out = self.gql(LOGS, {"runId": run_id, "after": cursor})["logsForRun"]
            for e in out["events"]:  # a failure's message says only that it failed: add why
                lines.append(e.get("message", ""))
                lines += [why for why in ((e.get("error") or {}).get("message"), (e.get("failureMetadata") or {}).get("description")) if why]
            cursor = out["cursor"]
            if not out["hasMore"]:
                return "\n".join(lines)

    def stop(self) -> set[int]:
        """Kill the server's process group; returns processes it started that are still alive."""
        self.track()
        for sig, grace in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(grace)
                # children of the group may outlive the leader a moment
                deadline = time.monotonic() + grace
                while any(alive(p) for p in self.seen) and time.monotonic() < deadline:
                    time.sleep(0.2)
                if not any(alive(p) for p in self.seen):
                    break
            except subprocess.TimeoutExpired:
                continue
        self._log.close()
        # TaskManagers (own sessions) exit when their JobManager is gone: give them a moment
        deadline = time.monotonic() + 30
        while any(alive(p) for p in self.seen) and time.monotonic() < deadline:
            time.sleep(0.5)
        return {p for p in self.seen if alive(p)}


@pytest.fixture(scope="module")
def dagster_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterDev]:
    home = tmp_path_factory.mktemp("dagster-home")
    shutil.copy(ROOT / "infra" / "dagster.yaml", home / "dagster.yaml")
    server = DagsterDev(home, tmp_path_factory.mktemp("warehouse"))
    try:
        server.wait_ready()
        yield server
    finally:
        left = server.stop()
        assert server.seen, "no process of dagster dev was ever seen: the check below would prove nothing"
        for pid in left:  # do not leak them into the next tests, but fail
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert not left, f"processes left behind by dagster dev: {sorted(left)}"


def _metadata(entries: list[dict]) -> dict[str, Any]:
    out = {}
    for e in entries:
        for key in ("intValue", "text", "path", "mdStr"):
            if key in e:
                out[e["label"]] = e[key]
    return out


def test_launch_from_the_ui_materializes_the_table(dagster_dev):
    run_config = (
        "ops:\n  windowed_sum_table:\n    config:\n"
        f"      events: {EVENTS}\n      parallelism: 2\n"
        "resources:\n  millrace:\n    config:\n      provider: local\n"
    )
    run_id = dagster_dev.launch_asset("windowed_sum_table", run_config, ["row_count", "schema", "no_duplicate_keys"])
    status = dagster_dev.wait_status(run_id, {"SUCCESS", "FAILURE", "CANCELED"})
    assert status == "SUCCESS", dagster_dev.messages(run_id)[-4000:]

    mats = dagster_dev.gql(MATERIALIZATION, {"path": ["windowed_sum_table"]})["assetOrError"]["assetMaterializations"]
    assert mats[0]["runId"] == run_id
    meta = _metadata(mats[0]["metadataEntries"])
    ref = windowed_sum.reference(EVENTS)
    path = str(dagster_dev.warehouse / "windowed_sum")
    assert len(meta["millrace_job_id"]) == 32 and meta["millrace_status"] == "FINISHED"
    assert meta["records_in"] == EVENTS and meta["row_count"] == meta["records_out"] == len(ref)
    assert meta["chains"] == 2 and meta["slots"] == 2 and "HASH" in meta["plan"]
    assert meta["delta_table"] == path and meta["delta_version"] == DeltaTable(path).version()
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    assert {(r["user_id"], r["window_start"]): (r["count"], r["sum"]) for r in rows} == ref

    checks = dagster_dev.gql(CHECKS, {"path": ["windowed_sum_table"]})["assetNodeOrError"]["assetChecksOrError"]["checks"]
    assert {c["name"]: (c["executionForLatestMaterialization"] or {}).get("status") for c in checks} == {
        "row_count": "SUCCEEDED", "schema": "SUCCEEDED", "no_duplicate_keys": "SUCCEEDED"
    }
    logs = dagster_dev.messages(run_id)
    assert f"Millrace job {meta['millrace_job_id']} 'windowed_sum' -> FINISHED" in logs


def test_terminating_the_run_from_the_ui_cancels_the_millrace_job(dagster_dev, tmp_path):
    output = tmp_path / "never"
    run_config = (
        "ops:\n  windowed_sum_table:\n    config:\n"
        f"      events: 2000000000\n      parallelism: 1\n      output: {output}\n"
        "resources:\n  millrace:\n    config:\n      provider: local\n"
    )
    run_id = dagster_dev.launch_asset("windowed_sum_table", run_config, [])
    deadline = time.monotonic() + 180
    while "'windowed_sum' -> RUNNING" not in dagster_dev.messages(run_id):
        dagster_dev.track()
        assert time.monotonic() < deadline, dagster_dev.messages(run_id)[-4000:]
        assert dagster_dev.status(run_id) not in {"SUCCESS", "FAILURE", "CANCELED"}
        time.sleep(1)
    time.sleep(2)  # well inside the job (2e9 events take far longer)
    dagster_dev.track()
    out = dagster_dev.gql(TERMINATE, {"runIds": [run_id], "terminatePolicy": "SAFE_TERMINATE"})["terminateRuns"]
    assert out["__typename"] == "TerminateRunsResult" and out["terminateRunResults"][0]["__typename"] == "TerminateRunSuccess", out
    assert dagster_dev.wait_status(run_id, {"CANCELED", "FAILURE", "SUCCESS"}, timeout=180) == "CANCELED"
    logs = dagster_dev.messages(run_id)
    assert "the Dagster run was interrupted; cancelling the Millrace job" in logs, logs[-4000:]
    assert "is CANCELED after the cancel" in logs, logs[-4000:]
    assert not (output / "_delta_log").exists()  # the cancelled job committed nothing


@pytest.mark.parametrize("moment", ["spark-starting", "task-managers-launching", "tasks-running"])
def test_a_run_terminated_at_any_moment_leaves_no_process_and_no_table(dagster_dev, tmp_path, moment):
    output = tmp_path / "never"
    run_config = (  # the resources' defaults: an embedded cluster, TaskManagers on the run's Spark executors
        "ops:\n  windowed_sum_table:\n    config:\n"
        f"      events: 2000000000\n      parallelism: 2\n      output: {output}\n"
    )
    run_id = dagster_dev.launch_asset("windowed_sum_table", run_config, [])
    started = wait_until(lambda: re.search(r"Started process for run \(pid: (\d+)\)", dagster_dev.messages(run_id)), 120, "the run worker's start")
    worker = int(started.group(1))
    run_processes = {worker}  # the run worker and all below it: step process, JVM, Spark's Python workers

    def reached() -> bool:
        dagster_dev.track()
        run_processes.update(descendants(worker))
        assert dagster_dev.status(run_id) not in {"SUCCESS", "FAILURE", "CANCELED"}, dagster_dev.messages(run_id)[-4000:]
        if moment == "spark-starting":
            return any(command_line(p).split(" ", 1)[0].endswith("/bin/java") for p in run_processes if alive(p))
        logs = dagster_dev.messages(run_id)
        return ("' submitted as " in logs) if moment == "task-managers-launching" else ("'windowed_sum' -> RUNNING" in logs)

    wait_until(reached, 180, f"the run reaching '{moment}'", interval=0.1)
    out = dagster_dev.gql(TERMINATE, {"runIds": [run_id], "terminatePolicy": "SAFE_TERMINATE"})["terminateRuns"]
    assert out["terminateRunResults"][0]["__typename"] == "TerminateRunSuccess", out
    assert dagster_dev.wait_status(run_id, {"CANCELED", "FAILURE", "SUCCESS"}, timeout=180) == "CANCELED", dagster_dev.messages(run_id)[-4000:]
    left = still_there(lambda: [(p, command_line(p)[:120]) for p in run_processes if alive(p)], 30)
    assert left == [], left
    assert not output.exists()
