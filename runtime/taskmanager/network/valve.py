"""Combines per-channel watermarks of an input gate into the task's input watermark.

Flink: StatusWatermarkValve. A finished channel is left out of the minimum (Flink treats an ended
input as MAX_WATERMARK). An idle channel (WatermarkStatus IDLE, from `with_idleness`) is left out
too; when every channel left is idle the gate is idle (the operator is told, and tells its
outputs). A channel that becomes active again counts only once its watermark has caught up with
the combined one (Flink: it is not "aligned" before), so the combined watermark never goes back.
"""
from __future__ import annotations

from runtime.core.records import MIN_TIMESTAMP


class StatusWatermarkValve:
    """Combined watermark = min over active, aligned channels that have not finished; it only advances."""

    __slots__ = ("_watermarks", "_finished", "_idle", "_aligned", "_last_output", "_num_active", "idle")

    def __init__(self, num_channels: int) -> None:
        if num_channels < 1:
            raise ValueError(f"a valve needs at least one channel, got {num_channels}")
        self._watermarks = [MIN_TIMESTAMP] * num_channels
        self._finished = [False] * num_channels
        self._idle = [False] * num_channels
        self._aligned = [True] * num_channels
        self._num_active = num_channels
        self._last_output = MIN_TIMESTAMP
        self.idle = False  # every channel still open is idle

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
        if not self._aligned[channel] and timestamp >= self._last_output:
            self._aligned[channel] = True
        return self._advance()

    def input_status(self, channel: int, idle: bool) -> tuple[int | None, bool | None]:
        """A WatermarkStatus arrived on `channel`: (new combined watermark or None, the gate's new
        idleness if it changed or None)."""
        if self._finished[channel] or self._idle[channel] == idle:
            return None, None
        self._idle[channel] = idle
        if not idle:
            self._aligned[channel] = self._watermarks[channel] >= self._last_output
        was_idle = self.idle
        self.idle = all(i or f for i, f in zip(self._idle, self._finished)) and self._num_active > 0
        return self._advance(), (self.idle if self.idle != was_idle else None)

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
        counted = [w for w, f, i, a in zip(self._watermarks, self._finished, self._idle, self._aligned) if not (f or i) and a]
        if not counted:
            return None  # all idle: nothing to say about event time
        combined = min(counted)
        if combined > self._last_output:
            self._last_output = combined
            return combined
        return None
