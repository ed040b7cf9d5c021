from __future__ import annotations

import pytest

from runtime.taskmanager.mailbox import TaskMailbox

pytestmark = pytest.mark.unit


def test_timers_fire_in_time_order_and_cancelled_ones_do_not() -> None:
    now = [100.0]
    mb = TaskMailbox(clock=lambda: now[0])
    fired: list[int] = []
    mb.register_timer(100_300, fired.append)
    h = mb.register_timer(100_200, fired.append)
    mb.register_timer(100_100, fired.append)
    h.cancel()
    assert mb.run_due() == 0
    assert mb.seconds_until_next(5) == pytest.approx(0.1)
    now[0] = 100.35
    assert mb.run_due() == 2
    assert fired == [100_100, 100_300]
