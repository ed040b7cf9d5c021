"""What the Java servers Millrace runs for tests and local use share: jars fetched once from Maven
Central (each checked against its published `.sha1`), free loopback ports, the `java` binary, a
recorded pid that is still the server it was, and signals to a server's process group.

runtime.deploy.kafka_server and runtime.deploy.zookeeper_server build on it.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from runtime.core.errors import MillraceError

log = logging.getLogger(__name__)

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
_DOWNLOAD_TIMEOUT_S = 60.0


class JavaServerError(MillraceError):
    """A Java server's jars could not be fetched, or the server could not be started or reached."""


# --------------------------------------------------------------------------------------------------
# jars from Maven Central


def jars_home() -> Path:
    """This environment's jar cache (beside runtime.deploy.spark_jars' jars): one folder per server and version."""
    return Path(sys.prefix) / "share" / "millrace"


def jar_url(coordinate: str, repository: str = MAVEN_CENTRAL) -> str:
    group, artifact, version = coordinate.split(":")
    return f"{repository.rstrip('/')}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"


def jar_name(coordinate: str) -> str:
    _, artifact, version = coordinate.split(":")
    return f"{artifact}-{version}.jar"


def _sha1(data: bytes) -> str:
    return hashlib.sha1(data, usedforsecurity=False).hexdigest()


def _verified(jar: Path) -> bool:
    """True if `jar` is there and matches the sha1 recorded beside it when it was downloaded."""
    try:
        recorded = jar.with_name(jar.name + ".sha1").read_text().strip()
        return bool(recorded) and _sha1(jar.read_bytes()) == recorded
    except OSError:
        return False


def _download(url: str, coordinate: str, what: str, error: type[JavaServerError]) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=_DOWNLOAD_TIMEOUT_S) as response:
            data: bytes = response.read()
            return data
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise error(f"downloading {coordinate} from {url} failed ({exc}); Maven Central must be reachable once to fetch the {what} jars") from exc


def write_atomically(path: Path, data: bytes) -> None:
    """Write `path` so that a reader sees the whole file or none (world-readable, as the jars must be)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide the jars from other users of this environment
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def fetch_jars(coordinates: Sequence[str], dest: Path, what: str, repository: str = MAVEN_CENTRAL,
               error: type[JavaServerError] = JavaServerError) -> list[Path]:
    """Each jar of `coordinates` (group:artifact:version) in `dest`, downloaded once.

    A jar is downloaded only if it is missing or no longer matches the sha1 recorded when it was
    fetched; a download must match Maven Central's `.sha1` for it, else it is refused (and nothing
    is written). Jar and sha1 are each written atomically, the sha1 last, so an interrupted fetch
    leaves a jar that the next call downloads again. `what` names the server in messages."""
    dest.mkdir(parents=True, exist_ok=True)
    paths = []
    for coordinate in coordinates:
        jar = dest / jar_name(coordinate)
        if not _verified(jar):
            url = jar_url(coordinate, repository)
            log.info("fetching %s from %s", coordinate, url)
            published = _download(url + ".sha1", coordinate, what, error).decode("ascii", errors="replace").split()
            expected = published[0].lower() if published else ""
            data = _download(url, coordinate, what, error)
            actual = _sha1(data)
            if actual != expected:
                raise error(
                    f"{coordinate} downloaded from {url} has sha1 {actual}, but Maven Central publishes {expected or '(nothing)'}; "
                    "refusing it (a proxy or a broken transfer?): run the fetch again"
                )
            write_atomically(jar, data)
            write_atomically(jar.with_name(jar.name + ".sha1"), (actual + "\n").encode())
        paths.append(jar)
    return paths


# --------------------------------------------------------------------------------------------------
# ports, java, processes


def free_ports(count: int) -> list[int]:
    """`count` distinct free TCP ports on 127.0.0.1 (all bound at once, then released)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
        return ports


def port_free(port: int) -> bool:
    """True if a server could bind `port` on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the JVM binds: a stopped server's TIME_WAIT does not count
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def java(what: str, error: type[JavaServerError] = JavaServerError) -> str:
    """The `java` of JAVA_HOME, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise error(f"{what} needs Java (17) on PATH or JAVA_HOME: install a JDK, e.g. apt-get install openjdk-17-jre-headless")
    return found


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def is_live_process_of(pid: int, markers: Iterable[str]) -> bool:
    """True if `pid` is a live (not zombie) process whose command line has every one of `markers` as an
    argument: a recorded pid may have been reused by another program since."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except (OSError, IndexError):
        return False
    return all(m.encode() in args for m in markers)


def signal_group(pid: int, sig: signal.Signals) -> None:
    """`sig` to the process group led by `pid` (a server started with start_new_session=True)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def wait_until_gone(alive: Callable[[], bool], timeout_s: float) -> bool:
    """Poll `alive()` until it is False or `timeout_s` passes; True if it went."""
    deadline = time.monotonic() + timeout_s
    while alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
