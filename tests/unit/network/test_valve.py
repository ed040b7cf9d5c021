from __future__ import annotations

import pytest

from runtime.taskmanager.network.valve import StatusWatermarkValve

pytestmark = pytest.mark.unit


def test_combined_is_min_and_only_advances() -> None:
    v = StatusWatermarkValve(3)
    assert v.input_watermark(0, 10) is None
    assert v.input_watermark(1, 5) is None
    assert v.input_watermark(2, 7) == 5
    assert v.input_watermark(1, 20) == 7
    assert v.input_watermark(1, 15) is None  # regression on a channel is ignored
    assert v.channel_watermark(1) == 20
    assert v.input_watermark(2, 30) == 10
    assert v.current_watermark == 10


def test_finished_channels_leave_the_minimum() -> None:
    v = StatusWatermarkValve(2)
    assert v.input_watermark(0, 100) is None
    assert v.channel_finished(1) == 100
    assert v.channel_finished(1) is None
    assert v.input_watermark(0, 150) == 150
    assert v.input_watermark(1, 500) is None  # finished channel
    assert v.channel_finished(0) is None
    assert v.current_watermark == 150


def test_single_channel() -> None:
    v = StatusWatermarkValve(1)
    assert v.input_watermark(0, 1) == 1
    assert v.input_watermark(0, 1) is None
    with pytest.raises(ValueError):
        StatusWatermarkValve(0)
