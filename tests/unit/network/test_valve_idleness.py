"""The valve with idle channels (Flink's StatusWatermarkValve with WatermarkStatus)."""
from __future__ import annotations

import pytest

from runtime.api.operators.base import StreamOperator
from runtime.core.records import ACTIVE, IDLE, Watermark
from runtime.taskmanager.network.serialization import decode, encode
from runtime.taskmanager.network.valve import StatusWatermarkValve
from tests.harness import CollectingOutput, make_context

pytestmark = pytest.mark.unit


def test_valve_statuses_step_by_step() -> None:
    v = StatusWatermarkValve(2)
    assert v.input_watermark(0, 10) is None
    assert v.input_status(1, True) == (10, None)  # 1 idle: 0 alone decides; the gate is not idle
    assert v.input_watermark(0, 20) == 20
    assert v.input_status(0, True) == (None, True)  # both idle: the gate is idle
    assert v.input_status(1, False) == (None, False)  # 1 active again, but at MIN: not aligned, holds nothing back
    assert v.input_watermark(1, 15) is None
    assert v.input_watermark(1, 25) == 25  # caught up: counts again
    assert v.input_status(1, True) == (None, True) and v.idle
    assert v.channel_finished(0) is None


def test_watermark_status_crosses_the_network_and_operators_forward_it() -> None:
    assert decode(encode(IDLE)) == IDLE and decode(encode(ACTIVE)) == ACTIVE

    class TwoInputs(StreamOperator):
        num_inputs = 2

    op, out = TwoInputs(), CollectingOutput()
    statuses: list = []
    out.emit_watermark_status = statuses.append  # type: ignore[attr-defined]  # the harness output gains a recorder for watermark statuses
    op.setup(make_context(out))
    op.process_watermark(Watermark(5), 0)
    assert out.watermarks == []  # input 1 holds back
    op.process_watermark_status(IDLE, 1)
    assert out.watermarks == [5] and statuses == []  # input 1 idle: input 0 decides
    op.process_watermark_status(IDLE, 0)
    assert statuses == [IDLE]  # both idle: the output is idle
    op.process_watermark_status(ACTIVE, 0)
    assert statuses == [IDLE, ACTIVE]
