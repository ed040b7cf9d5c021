"""cluster.json: written atomically and privately, found by the CLI, stale ones recognised."""
from __future__ import annotations

import os
import stat

import pytest

from runtime.core.errors import ConfigurationError
from runtime.deploy.cluster_file import (
    ClusterEndpoint,
    cluster_file_path,
    read_cluster_file,
    remove_cluster_file,
    resolve_cluster,
    write_cluster_file,
)


def _endpoint(pid: int = 4242) -> ClusterEndpoint:
    return ClusterEndpoint(url="http://127.0.0.1:8081", token="t0k3n", pid=pid)


def test_written_file_is_private_and_round_trips(tmp_path):
    path = write_cluster_file(_endpoint(), tmp_path)
    assert path == tmp_path / "cluster.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_cluster_file(tmp_path) == _endpoint()
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.json"]  # no temp file left


def test_missing_or_corrupt_file_says_what_to_do(tmp_path):
    with pytest.raises(ConfigurationError, match="millrace cluster start"):
        read_cluster_file(tmp_path)
    (tmp_path / "cluster.json").write_text("{not json")
    with pytest.raises(ConfigurationError, match="not a valid cluster file"):
        read_cluster_file(tmp_path)


def test_remove_only_when_it_is_still_ours(tmp_path):
    write_cluster_file(_endpoint(pid=1), tmp_path)
    remove_cluster_file(2, tmp_path)
    assert cluster_file_path(tmp_path).exists()
    remove_cluster_file(1, tmp_path)
    assert not cluster_file_path(tmp_path).exists()


def test_resolve_cluster(tmp_path, monkeypatch):
    monkeypatch.delenv("MILLRACE_TOKEN", raising=False)
    monkeypatch.setenv("MILLRACE_HOME", str(tmp_path))
    write_cluster_file(_endpoint(), tmp_path)
    assert resolve_cluster(None) == _endpoint()
    assert resolve_cluster("session") == _endpoint()
    assert resolve_cluster(str(tmp_path)) == _endpoint()  # a folder holding cluster.json
    assert resolve_cluster("http://127.0.0.1:8081/").token == "t0k3n"  # same URL: token from the file
    with pytest.raises(ConfigurationError, match="MILLRACE_TOKEN"):
        resolve_cluster("http://127.0.0.1:9999")
    monkeypatch.setenv("MILLRACE_TOKEN", "other")
    assert resolve_cluster("http://127.0.0.1:9999").token == "other"
    assert resolve_cluster("http://127.0.0.1:9999", token="flag").token == "flag"
    with pytest.raises(ConfigurationError, match="neither an http"):
        resolve_cluster("no-such-place")
