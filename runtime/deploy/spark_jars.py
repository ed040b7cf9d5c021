"""The Delta jars, resolved once at set-up time, and Spark's own logging kept quiet.

`spark.jars.packages` makes every new Spark driver run Ivy, which prints ~90 lines of resolution
to the terminal even when everything is cached. `infra/setup.sh` runs `python -m
runtime.deploy.spark_jars` once: Ivy resolves the Delta coordinates into a directory of this
environment and the jar list is written beside them; later sessions pass those files as
`spark.jars` (no Ivy, no output). Without the list (set-up not run, another environment) the
session falls back to `spark.jars.packages`.

Spark's default log4j profile announces itself and warns about the native Hadoop library on
every start; `quiet_log4j_options()` points the driver at a profile that logs warnings of
Spark's own classes but not those two lines (`--log-level` in the CLI turns Spark up again).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

MANIFEST = "jars.txt"

_LOG4J2 = """\
# Millrace: Spark's defaults without the start-up chatter (runtime/deploy/spark_jars.py)
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.nativecode.name = org.apache.hadoop.util.NativeCodeLoader
logger.nativecode.level = error
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = warn
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
"""


def jars_dir(coordinates: str) -> Path:
    """Where this environment keeps the resolved jars of `coordinates`."""
    slug = hashlib.sha256(coordinates.encode()).hexdigest()[:16]
    return Path(sys.prefix) / "share" / "millrace" / "spark-jars" / slug


def resolved_jars(coordinates: str) -> list[str] | None:
    """The jar files resolved for `coordinates` at set-up time; None if not (all) there."""
    manifest = jars_dir(coordinates) / MANIFEST
    try:
        jars = [line for line in manifest.read_text().splitlines() if line.strip()]
    except OSError:
        return None
    return jars if jars and all(os.path.isfile(j) for j in jars) else None


def resolve(coordinates: str) -> list[str]:
    """Run Ivy once (in a child process, its output kept in a log file) and record the jar list."""
    base = jars_dir(coordinates)
    ivy = base / "ivy"
    base.mkdir(parents=True, exist_ok=True)
    log_path = base / "resolve.log"
    code = (
        "import sys\n"
        "from pyspark.sql import SparkSession\n"
        "s = SparkSession.builder.master('local[1]').appName('millrace-resolve-jars')"
        ".config('spark.jars.packages', sys.argv[1]).config('spark.jars.ivy', sys.argv[2])"
        ".config('spark.ui.enabled', 'false').getOrCreate()\n"
        "s.stop()\n"
    )
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP=os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"))
    with open(log_path, "w") as log:
        proc = subprocess.run([sys.executable, "-c", code, coordinates, str(ivy)], stdout=log, stderr=subprocess.STDOUT, env=env, timeout=900)
    jars = sorted(str(p) for p in (ivy / "jars").glob("*.jar"))
    if proc.returncode != 0 or not jars:
        raise RuntimeError(f"resolving {coordinates} failed (exit {proc.returncode}); see {log_path}")
    tmp = base / (MANIFEST + ".tmp")
    tmp.write_text("\n".join(jars) + "\n")
    tmp.replace(base / MANIFEST)  # the list appears complete or not at all
    return jars


def quiet_log4j_options() -> str:
    """JVM options that load Millrace's quiet log4j2 profile (written once to the temp directory)."""
    digest = hashlib.sha256(_LOG4J2.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"millrace-log4j2-{digest}.properties"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2)
        tmp.replace(path)
    return f"-Dlog4j2.configurationFile=file:{path}"


# printed by the JVM itself at start, because Spark's launcher adds the incubating vector module
_JVM_NOISE = (b"WARNING: Using incubator modules:",)


@contextlib.contextmanager
def jvm_stderr_filtered() -> Iterator[None]:
    """Start the Spark JVM inside this: its stderr goes through a relay thread that drops the JVM's
    start-up notice and passes everything else on (PySpark gives no other handle on that stream)."""
    try:
        relay_fd, restore_fd = os.dup(2), os.dup(2)
    except OSError:  # no stderr to filter
        yield
        return
    r, w = os.pipe()
    sys.stderr.flush()
    os.dup2(w, 2)  # the JVM started now inherits the pipe as its stderr
    os.close(w)

    def relay() -> None:
        with os.fdopen(r, "rb", buffering=0) as src, os.fdopen(relay_fd, "wb", buffering=0) as dst:
            for line in iter(src.readline, b""):
                if not line.startswith(_JVM_NOISE):
                    dst.write(line)

    threading.Thread(target=relay, name="spark-jvm-stderr", daemon=True).start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(restore_fd, 2)  # this process writes to the real stderr again; the JVM keeps the pipe
        os.close(restore_fd)


def main() -> None:
    from runtime.deploy.spark_session import delta_maven_coordinates

    coordinates = delta_maven_coordinates()
    jars = resolved_jars(coordinates)
    if jars is None:
        print(f"resolving the Spark jars of {coordinates} (once) ...", flush=True)
        jars = resolve(coordinates)
    print(f"Spark jars of {coordinates}: {len(jars)} files in {jars_dir(coordinates)}")


if __name__ == "__main__":
    main()
