from __future__ import annotations

import gc

import pytest

from runtime.core.gc_tuning import GcConfig, tune_gc
from runtime.taskmanager.runner import TaskManagerConfig

pytestmark = pytest.mark.unit


@pytest.fixture
def restore_gc():
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_task_managers_collect_less_often_by_default(restore_gc) -> None:
    cfg = TaskManagerConfig(tm_id="tm", jobmanager_host="127.0.0.1", jobmanager_port=1, secret="s")
    tune_gc(cfg.gc)
    assert gc.get_threshold() == (50_000, 20, 100)


def test_zero_keeps_the_interpreter_thresholds_and_negative_is_refused(restore_gc) -> None:
    gc.set_threshold(700, 10, 10)
    tune_gc(GcConfig(thresholds=(0, 0, 0)))
    assert gc.get_threshold() == (700, 10, 10)
    with pytest.raises(ValueError, match="gc thresholds must be >= 0"):
        tune_gc(GcConfig(thresholds=(-1, 10, 10)))
