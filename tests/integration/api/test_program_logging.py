"""Millrace's log lines stay out of a program's own logging (issue 24): under PyFlink the framework logs
on the Java side, into files, so a program that logs to stdout sees only its records and its own lines."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROGRAM = Path(__file__).parent / "pyflink_programs" / "logging_to_stdout.py"
RECORDS = ["a=1", "b=2", "c=3"]
OWN_LINE = "the program's own line"


def _run(argv: list[str], home: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, MILLRACE_HOME=str(home))
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_a_program_logging_to_stdout_sees_only_its_records_and_millraces_lines_go_to_the_log_file(tmp_path: Path) -> None:
    proc = _run([sys.executable, str(PROGRAM), "execution.taskmanager.provider=local"], tmp_path)
    assert proc.stdout.splitlines() == RECORDS + [OWN_LINE]
    (log_file,) = (tmp_path / "log").glob("millrace-client-*.log")
    text = log_file.read_text()
    assert "INFO runtime.jobmanager" in text and "job status -> FINISHED" in text
    assert "job status" not in proc.stderr  # INFO stays out of stderr too; warnings would be there


def test_env_log_propagate_shows_millraces_lines_through_the_programs_handlers(tmp_path: Path) -> None:
    proc = _run([sys.executable, str(PROGRAM), "execution.taskmanager.provider=local", "env.log.propagate=true"], tmp_path)
    lines = proc.stdout.splitlines()
    assert any("job status -> FINISHED" in line for line in lines)
    assert [line for line in lines if line in RECORDS] == RECORDS and lines[-1] == OWN_LINE


def test_millrace_run_keeps_the_programs_stdout_to_its_records_unless_log_propagate(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "runtime.cli"]
    proc = _run([*cli, "run", str(PROGRAM), "--provider", "local"], tmp_path)
    # the CLI's own report (plan, status changes, figures) is printed, never a log record
    assert [line for line in proc.stdout.splitlines() if line in RECORDS or line == OWN_LINE] == RECORDS + [OWN_LINE]
    assert "INFO" not in proc.stdout and "INFO" not in proc.stderr
    proc = _run([*cli, "--log-propagate", "run", str(PROGRAM), "--provider", "local"], tmp_path)
    assert "job status -> RUNNING" in proc.stdout  # through the program's basicConfig handler
