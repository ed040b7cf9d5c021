"""execute_and_collect(): Flink's CollectSinkOperator + CollectSinkOperatorCoordinator +
CollectResultIterator, simplified.

- The sink subtask sends its rows to the coordinator as events: (subtask, attempt, seq, rows)
  where `seq` is the per-attempt index of the first row.
- The coordinator appends accepted rows to one result list. A restarted attempt of a subtask
  replays from its start; rows whose per-attempt index is below what that subtask already
  delivered are skipped, so a deterministic replay delivers nothing twice.
- The client asks `{"offset": k}` and gets the rows from k on plus whether the job finished;
  it advances its offset by what it received, so nothing is lost or duplicated on the way.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from runtime.api.connectors.base import Sink
from runtime.api.operators.base import StreamOperator
from runtime.core.operators import FixedCoordinatorContext, OperatorCoordinator, OperatorCoordinatorContext
from runtime.core.records import RecordBatch

MAX_ROWS_PER_RESPONSE = 65536


class CollectSinkOperator(StreamOperator):
    def __init__(self) -> None:
        super().__init__()
        self._sent = 0

    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        if len(batch) == 0:
            return
        assert self.ctx is not None
        rows = list(batch.rows())
        self.ctx.event_gateway.send_event_to_coordinator(
            {"type": "rows", "subtask": self.ctx.subtask_index, "attempt": self.ctx.attempt_number, "seq": self._sent, "rows": rows}
        )
        self._sent += len(rows)


class CollectSinkCoordinator(OperatorCoordinator):
    """Runs on the JobMaster; buffers results for the client."""

    def __init__(self, context: OperatorCoordinatorContext | None = None) -> None:
        super().__init__(context or FixedCoordinatorContext("", "Collect Sink", 1))
        self._lock = threading.Lock()  # events and client requests may come on different threads
        self._results: list[Any] = []
        self._delivered: dict[int, int] = {}  # subtask -> rows accepted so far
        self._attempt: dict[int, int] = {}  # subtask -> newest attempt seen
        self._finished = False
        self._closed = False

    def start(self) -> None:
        pass

    def handle_event_from_operator(self, subtask: int, attempt: int, event: Any) -> None:
        if not isinstance(event, dict) or event.get("type") != "rows":
            return
        rows: list[Any] = event["rows"]
        seq: int = event["seq"]
        with self._lock:
            if attempt < self._attempt.get(subtask, attempt):
                return  # a late event of a superseded attempt
            self._attempt[subtask] = attempt
            have = self._delivered.get(subtask, 0)
            skip = max(0, have - seq)  # replayed prefix of a restarted attempt
            if skip < len(rows):
                new = rows[skip:]
                self._results.extend(new)
                self._delivered[subtask] = seq + len(rows)

    def handle_coordination_request(self, request: Any) -> dict[str, Any]:
        offset = int(request.get("offset", 0)) if isinstance(request, dict) else 0
        limit = int(request.get("max_rows", MAX_ROWS_PER_RESPONSE)) if isinstance(request, dict) else MAX_ROWS_PER_RESPONSE
        with self._lock:
            rows = self._results[offset : offset + limit]
            end = offset + len(rows)
            return {"rows": rows, "next_offset": end, "finished": self._finished and end >= len(self._results)}

    def on_job_finished(self) -> dict[str, Any]:
        with self._lock:
            self._finished = True
            return {"collected_rows": len(self._results)}

    def close(self) -> None:
        self._closed = True

    @property
    def num_results(self) -> int:
        with self._lock:
            return len(self._results)


class CollectSinkCoordinatorProvider:
    def create(self, context: OperatorCoordinatorContext) -> CollectSinkCoordinator:
        return CollectSinkCoordinator(context)


class CollectSink(Sink):
    def create_writer(self) -> CollectSinkOperator:
        return CollectSinkOperator()

    def coordinator_provider(self) -> CollectSinkCoordinatorProvider:
        return CollectSinkCoordinatorProvider()

    def default_name(self) -> str:
        return "Collect Sink"


class CloseableIterator:
    """PyFlink's CloseableIterator over a running job's collected results.

    Polls the collect coordinator through the JobClient. Ends when the job FINISHED and every
    row was fetched; raises JobExecutionError if the job failed. close() cancels a running job
    (like Flink's CollectResultIterator.close).
    """

    def __init__(self, job_client: Any, node_id: int, poll_interval_s: float = 0.005, max_poll_interval_s: float = 0.1) -> None:
        self.job_client = job_client
        self.node_id = node_id
        self._offset = 0
        self._buffer: list[Any] = []
        self._pos = 0
        self._done = False
        self._closed = False
        self._poll = poll_interval_s
        self._max_poll = max_poll_interval_s

    def __iter__(self) -> CloseableIterator:
        return self

    def __next__(self) -> Any:
        while self._pos >= len(self._buffer):
            if self._done or self._closed:
                raise StopIteration
            self._fetch()
        v = self._buffer[self._pos]
        self._pos += 1
        return v

    def next(self) -> Any:
        return self.__next__()

    def _fetch(self) -> None:
        delay = self._poll
        while True:
            resp = self._request()
            if resp is None:  # coordinator gone: the job ended
                self._end_of_job()
                return
            rows = resp["rows"]
            self._offset = resp["next_offset"]
            if rows:
                self._buffer = rows
                self._pos = 0
                self._done = bool(resp.get("finished"))
                return
            if resp.get("finished"):
                self._done = True
                self._raise_if_failed()
                return
            if self.job_client.get_job_status().is_globally_terminal:
                # one more request: results that arrived just before the end
                last = self._request()
                if last is not None and last["rows"]:
                    self._buffer, self._pos, self._offset = last["rows"], 0, last["next_offset"]
                    return
                self._end_of_job()
                return
            time.sleep(delay)
            delay = min(self._max_poll, delay * 2)

    def _request(self) -> dict[str, Any] | None:
        try:
            return self.job_client.send_coordination_request(self.node_id, {"offset": self._offset})
        except Exception:
            if self.job_client.get_job_status().is_globally_terminal:
                return None
            raise

    def _end_of_job(self) -> None:
        self._done = True
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        # raises JobExecutionError (with the cause) unless the job FINISHED
        self.job_client.get_job_execution_result()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if not self._done and not self.job_client.get_job_status().is_globally_terminal:
                self.job_client.cancel()
        finally:
            close = getattr(self.job_client, "close", None)
            if close is not None:
                close()

    def __enter__(self) -> CloseableIterator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def collect_rows(it: Iterator[Any], limit: int) -> list[Any]:
    out: list[Any] = []
    for v in it:
        out.append(v)
        if len(out) >= limit:
            break
    return out
