"""A session cluster (local-process TaskManagers) per test module that needs one."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.cluster.conftest import SessionCluster, start_session_cluster, stop_session_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionCluster]:
    c = start_session_cluster(tmp_path_factory.mktemp("millrace-home"), "--taskmanagers", "2", "--max-taskmanagers", "4")
    try:
        yield c
    finally:
        stop_session_cluster(c)
