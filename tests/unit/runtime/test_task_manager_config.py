from __future__ import annotations

import pytest

from runtime.core.errors import ConfigurationError
from runtime.taskmanager.runner import TaskManagerConfig, parse_config

pytestmark = pytest.mark.unit


def test_invalid_config_error_never_contains_the_secret() -> None:
    raw = '{"tm_id": "tm-1", "jobmanager_host": "127.0.0.1", "secret": "s3cr3t-value", "num_slots": "many"}'
    with pytest.raises(ConfigurationError) as info:
        parse_config(raw)
    text = str(info.value)
    assert "s3cr3t-value" not in text
    assert "jobmanager_port" in text and "num_slots" in text


def test_valid_config_round_trips_and_repr_hides_the_secret() -> None:
    cfg = TaskManagerConfig(tm_id="t", jobmanager_host="h", jobmanager_port=1, secret="s3cr3t-value")
    assert parse_config(cfg.model_dump_json()) == cfg
    assert "s3cr3t-value" not in repr(cfg)
