"""Where a running cluster says how to reach it: `$MILLRACE_HOME/cluster.json` (URL, token, pid).

Flink writes the JobManager's address into its configuration directory for the CLI; we write a small
JSON file, readable only by its owner because it holds the cluster's access token.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from runtime.core.errors import ConfigurationError

HOME_ENV = "MILLRACE_HOME"
TOKEN_ENV = "MILLRACE_TOKEN"
CLUSTER_FILE = "cluster.json"


class HaClientSettings(BaseModel):
    """How a client finds an HA cluster's leader (its REST URL is in ZooKeeper's leader node)."""

    quorum: str
    cluster_path: str = Field(description="<high-availability.zookeeper.path.root>/<cluster id>")


class ClusterEndpoint(BaseModel):
    """What a client needs to talk to a cluster's REST API."""

    url: str = Field(description="base URL of the REST API, e.g. http://127.0.0.1:8081")
    token: str = Field(description="bearer token every request must carry")
    pid: int = Field(description="process id of the JobManager (cluster entrypoint)")
    mode: Literal["session", "per-job", "application"] = "session"
    log: str | None = Field(None, description="the JobManager's log file")
    started_at_ms: int = 0
    ha: HaClientSettings | None = Field(None, description="high availability: where clients find the current leader")



def millrace_home(home: str | os.PathLike[str] | None = None) -> Path:
    if home is not None:
        return Path(home).expanduser()
    env = os.environ.get(HOME_ENV)
    return Path(env).expanduser() if env else Path.home() / ".millrace"


def cluster_file_path(home: str | os.PathLike[str] | None = None) -> Path:
    p = millrace_home(home)
    return p if p.suffix == ".json" else p / CLUSTER_FILE


def write_cluster_file(endpoint: ClusterEndpoint, home: str | os.PathLike[str] | None = None) -> Path:
    """Atomically (temp file + rename), mode 0600: a reader never sees half a file, nobody else the token."""
    path = cluster_file_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".cluster-", suffix=".json")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(endpoint.model_dump_json(indent=2))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_cluster_file(home: str | os.PathLike[str] | None = None) -> ClusterEndpoint:
    path = cluster_file_path(home)
    try:
        return ClusterEndpoint.model_validate_json(path.read_text())
    except FileNotFoundError:
        raise ConfigurationError(
            f"no cluster is running here ({path} does not exist): start one with `millrace cluster start`, "
            "or pass --cluster URL (with MILLRACE_TOKEN set)"
        ) from None
    except (ValidationError, json.JSONDecodeError, ValueError) as e:
        raise ConfigurationError(f"{path} is not a valid cluster file ({e}); stop the cluster or delete the file") from None


def remove_cluster_file(pid: int, home: str | os.PathLike[str] | None = None) -> None:
    """Remove the file only if it still describes the cluster of process `pid` (a newer one may own it)."""
    path = cluster_file_path(home)
    try:
        if ClusterEndpoint.model_validate_json(path.read_text()).pid == pid:
            path.unlink()
    except (FileNotFoundError, ValidationError, ValueError):
        pass


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return True


def resolve_cluster(cluster: str | None, token: str | None = None, home: str | os.PathLike[str] | None = None) -> ClusterEndpoint:
    """Turn `--cluster` into an endpoint.

    `cluster` is a URL (token from `token`, $MILLRACE_TOKEN, or the cluster file if it names the
    same URL), a path to a cluster file or the folder holding one, or None/"session" for the
    cluster recorded under MILLRACE_HOME.
    """
    if cluster in (None, "", "session"):
        return read_cluster_file(home)
    if not cluster.startswith(("http://", "https://")):
        if Path(cluster).expanduser().exists():
            return read_cluster_file(cluster)
        raise ConfigurationError(f"--cluster {cluster!r} is neither an http(s) URL nor a cluster file or folder")
    url = cluster.rstrip("/")
    token = token or os.environ.get(TOKEN_ENV)
    if token:
        return ClusterEndpoint(url=url, token=token, pid=0)
    try:
        recorded = read_cluster_file(home)
    except ConfigurationError:
        recorded = None
    if recorded is not None and recorded.url.rstrip("/") == url:
        return recorded
    raise ConfigurationError(f"no access token for {url}: set MILLRACE_TOKEN (the token is in the cluster's cluster.json)")
