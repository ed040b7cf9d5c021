"""Millrace's loggers apart from the program's (runtime.core.logs, runtime.deploy.client_logging)."""
from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from runtime.core.errors import ConfigurationError
from runtime.core.logs import FrameworkLogging, configure_framework_logging, parse_flag, reset_framework_logging
from runtime.deploy.client_logging import ensure_client_logging


@pytest.fixture
def root_to_buffer():
    """The program's handler: what `logging.basicConfig(stream=...)` installs on the root logger."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield buffer
    root.removeHandler(handler)
    root.setLevel(old_level)
    reset_framework_logging()


def test_framework_records_go_to_the_file_not_the_programs_handlers(tmp_path: Path, root_to_buffer: io.StringIO) -> None:
    configure_framework_logging(FrameworkLogging(tmp_path / "log" / "client.log"))
    logging.getLogger("runtime.jobmanager.x").info("framework line")
    logging.getLogger("py4j.clientserver").info("py4j line")
    logging.getLogger("program").info("program line")
    assert root_to_buffer.getvalue().splitlines() == ["program line"]
    text = (tmp_path / "log" / "client.log").read_text()
    assert "INFO runtime.jobmanager.x: framework line" in text and "py4j line" in text and "program line" not in text


def test_propagate_passes_them_to_the_root_handlers_again(tmp_path: Path, root_to_buffer: io.StringIO) -> None:
    configure_framework_logging(FrameworkLogging(tmp_path / "client.log"))
    ensure_client_logging({"env.log.propagate": "true"})
    logging.getLogger("runtime.x").info("framework line")
    assert root_to_buffer.getvalue().splitlines() == ["framework line"]


def test_a_bad_flag_names_its_key() -> None:
    assert parse_flag("env.log.propagate", "TRUE") is True and parse_flag("env.log.propagate", "false") is False
    with pytest.raises(ConfigurationError, match="env.log.propagate: expected true or false, got 'maybe'"):
        parse_flag("env.log.propagate", "maybe")
