"""Combines per-channel watermarks of an input gate into the task's input watermark.

Flink: StatusWatermarkValve (without the idleness/WatermarkStatus part: a finished channel is
simply left out of the minimum, like Flink treating an ended input as MAX_WATERMARK).
"""
from __future__ import annotations

from runtime.core.records import MIN_TIMESTAMP


class StatusWatermarkValve:
    """Combined watermark = min over channels that have not finished; it only ever advances."""

    __slots__ = ("_watermarks", "_finished", "_last_output", "_num_active")

    def __init__(self, num_channels: int) -> None:
        if num_channels < 1:
            raise ValueError(f"a valve needs at least one channel, got {num_channels}")
        self._watermarks = [MIN_TIMESTAMP] * num_channels
        self._finished = [False] * num_channels
        self._num_active = num_channels
        self._last_output = MIN_TIMESTAMP

    @property
    def current_watermark(self) -> int:
        """The last combined watermark returned (MIN_TIMESTAMP before any)."""
        return self._last_output

    def channel_watermark(self, channel: int) -> int:
        return self._watermarks[channel]

    def input_watermark(self, channel: int, timestamp: int) -> int | None:
        """A watermark arrived on `channel`; the new combined watermark if it advanced."""
        if self._finished[channel] or timestamp <= self._watermarks[channel]:
            return None  # why: per-channel watermarks never go back (Flink ignores regressions)
        self._watermarks[channel] = timestamp
        return self._advance()

    def channel_finished(self, channel: int) -> int | None:
        """`channel` got EndOfPartition: drop it from the minimum; new combined if it advanced."""
        if self._finished[channel]:
            return None
        self._finished[channel] = True
        self._num_active -= 1
        return self._advance()

    def _advance(self) -> int | None:
        if self._num_active == 0:
            return None  # why: nothing left to hold back; each input's final watermark came in-band
        combined = min(w for w, f in zip(self._watermarks, self._finished) if not f)
        if combined > self._last_output:
            self._last_output = combined
            return combined
        return None
