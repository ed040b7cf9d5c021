"""The one source operator that hosts any FLIP-27 reader (Flink's SourceOperator).

It creates the source's reader at open, gives it the splits restored from a checkpoint, registers
with the enumerator, and relays the enumerator's events (splits, no more splits, source events) to
the reader on the task thread. A checkpoint stores the reader's unfinished splits as operator list
state `"splits"`; a restore at another parallelism deals them out again.

Event time is per split (Flink: split-local watermarks): the watermark strategy's timestamp
assigner runs on each batch, each split keeps its largest timestamp, and the operator's watermark
is the smallest over the splits it holds, less the out-of-orderness bound; a finished split no
longer holds it back, and with no split held the finished ones' largest timestamp counts.

A reader without splits is not idle by itself: it holds the downstream watermark at its own until
it gets newer data. Were it idle, a split handed to it later (older than what another reader
already read) would be late downstream, and an enumerator that hands out splits in order (the
continuous Delta source: by version) could not promise on-time data. `with_idleness(t)` in the
strategy makes a reader that emitted nothing for t idle, accepting that (Flink's semantics).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from runtime.api.connectors.source.api import (
    SPLITS_STATE,
    AddSplitEvent,
    NoMoreSplitsEvent,
    ReaderRegistrationEvent,
    RequestSplitEvent,
    SourceEventWrapper,
    SourceReader,
    split_id_of,
)
from runtime.core.checkpoint import OperatorSnapshot, StateInitializationContext
from runtime.core.errors import ConfigurationError, InvalidProgramError
from runtime.core.operators import InputStatus, OperatorContext, Output, SourceOperator
from runtime.core.options import execution as execution_options
from runtime.core.records import MAX_TIMESTAMP, MIN_TIMESTAMP, ColumnBatch, ObjectBatch, RecordBatch, Watermark, WatermarkStatus


class _ReaderContext:
    """SourceReaderContext of one subtask attempt."""

    def __init__(self, op: SourceReaderOperator) -> None:
        self._op = op

    @property
    def index_of_subtask(self) -> int:
        assert self._op.ctx is not None
        return self._op.ctx.subtask_index

    @property
    def current_parallelism(self) -> int:
        assert self._op.ctx is not None
        return self._op.ctx.parallelism

    @property
    def attempt_number(self) -> int:
        assert self._op.ctx is not None
        return self._op.ctx.attempt_number

    @property
    def max_parallelism(self) -> int:
        assert self._op.ctx is not None
        return self._op.ctx.max_parallelism

    @property
    def config(self) -> Mapping[str, str]:
        assert self._op.ctx is not None
        return self._op.ctx.config

    def send_split_request(self) -> None:
        self._op.send(RequestSplitEvent())

    def send_source_event_to_coordinator(self, event: Any) -> None:
        self._op.send(SourceEventWrapper(event))


def _with_timestamps(batch: RecordBatch, ts: np.ndarray) -> RecordBatch:
    if isinstance(batch, ColumnBatch):
        return ColumnBatch(batch.columns, ts)
    return ObjectBatch(batch.rows(), ts)


class _ActivatingOutput:
    """The operator's output: a watermark marks an idle output active first (Flink's
    WatermarkToDataOutput), so the final watermark of a drained or ended source is never ignored
    downstream as one of an idle channel."""

    def __init__(self, inner: Output, op: SourceReaderOperator) -> None:
        self._inner, self._op = inner, op

    def emit(self, batch: RecordBatch) -> None:
        self._inner.emit(batch)

    def emit_watermark(self, watermark: Watermark) -> None:
        if self._op._idle:
            self._op._set_idle(False)
        self._inner.emit_watermark(watermark)

    def emit_side(self, tag: str, batch: RecordBatch) -> None:
        self._inner.emit_side(tag, batch)

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        self._inner.emit_watermark_status(status)


class SourceReaderOperator(SourceOperator):
    def __init__(self, source: Any, watermark_strategy: Any = None) -> None:
        super().__init__()
        self.source = source
        self.strategy = watermark_strategy
        self.reader: SourceReader[Any] | None = None
        self._restored: list[Any] | None = None
        self._split_max: dict[str, int] = {}  # split id -> its largest timestamp (MIN_TIMESTAMP: none yet)
        self._released_max = MIN_TIMESTAMP  # the largest timestamp of the finished splits
        self._emitted = MIN_TIMESTAMP
        self._idle = False
        self._interval_ms = 0
        self._delay_ms = 0
        self._idleness_ms = 0
        self._last_record_ms = 0

    # --- lifecycle --------------------------------------------------------------------------------
    def setup(self, ctx: OperatorContext) -> None:
        super().setup(ctx)
        self.output = _ActivatingOutput(ctx.output, self)

    def initialize_state(self, context: StateInitializationContext) -> None:
        self._restored = list(context.operator_lists.get(SPLITS_STATE, [])) if context.is_restored else None

    def open(self) -> None:
        super().open()
        assert self.ctx is not None
        if self.strategy is not None and self.strategy.generates_watermarks:
            self._delay_ms = int(self.strategy.max_out_of_orderness_ms)
            try:
                self._interval_ms = execution_options.AUTO_WATERMARK_INTERVAL.get(self.ctx.config)
            except ConfigurationError as e:
                raise InvalidProgramError(str(e)) from None
            if self._interval_ms > 0:
                self._schedule_watermark()
        self._idleness_ms = int(getattr(self.strategy, "idleness_ms", 0) or 0)
        self._last_record_ms = self._now_ms()
        self.reader = self.source.create_reader(_ReaderContext(self))
        if self._restored:
            self._add_splits(self._restored)
        self._restored = None
        self.send(ReaderRegistrationEvent(self.ctx.subtask_index, self.ctx.attempt_number))
        self.reader.start()

    def send(self, event: Any) -> None:
        assert self.ctx is not None
        self.ctx.event_gateway.send_event_to_coordinator(event)

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
        super().close()

    # --- events from the enumerator ----------------------------------------------------------------
    def handle_operator_event(self, event: Any) -> None:
        assert self.reader is not None
        if isinstance(event, AddSplitEvent):
            self._add_splits(event.splits)
        elif isinstance(event, NoMoreSplitsEvent):
            self.reader.notify_no_more_splits()
        elif isinstance(event, SourceEventWrapper):
            self.reader.handle_source_events(event.event)
        else:
            super().handle_operator_event(event)

    def _add_splits(self, splits: list[Any]) -> None:
        assert self.reader is not None
        self.reader.add_splits(list(splits))  # first: the reader checks that they are its splits
        if self.reader.split_local_watermarks:
            for split in splits:
                self._split_max.setdefault(split_id_of(split), MIN_TIMESTAMP)

    # --- data ---------------------------------------------------------------------------------------
    def emit_next(self) -> InputStatus:
        assert self.reader is not None
        status = self.reader.poll_next(self)
        if status is InputStatus.NOTHING_AVAILABLE and self._idleness_ms and not self._idle:
            if self._now_ms() - self._last_record_ms >= self._idleness_ms:
                self._emit_progress()  # what was read allows, before going quiet
                self._set_idle(True)
        return status

    def _now_ms(self) -> int:
        assert self.ctx is not None
        return int(self.ctx.processing_time_service.current_processing_time())

    def collect(self, batch: RecordBatch, split_id: str | None = None) -> None:
        """ReaderOutput.collect: timestamps from the strategy's assigner, then on."""
        assert self.output is not None
        if len(batch) == 0:
            return
        if self._idleness_ms:
            self._last_record_ms = self._now_ms()
        if self._idle:
            self._set_idle(False)
        strategy = self.strategy
        assigner = strategy.timestamp_assigner if strategy is not None else None
        ts = None
        if assigner is not None:
            ts = assigner.extract_timestamps(batch)
            batch = _with_timestamps(batch, ts)
        elif strategy is not None and strategy.generates_watermarks:
            ts = batch.timestamps
        self.output.emit(batch)
        if ts is not None and len(ts) and strategy is not None and strategy.generates_watermarks:
            key = split_id if split_id is not None else ""
            top = int(np.max(ts))
            if top > self._split_max.get(key, MIN_TIMESTAMP):
                self._split_max[key] = top
            if self._interval_ms == 0:
                self._emit_progress()

    def release_split(self, split_id: str) -> None:
        """ReaderOutput.release_split: the finished split no longer holds back the watermark."""
        done = self._split_max.pop(split_id, MIN_TIMESTAMP)
        self._released_max = max(self._released_max, done)
        if self._interval_ms == 0 and self.strategy is not None and self.strategy.generates_watermarks:
            self._emit_progress()

    # --- watermarks ---------------------------------------------------------------------------------
    def _schedule_watermark(self) -> None:
        assert self.ctx is not None
        pts = self.ctx.processing_time_service
        pts.register_timer(pts.current_processing_time() + self._interval_ms, self._on_periodic)

    def _on_periodic(self, _ts: int) -> None:
        if self._emitted == MAX_TIMESTAMP:
            return
        if not self._idle:  # an idle reader flushed its progress when it went idle
            self._emit_progress()
        self._schedule_watermark()

    def _emit_progress(self) -> None:
        # the splits held hold it back (one without records yet: entirely); with none held, the
        # finished ones' largest timestamp is the progress
        low = min(self._split_max.values()) if self._split_max else self._released_max
        if low == MIN_TIMESTAMP:
            return
        wm = low - self._delay_ms - 1
        if wm > self._emitted:
            self._emitted = wm
            assert self.output is not None
            self.output.emit_watermark(Watermark(wm))

    def _set_idle(self, idle: bool) -> None:
        self._idle = idle
        assert self.output is not None
        self.output.emit_watermark_status(WatermarkStatus(idle))

    # --- checkpoints ----------------------------------------------------------------------------------
    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        assert self.reader is not None
        return OperatorSnapshot(operator_lists={SPLITS_STATE: list(self.reader.snapshot_state(checkpoint_id))})

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        if self.reader is not None:
            self.reader.notify_checkpoint_complete(checkpoint_id)
