"""Millrace's own loggers, kept apart from the program's logging.

Under PyFlink the framework logs on the Java side, into log files: a program that calls
`logging.basicConfig(stream=sys.stdout, level=logging.INFO)` sees its own lines and its records
on stdout, nothing else. Millrace runs in the program's process (the embedded JobManager, the
client), so its loggers (`runtime.*`, `millrace.*`, and py4j's when Spark is used) get handlers of
their own and do not propagate to the root logger: INFO and up go to a log file, WARNING and up
also to stderr (what Python shows when nothing is configured). `env.log.propagate: true`, or
`millrace --log-propagate`, passes them to the root logger's handlers again.

Processes Millrace owns (a session cluster's JobManager, TaskManagers) configure the root logger
themselves and never call `configure_framework_logging`: there every logger propagates.
"""
from __future__ import annotations

import logging
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from runtime.core.options import logs as log_options

FRAMEWORK_LOGGERS = ("runtime", "millrace", "py4j")
# the option keys under their old names (declared in runtime.core.options.logs)
LOG_DIR_KEY = log_options.LOG_DIR.key  # Flink's key: the folder of the log files
LOG_PROPAGATE_KEY = log_options.LOG_PROPAGATE.key  # Millrace's: framework logs also reach the root logger's handlers
LOG_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"  # a log file may be shared by processes

@dataclass(frozen=True)
class FrameworkLogging:
    """Where Millrace's loggers write in a program's (or the CLI's) process."""

    log_file: Path | None  # None: no file (it could not be created)
    console_level: int = logging.WARNING  # to stderr, unless propagate
    file_level: int = logging.INFO
    propagate: bool = False  # True: the root logger's handlers (the program's) get every record too


_lock = threading.Lock()
_current: FrameworkLogging | None = None
_installed: list[tuple[logging.Logger, logging.Handler]] = []


def parse_flag(key: str, value: str | bool) -> bool:
    """A boolean configuration value ("true"/"false", as Flink writes them), read as the boolean
    options read theirs; a ConfigurationError naming `key` otherwise."""
    return bool(log_options.LOG_PROPAGATE.parse(value, key))


def framework_logging() -> FrameworkLogging | None:
    """The settings in force in this process, or None while Millrace's loggers are left as Python has them."""
    return _current


def configure_framework_logging(settings: FrameworkLogging) -> None:
    """Give Millrace's loggers their own handlers (replacing those installed before) and set propagation."""
    global _current
    handlers: list[logging.Handler] = []
    if settings.log_file is not None:
        try:
            settings.log_file.parent.mkdir(parents=True, exist_ok=True)
            file_handler: logging.Handler = logging.FileHandler(settings.log_file, encoding="utf-8", delay=True)
        except OSError as e:  # a read-only home must not stop the job: say so once, keep the console
            print(f"millrace: cannot write the log file {settings.log_file} ({e}); logs go to stderr only", file=sys.stderr)
            settings = FrameworkLogging(None, settings.console_level, settings.file_level, settings.propagate)
        else:
            file_handler.setLevel(settings.file_level)
            file_handler.setFormatter(logging.Formatter(LOG_FORMAT))
            handlers.append(file_handler)
    if not settings.propagate:  # propagating: the root's handlers show them; a console of ours would double them
        console = logging.StreamHandler(sys.stderr)
        console.setLevel(settings.console_level)
        console.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handlers.append(console)
    levels = [settings.console_level, settings.file_level if settings.log_file is not None else settings.console_level]
    with _lock:
        _remove_installed()
        for name in FRAMEWORK_LOGGERS:
            logger = logging.getLogger(name)
            logger.setLevel(min(levels))
            logger.propagate = settings.propagate
            for handler in handlers:
                logger.addHandler(handler)
                _installed.append((logger, handler))
        _current = settings


def reset_framework_logging() -> None:
    """Back to Python's defaults: no handlers of ours, propagation on (tests)."""
    global _current
    with _lock:
        _remove_installed()
        for name in FRAMEWORK_LOGGERS:
            logger = logging.getLogger(name)
            logger.setLevel(logging.NOTSET)
            logger.propagate = True
        _current = None


def _remove_installed() -> None:
    for logger, handler in _installed:
        logger.removeHandler(handler)
    for handler in {id(h): h for _, h in _installed}.values():
        handler.close()
    _installed.clear()
