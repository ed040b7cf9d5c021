"""DataStream.print(): Flink's PrintSinkFunction (prefix "id:i> " with the 1-based subtask
number when parallelism > 1)."""
from __future__ import annotations

import sys
from decimal import Decimal
from typing import Any

from runtime.api.connectors.base import Sink
from runtime.api.operators.base import StreamOperator
from runtime.core.records import RecordBatch
from runtime.core.row import Row


class PrintSinkOperator(StreamOperator):
    def __init__(self, sink_identifier: str | None = None, stderr: bool = False) -> None:
        super().__init__()
        self.sink_identifier = sink_identifier
        self.stderr = stderr
        self._prefix = ""

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
        stream.write("".join(f"{p}{_fmt(v)}\n" for v in batch.rows()))
        stream.flush()


def _fmt(v: Any) -> str:
    """What PyFlink's print() shows: a Row as Flink's Row.toString ("+I[a, 1, null]"), anything else as str()."""
    return _java_string(v) if isinstance(v, Row) else str(v)


def _java_string(v: Any) -> str:
    """A field as Java's toString shows it inside a Row (Flink: RowUtils.deepToStringRow)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, Row):
        return "+I[" + ", ".join(_java_string(x) for x in v) + "]"  # every Row here is an insert
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_java_string(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_java_string(k)}={_java_string(x)}" for k, x in v.items()) + "}"
    if isinstance(v, float):
        return _java_double(v)
    return str(v)


def _java_double(v: float) -> str:
    """Double.toString: '1.0', '0.001', '1.0E7', '1.0E-5', 'NaN', 'Infinity' (shortest round-trip digits)."""
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0 or 1e-3 <= abs(v) < 1e7:
        text = repr(v)
        return text if "e" not in text else format(v, "f")
    sign, digits, exp = Decimal(repr(v)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    exponent = len(digits) + int(exp) - 1
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{exponent}"


class PrintSink(Sink):
    def __init__(self, sink_identifier: str | None = None, stderr: bool = False) -> None:
        self.sink_identifier = sink_identifier
        self.stderr = stderr

    def create_writer(self) -> PrintSinkOperator:
        return PrintSinkOperator(self.sink_identifier, self.stderr)

    def default_name(self) -> str:
        return "Print to Std. Err" if self.stderr else "Print to Std. Out"
