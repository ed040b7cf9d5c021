"""`millrace info`: the rendering (a pure function of the REST bodies) and the command over a test-double client."""
from __future__ import annotations

import argparse
from typing import Any

import pytest

from runtime import cli
from runtime.rest import models as rm
from runtime.rest.client import RestError
from runtime.rpc import messages as m
from tests.unit.rest._fault_tolerance import LOST, checkpoint_statistics_message, failed_job_details, job_exceptions_message


def _details() -> rm.JobDetails:
    return rm.job_details(failed_job_details(), now_ms=6_000)


def _exceptions(history: m.JobExceptionsMessage | None = None) -> rm.JobExceptions:
    return rm.job_exceptions(failed_job_details(), history or job_exceptions_message())


def test_info_shows_checkpoints_and_exceptions_compactly() -> None:
    text = cli.format_job_info(_details(), rm.checkpointing_statistics(checkpoint_statistics_message()), _exceptions())
    lines = text.splitlines()
    assert lines[0].startswith("Job j1 'ft': FAILED")
    start = lines.index("Checkpoints: every 1.0 s, EXACTLY_ONCE, stored in /warehouse/_checkpoints/j1")
    assert lines[start + 1] == "  1 completed, 1 failed, 1 in progress (3 triggered), restored 1 time (latest from #1)"
    assert lines[start + 2] == "  latest completed: #1, acknowledged in 150 ms, committed in 162 ms, 3.0 MiB, /warehouse/_checkpoints/j1"
    assert lines[start + 3].startswith("  last failure: #2 at ") and lines[start + 3].endswith(": checkpoint 2 expired before completing")
    exc = lines.index("Exceptions: 1 restart, restart strategy fixed-delay (1 attempts, 100 ms); newest first:")
    newest, oldest = lines[exc + 1], lines[exc + 2]
    # time, name and the first line of the message, task, TaskManager
    assert newest.endswith("ValueError: record 7 is poisoned (task Map (1/2)#1, TaskManager tm-2)"), newest
    assert oldest.endswith("TaskManagerLostError: TaskManager tm-1 is gone (task Map (2/2)#0, TaskManager tm-1) [+1 concurrent]"), oldest
    assert lines[-2:] == ["Root cause: record 7 is poisoned", "  batch 0, row 7 (restart strategy fixed-delay (1 attempts, 100 ms) exhausted after 1 restarts)"]
    assert "Traceback" not in text and max(len(line) for line in lines) < 200


def test_info_without_checkpointing_or_failures() -> None:
    details = rm.job_details(failed_job_details(error=None), now_ms=6_000)
    no_checkpoints = rm.checkpointing_statistics(m.CheckpointStatisticsMessage(job_id="j1", enabled=False))
    no_failures = rm.job_exceptions(failed_job_details(error=None), m.JobExceptionsMessage(job_id="j1", restart_strategy="none"))
    lines = cli.format_job_info(details, no_checkpoints, no_failures).splitlines()
    assert "Checkpoints: disabled (enable them with env.enable_checkpointing(interval_ms))" in lines
    assert "Exceptions: 0 restarts, restart strategy none; no failures" in lines
    assert not any(line.startswith("Root cause") for line in lines)


def test_info_shows_the_five_newest_exceptions_and_how_many_more() -> None:
    history = m.JobExceptionsMessage(
        job_id="j1", num_restarts=7, restart_strategy="fixed-delay (9 attempts, 0 ms)",
        entries=[m.ExceptionHistoryEntryMessage(timestamp_ms=1_000 * (i + 1), error=LOST.model_copy(update={"message": f"lost #{i}"})) for i in range(7)],
    )
    lines = cli.format_job_info(_details(), None, rm.job_exceptions(failed_job_details(error=None), history)).splitlines()
    shown = [line for line in lines if "TaskManagerLostError" in line]
    assert [line.split("lost ")[1].split(" ")[0] for line in shown] == ["#6", "#5", "#4", "#3", "#2"]
    assert "  ... 2 older (all of them: GET /jobs/j1/exceptions)" in lines
    assert not any(line.startswith("Checkpoints") for line in lines)


class TestingRestClient:
    """RestClusterClient double: answers from the models given; a missing one raises the RestError given."""

    __test__ = False

    def __init__(self, **answers: Any) -> None:
        self.answers = answers

    def _answer(self, name: str) -> Any:
        answer = self.answers[name]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def job_details(self, job_id: str) -> Any:
        return self._answer("job_details")

    def job_checkpoints(self, job_id: str) -> Any:
        return self._answer("job_checkpoints")

    def job_exceptions(self, job_id: str) -> Any:
        return self._answer("job_exceptions")


def _run_info(monkeypatch: pytest.MonkeyPatch, client: TestingRestClient) -> int:
    monkeypatch.setattr(cli, "_client", lambda args: client)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["info", "j1", "--cluster", "http://127.0.0.1:1"])
    return int(exit_info.value.code)


def test_info_command_prints_the_sections_and_says_which_are_unavailable(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    client = TestingRestClient(
        job_details=_details(),
        job_checkpoints=RestError("no such resource: GET /jobs/j1/checkpoints (see /openapi.json)", status=404),
        job_exceptions=_exceptions(),
    )
    assert _run_info(monkeypatch, client) == 0
    out = capsys.readouterr().out
    assert "Checkpoints: unavailable (no such resource: GET /jobs/j1/checkpoints (see /openapi.json))" in out
    assert "Exceptions: 1 restart" in out


def test_info_of_an_unknown_job_is_a_message_not_a_traceback(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    client = TestingRestClient(job_details=RestError("unknown job id j1", status=404))
    assert _run_info(monkeypatch, client) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == "error: unknown job id j1" and "Traceback" not in captured.err + captured.out


def test_info_parser_still_takes_a_job_id_and_cluster() -> None:
    args = cli.build_parser().parse_args(["info", "abc", "--cluster", "x"])
    assert isinstance(args, argparse.Namespace) and (args.job_id, args.cluster) == ("abc", "x")
