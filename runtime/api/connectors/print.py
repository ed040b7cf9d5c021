"""DataStream.print(): Flink's PrintSinkFunction (prefix "id:i> " with the 1-based subtask
number when parallelism > 1); each record as PyFlink shows one of the stream's type (print_format)."""
from __future__ import annotations

import sys
from typing import Any

from runtime.api.connectors.base import Sink
from runtime.api.connectors.print_format import formatter_for
from runtime.api.operators.base import StreamOperator
from runtime.core.records import RecordBatch


class PrintSinkOperator(StreamOperator):
    def __init__(self, sink_identifier: str | None = None, stderr: bool = False, type_info: Any = None) -> None:
        super().__init__()
        self.sink_identifier = sink_identifier
        self.stderr = stderr
        self.type_info = type_info  # the printed stream's; None: untyped (PyFlink's pickled objects)
        self._prefix = ""
        self._format = formatter_for(type_info)

    def open(self) -> None:
        assert self.ctx is not None
        # Flink's PrintSinkOutputWriter.open: "<identifier>:<subtask+1>> " pieces as applicable
        prefix = self.sink_identifier or ""
        if self.ctx.parallelism > 1:
            prefix = f"{prefix}:{self.ctx.subtask_index + 1}" if prefix else str(self.ctx.subtask_index + 1)
        self._prefix = f"{prefix}> " if prefix else ""

    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        stream = sys.stderr if self.stderr else sys.stdout
        p = self._prefix
        # one write per batch: lines of different subtasks in one process do not interleave mid-batch
        fmt = self._format
        stream.write("".join(f"{p}{fmt(v)}\n" for v in batch.rows()))
        stream.flush()


class PrintSink(Sink):
    def __init__(self, sink_identifier: str | None = None, stderr: bool = False, type_info: Any = None) -> None:
        self.sink_identifier = sink_identifier
        self.stderr = stderr
        self.type_info = type_info

    def create_writer(self) -> PrintSinkOperator:
        return PrintSinkOperator(self.sink_identifier, self.stderr, self.type_info)

    def default_name(self) -> str:
        return "Print to Std. Err" if self.stderr else "Print to Std. Out"
