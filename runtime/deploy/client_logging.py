"""The client's log file: where Millrace logs in a program's own process (`python job.py`, `millrace run`).

Flink's client writes `log/flink-<user>-client-<host>.log`; Millrace writes
`<env.log.dir>/millrace-client-<host>.log`, by default `$MILLRACE_HOME/log/` (beside the session
cluster's `jobmanager-session.log`). Every line carries the process id and the logger (component),
and the job's lines their job id. See runtime.core.logs for what stays on the console.
"""
from __future__ import annotations

import dataclasses
import logging
import socket
from collections.abc import Mapping
from pathlib import Path

from runtime.core.logs import FrameworkLogging, configure_framework_logging, framework_logging
from runtime.core.options import logs as log_options
from runtime.deploy.cluster_file import millrace_home


def client_log_file(log_dir: str | None = None) -> Path:
    folder = Path(log_dir).expanduser() if log_dir else millrace_home() / "log"
    return folder / f"millrace-client-{socket.gethostname()}.log"


def configure_client_logging(log_level: str = "WARNING", propagate: bool = False, log_dir: str | None = None) -> FrameworkLogging:
    """The CLI's set-up: its --log-level is what reaches stderr; the file gets INFO and up (or DEBUG)."""
    console = logging.getLevelName(log_level.upper())
    if not isinstance(console, int):
        raise ValueError(f"unknown log level {log_level!r}")
    settings = FrameworkLogging(client_log_file(log_dir), console_level=console, file_level=min(console, logging.INFO), propagate=propagate)
    configure_framework_logging(settings)
    return settings


def ensure_client_logging(config: Mapping[str, str]) -> None:
    """Called by the client-side executors as a job is submitted from this process, with the job's
    configuration: Millrace's loggers leave the program's handlers alone from here on. The CLI (or an
    earlier job) may have configured them already: then only `env.log.propagate: true` and another
    `env.log.dir` change what it set."""
    propagate = log_options.LOG_PROPAGATE.get(config)
    log_dir = log_options.LOG_DIR.get(config)
    current = framework_logging()
    if current is None:
        configure_framework_logging(FrameworkLogging(client_log_file(log_dir), propagate=propagate))
        return
    wanted = current
    if propagate and not current.propagate:
        wanted = dataclasses.replace(wanted, propagate=True)
    if log_dir and wanted.log_file != client_log_file(log_dir):
        wanted = dataclasses.replace(wanted, log_file=client_log_file(log_dir))
    if wanted != current:
        configure_framework_logging(wanted)
