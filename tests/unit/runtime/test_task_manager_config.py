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


def test_resolved_spark_jars_count_only_when_every_listed_jar_is_there(tmp_path, monkeypatch) -> None:
    import sys

    from runtime.deploy import spark_jars

    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    coords = "io.delta:delta-spark_4.2_2.13:4.4.0"
    assert spark_jars.resolved_jars(coords) is None  # set-up not run: the session falls back to spark.jars.packages
    base = spark_jars.jars_dir(coords)
    base.mkdir(parents=True)
    jar = base / "a.jar"
    (base / spark_jars.MANIFEST).write_text(f"{jar}\n")
    assert spark_jars.resolved_jars(coords) is None  # listed but gone (a cleaned cache)
    jar.write_bytes(b"PK")
    assert spark_jars.resolved_jars(coords) == [str(jar)]
    assert "log4j2.configurationFile=file:" in spark_jars.quiet_log4j_options()
