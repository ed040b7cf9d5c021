"""The coordinator that hosts a Sink V2 committer on the JobMaster (Flink's CommitterOperator and
global committer, as an operator coordinator: it sees every subtask's committables of a checkpoint).

It keeps each subtask's tail per attempt: at the end the newest attempt's counts and older ones
are discarded; an attempt the scheduler gave up on (a speculative one that lost) never counts
(winner-only commits). It hands the committer each completed checkpoint's committables, a
restored checkpoint's on restart (then the clean-up of the restarted subtasks), FLIP-147's final
committables of finished subtasks, and at a job's end either the tails (finished) or everything it
holds to delete (not finished).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from runtime.api.connectors.sink.api import Committer, FinalCommittables, SinkTailEvent, unwrap
from runtime.core.errors import StorageError
from runtime.core.operators import OperatorCoordinator, OperatorCoordinatorContext


class CommitterCoordinator(OperatorCoordinator):
    supports_concurrent_execution_attempts = True  # only the winning attempt's output is committed
    # test hook (a settable callable, house style): called with the checkpoint id before each checkpoint commit
    before_commit: ClassVar[Callable[[int], None] | None] = None

    def __init__(self, context: OperatorCoordinatorContext, committer: Committer[Any]) -> None:
        super().__init__(context)
        self.committer = committer
        self._tails: dict[int, dict[int, list[Any]]] = {}  # subtask -> attempt -> its tail
        self._discarded: set[tuple[int, int]] = set()  # (subtask, attempt) whose output is never committed
        self._superseded: list[Any] = []
        self._last_checkpoint: int | None = None
        self._finished = False

    def start(self) -> None:
        self.committer.start()

    def handle_event_from_operator(self, subtask: int, attempt: int, event: Any) -> None:
        if not isinstance(event, SinkTailEvent):
            return
        if (subtask, attempt) in self._discarded:
            self._superseded.extend(event.committables)  # a late tail of an attempt that lost
            return
        reports = self._tails.setdefault(subtask, {})
        self._superseded.extend(reports.get(attempt, []))
        reports[attempt] = list(event.committables)

    def execution_attempt_failed(self, subtask: int, attempt: int) -> None:
        self._discarded.add((subtask, attempt))
        self._superseded.extend(self._tails.get(subtask, {}).pop(attempt, []))

    def _newest_tails(self) -> dict[int, list[Any]]:
        out: dict[int, list[Any]] = {}
        for subtask, reports in self._tails.items():
            if not reports:
                continue
            newest = max(reports)
            for attempt in [a for a in reports if a != newest]:
                self._superseded.extend(reports.pop(attempt))
            out[subtask] = reports[newest]
        return out

    def final_committables(self, subtasks: set[int]) -> dict[int, list[Any]]:
        out: dict[int, list[Any]] = {}
        for s in subtasks:
            reports = self._tails.get(s)
            if reports:
                out[s] = [FinalCommittables(list(reports[max(reports)]))]
        return out

    @staticmethod
    def _by_subtask(committables: list[Any]) -> list[list[Any]]:
        return [unwrap(per)[0] for per in committables]

    def notify_checkpoint_complete(self, checkpoint_id: int, committables: list[Any]) -> None:
        hook = type(self).before_commit  # through the class: a plain function, not a bound method
        if hook is not None:
            hook(checkpoint_id)
        self.committer.commit(checkpoint_id, self._by_subtask(committables))
        self._last_checkpoint = checkpoint_id

    def reset_to_checkpoint(self, checkpoint_id: int | None, committables: list[Any], subtasks: set[int] | None = None) -> None:
        if checkpoint_id is not None:
            self.committer.restore(checkpoint_id, self._by_subtask(committables))
            self._last_checkpoint = checkpoint_id
        restarted = set(range(self.parallelism)) if subtasks is None else set(subtasks)
        for s in restarted:
            self._tails.pop(s, None)  # the new attempts report their tails again
        if checkpoint_id is not None:
            for s, per in enumerate(committables):
                items, final = unwrap(per)
                if s in restarted and final:
                    # finished at that checkpoint (FLIP-147): deployed as finished, it reports no tail again
                    self._tails[s] = {-1: items}
        self.committer.clean_up(restarted)

    def retain_for_restore(self, checkpoint_id: int, committables: list[Any]) -> None:
        self.committer.retain([c for per in self._by_subtask(committables) for c in per])

    def on_job_finished(self) -> dict[str, Any]:
        tails = self._newest_tails()
        missing = sorted(set(range(self.parallelism)) - set(tails))
        if missing:
            raise StorageError(f"job {self.job_id}: sink '{self.operator_name}' finished without the last committables of subtask(s) {missing}")
        result = self.committer.commit_end(self._last_checkpoint, [tails[s] for s in sorted(tails)])
        self._finished = True
        superseded, self._superseded = self._superseded, []
        self.committer.discard(superseded)
        return result

    def close(self) -> None:
        uncommitted = [] if self._finished else [c for reports in self._tails.values() for cs in reports.values() for c in cs] + self._superseded
        try:
            self.committer.close(self._finished, uncommitted)
        finally:
            self._tails.clear()
            self._superseded = []


class CommitterCoordinatorProvider:
    """Creates the coordinator of a Sink V2 sink on the JobMaster; pickled with the sink."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink

    def create(self, context: OperatorCoordinatorContext) -> CommitterCoordinator:
        return CommitterCoordinator(context, self.sink.create_committer(context))
