"""Fuzzing the whole OpenAPI document with schemathesis (authenticated): no request gets a 5xx."""
from __future__ import annotations

import base64
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import APIOperation, GenerationMode

from runtime.deploy.minicluster import MiniClusterConfig
from tests.integration.rest.conftest import TOKEN, RestCluster, start_rest_cluster

EXAMPLES_PER_OPERATION = int(os.environ.get("MILLRACE_FUZZ_EXAMPLES", "15"))
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def fuzz_cluster() -> Iterator[RestCluster]:
    """One one-slot TaskManager at most: fuzzed jobs that fit queue for it, bigger ones are refused."""
    yield from start_rest_cluster(
        MiniClusterConfig(provider="local", max_task_managers=1, heartbeat_timeout_ms=5000, tm_log_level=os.environ.get("MILLRACE_TM_LOG_LEVEL", "ERROR"))
    )


@pytest.fixture
def base64_bytes() -> Iterator[None]:
    """JobGraph's user functions are bytes, base64 in JSON ("format": "base64url"): generate real base64
    (of garbage pickles), so fuzzed JobGraphs get past parsing into validation and the Dispatcher."""
    from schemathesis.specs.openapi.formats import unregister_string_format

    schemathesis.openapi.format("base64url", st.binary(max_size=48).map(lambda b: base64.urlsafe_b64encode(b).decode()))
    try:
        yield
    finally:
        unregister_string_format("base64url")


def _fuzz(url: str, operation: APIOperation, mode: GenerationMode, counts: dict[str, int], server_errors: list[str]) -> None:
    """Send one operation's generated requests (valid or invalid ones, by `mode`); count them and keep every 5xx."""

    # fixed seed per operation and mode: a failure reproduces; generate only (no shrinking: report all)
    @settings(
        max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None, derandomize=True,
        phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def check(case: Any) -> None:
        response = case.call(base_url=url, headers=AUTH, timeout=30)
        counts[operation.label] = counts.get(operation.label, 0) + 1
        if response.status_code >= 500:
            server_errors.append(f"{response.status_code} {case.as_curl_command(headers=AUTH)}\n  -> {response.text[:300]}")

    try:
        check()
    except Unsatisfiable:
        if mode is GenerationMode.POSITIVE:
            raise
        # an operation without parameters or body has no invalid input to generate


@pytest.mark.usefixtures("base64_bytes")
def test_fuzzing_every_operation_finds_no_server_error(fuzz_cluster: RestCluster) -> None:
    schema = schemathesis.openapi.from_url(fuzz_cluster.url + "/openapi.json", timeout=30)
    server_errors: list[str] = []
    counts: dict[str, int] = {}
    started = time.monotonic()
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15, [op.label for op in operations]
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            _fuzz(fuzz_cluster.url, operation, mode, counts, server_errors)
    elapsed = time.monotonic() - started
    print(f"fuzzed {sum(counts.values())} requests over {len(operations)} operations in {elapsed:.1f}s")
    assert not server_errors, "\n".join(server_errors[:20])
    assert all(counts.get(op.label) for op in operations), counts  # every operation was exercised
    # the cluster is still serving
    assert fuzz_cluster.client().overview().taskmanagers <= 1
