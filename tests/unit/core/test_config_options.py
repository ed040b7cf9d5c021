"""ConfigOption: each type's parser, defaults, deprecated keys, checks, and errors that name the
key, the bad value and what is allowed; the registry of every option."""
from __future__ import annotations

import enum
import pkgutil
import re
from pathlib import Path

import pytest

import runtime
import runtime.core.options as options_pkg
from runtime.core.config_options import ConfigOption, ConfigOptions
from runtime.core.errors import ConfigurationError, MillraceError
from runtime.core.options import FAMILIES, all_options, lookup
from runtime.core.options.checkpointing import CheckpointingSettings
from runtime.core.options.restart import (
    ExponentialDelaySettings,
    FixedDelaySettings,
    NoRestartSettings,
    RestartStrategySettings,
)
from runtime.core.options.task import TaskSettings

pytestmark = pytest.mark.unit


class Color(enum.Enum):
    RED = "RED"
    DARK_BLUE = "DARK_BLUE"


INT = ConfigOptions.key("t.int").int_type().default_value(3).with_description("an int")
FLOAT = ConfigOptions.key("t.float").float_type().default_value(0.5)
BOOL = ConfigOptions.key("t.bool").boolean_type().default_value(False)
STR = ConfigOptions.key("t.str").string_type().no_default_value()
DURATION = ConfigOptions.key("t.duration").duration_type().default_value(1_000)
MINUS_ONE = ConfigOptions.key("t.timeout").duration_type(minus_one=True).no_default_value()
MEMORY = ConfigOptions.key("t.memory").memory_type().default_value(64 << 20)
ENUM = ConfigOptions.key("t.enum").enum_type(("fork", "thread"), what="mode", aliases={"process": "fork"}).default_value("fork")
ENUM_CLASS = ConfigOptions.key("t.color").enum_class(Color, what="color").default_value(Color.RED)
LIST = ConfigOptions.key("t.list").int_type().as_list().default_value([])
CHECKED = ConfigOptions.key("t.checked").int_type().default_value(1).check(lambda n: n >= 1, "at least 1")
DEPRECATED = ConfigOptions.key("t.new").int_type().default_value(7).with_deprecated_keys("t.old", "t.older")


# -- each type -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "option, raw, value",
    [
        (INT, "42", 42), (INT, " -5 ", -5), (INT, 9, 9),
        (FLOAT, "1.25", 1.25), (FLOAT, "2", 2.0), (FLOAT, 3, 3.0),
        (BOOL, "true", True), (BOOL, "FALSE", False), (BOOL, "on", True), (BOOL, "0", False), (BOOL, True, True),
        (STR, "  /tmp/x ", "/tmp/x"),
        (DURATION, "500 ms", 500), (DURATION, "10 s", 10_000), (DURATION, "1 min", 60_000), (DURATION, "250", 250),
        (DURATION, 1200, 1200), (DURATION, "1.5 s", 1500),
        (MINUS_ONE, "-1", -1), (MINUS_ONE, "0", 0), (MINUS_ONE, "2 s", 2000),
        (MEMORY, "64mb", 64 << 20), (MEMORY, "16 mb", 16 << 20), (MEMORY, "512kb", 512 << 10), (MEMORY, "1 g", 1 << 30),
        (MEMORY, "100", 100), (MEMORY, 4096, 4096),
        (ENUM, "thread", "thread"), (ENUM, "FORK", "fork"), (ENUM, "process", "fork"),
        (ENUM_CLASS, "dark-blue", Color.DARK_BLUE), (ENUM_CLASS, "RED", Color.RED), (ENUM_CLASS, Color.RED, Color.RED),
        (LIST, "1;2; 3", [1, 2, 3]), (LIST, [4, "5"], [4, 5]),
    ],
)
def test_each_type_parses_its_values(option: ConfigOption, raw: object, value: object) -> None:
    assert option.get({option.key: raw}) == value


@pytest.mark.parametrize(
    "option, raw, message",
    [
        (INT, "three", "t.int: 'three' is not an integer"),
        (INT, True, "t.int: True is not an integer"),
        (FLOAT, "x", "t.float: 'x' is not a number"),
        (FLOAT, "nan", "t.float: 'nan' is not a finite number"),
        (BOOL, "maybe", "t.bool: expected true or false, got 'maybe'"),
        (DURATION, "soon", "t.duration: duration 'soon' is not a duration; use a number with an optional unit"),
        (DURATION, "10 fortnights", "t.duration: duration '10 fortnights' has an unknown unit 'fortnights'"),
        (DURATION, "-1", "t.duration: duration '-1' is not a duration"),
        (MINUS_ONE, "-2", "t.timeout: duration '-2' is not a duration"),
        (MEMORY, "lots", "t.memory: 'lots' is not a memory size (e.g. '16 mb', '512 kb', '1 gb' or a number of bytes)"),
        (MEMORY, "5 parsecs", "t.memory: '5 parsecs' is not a memory size"),
        (ENUM, "fibre", "t.enum: unknown mode 'fibre'; use one of fork, thread"),
        (ENUM_CLASS, "GREEN", "t.color: unknown color 'GREEN'; use one of RED, DARK_BLUE"),
        (LIST, "1;x", "t.list: 'x' is not an integer"),
        (CHECKED, "0", "t.checked: 0 is not allowed; it must be at least 1"),
    ],
)
def test_a_bad_value_is_a_configuration_error_naming_key_value_and_what_is_allowed(option: ConfigOption, raw: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match="^" + re.escape(message)) as caught:
        option.get({option.key: raw})
    assert isinstance(caught.value, MillraceError)


# -- defaults, unset values, deprecated keys ---------------------------------------------------
def test_unset_or_blank_gives_the_default() -> None:
    for config in ({}, {"t.int": ""}, {"t.int": "   "}, {"t.int": None}, {"other": "1"}):
        assert INT.get(config) == 3
        assert not INT.is_set(config)
    assert STR.get({}) is None and STR.default_string() is None
    assert INT.get_optional({}) is None and INT.get_optional({"t.int": "4"}) == 4
    assert (DURATION.default_string(), MEMORY.default_string(), BOOL.default_string(), ENUM_CLASS.default_string()) == (
        "1 s", "64 mb", "false", "RED"
    )


def test_deprecated_keys_are_read_in_order_when_the_key_is_absent() -> None:
    assert DEPRECATED.get({}) == 7
    assert DEPRECATED.get({"t.older": "1"}) == 1
    assert DEPRECATED.get({"t.old": "2", "t.older": "1"}) == 2
    assert DEPRECATED.get({"t.new": "3", "t.old": "2"}) == 3
    assert DEPRECATED.find({"t.older": "1"}) == ("t.older", "1")


def test_an_error_in_a_deprecated_key_names_that_key() -> None:
    with pytest.raises(ConfigurationError, match=r"^t\.old: 'x' is not an integer"):
        DEPRECATED.get({"t.old": "x"})


def test_checks_apply_to_values_from_code_too() -> None:
    assert CHECKED.validate(5) == 5
    with pytest.raises(ConfigurationError, match=r"^t\.checked: -3 is not allowed; it must be at least 1$"):
        CHECKED.validate(-3)


def test_builder_steps_return_new_options() -> None:
    described = INT.with_description("  a   described\n   int ")
    assert described.description == "a described int" and INT.description == "an int"
    assert INT.with_deprecated_keys("x").deprecated_keys == ("x",) and INT.deprecated_keys == ()


def test_to_string_is_what_get_reads_back() -> None:
    for option, value in ((INT, 5), (BOOL, True), (DURATION, 90_000), (MEMORY, 3 << 20), (ENUM_CLASS, Color.DARK_BLUE), (LIST, [1, 2])):
        assert option.get({option.key: option.to_string(value)}) == value


def test_an_option_key_must_be_clean() -> None:
    with pytest.raises(ValueError):
        ConfigOptions.key(" a.b")


# -- the registry ----------------------------------------------------------------------------
def test_every_family_module_is_registered() -> None:
    modules = {m.name for m in pkgutil.iter_modules(options_pkg.__path__)} - {"docs"}
    assert modules == set(FAMILIES)


def test_every_option_is_declared_once_with_a_description() -> None:
    options = all_options()  # raises on a key declared twice
    assert len({o.key for o in options}) == len(options)
    assert all(o.description for o in options), [o.key for o in options if not o.description]
    assert lookup("execution.checkpointing.timeout") is not None
    assert lookup("state.backend") is lookup("state.backend.type")  # a deprecated key finds its option
    assert lookup("no.such.key") is None


def test_no_module_declares_a_key_string_of_its_own() -> None:
    """Every `*_KEY` constant is an option's key (`X_KEY = OPTION.key`), never a string literal."""
    root = Path(runtime.__file__).parent
    literal = re.compile(r"^\s*[A-Z_]+_KEYS?\s*(?::[^=\n]*)?=\s*\(?\s*[\"']", re.MULTILINE)
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py") if literal.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


# -- the family parsers ----------------------------------------------------------------------
def test_checkpointing_settings_parse_the_family_once() -> None:
    s = CheckpointingSettings.from_config({
        "execution.checkpointing.interval": "10 s", "execution.checkpointing.mode": "at-least-once",
        "execution.checkpointing.checkpoints-after-tasks-finish.enabled": "false", "state.checkpoints.num-retained": "0",
    })
    assert (s.enabled, s.interval_ms, s.mode.value, s.checkpoints_after_tasks_finish, s.num_retained) == (True, 10_000, "AT_LEAST_ONCE", False, 1)
    assert not CheckpointingSettings.from_config({"execution.checkpointing.interval": "-1"}).enabled
    with pytest.raises(ConfigurationError, match=r"execution.checkpointing.interval: '5 ms' is too short"):
        CheckpointingSettings.from_config({"execution.checkpointing.interval": "5 ms"})
    with pytest.raises(ConfigurationError, match=r"execution.checkpointing.timeout: 5 is not allowed; it must be at least 10 ms"):
        CheckpointingSettings.from_config({"execution.checkpointing.timeout": "5"})


def test_restart_settings_are_pure_and_pick_the_effective_strategy() -> None:
    assert RestartStrategySettings.from_config({}).effective() == NoRestartSettings()
    assert RestartStrategySettings.from_config({}).effective(batch=True) == FixedDelaySettings(attempts=3, delay_ms=1000)
    checkpointed = RestartStrategySettings.from_config({
        "execution.checkpointing.interval": "1 s", "restart-strategy.exponential-delay.initial-backoff": "5 s",
    })
    assert checkpointed.effective() == ExponentialDelaySettings()  # defaults, not stray per-strategy keys
    s = RestartStrategySettings.from_config({"restart-strategy": "fixeddelay", "restart-strategy.fixed-delay.delay": "2 s",
                                             "jobmanager.execution.failover-strategy": "FULL"})
    assert (s.strategy, s.failover_strategy) == (FixedDelaySettings(attempts=1, delay_ms=2000), "full")
    with pytest.raises(ConfigurationError, match=r"^restart-strategy: unknown restart strategy 'often'; use one of disable, fixed-delay"):
        RestartStrategySettings.from_config({"restart-strategy": "often"})
    with pytest.raises(ConfigurationError, match=r"max-backoff: 10 is not allowed; it must be at least the initial backoff \(100 ms\)"):
        ExponentialDelaySettings(initial_ms=100, max_ms=10)


def test_task_settings_read_what_a_task_needs() -> None:
    t = TaskSettings.from_config({
        "execution.buffer-timeout": "-1", "execution.checkpointing.mode": "AT_LEAST_ONCE",
        "execution.checkpointing.timeout": "1 min", "state.snapshot.async-mode": "thread",
        "execution.end-of-input.savepoint": "true", "task.cancellation.timeout.s": "2",
    })
    assert (t.buffer_timeout_ms, t.checkpointing_mode.value, t.checkpoint_timeout_ms, t.fork_snapshots, t.end_of_input_savepoint) == (
        -1, "AT_LEAST_ONCE", 60_000, False, True
    )
    assert (t.cancellation_timeout_s, t.cancellation_interval_s) == (2.0, 0.5)
    assert TaskSettings.from_config({}).buffer_timeout_ms is None
    with pytest.raises(ConfigurationError, match=r"^execution.buffer-timeout: duration '-5' is not a duration"):
        TaskSettings.from_config({"execution.buffer-timeout": "-5"})
    with pytest.raises(ConfigurationError, match=r"^state.snapshot.async-mode: unknown snapshot mode 'process'; use one of auto, fork, thread"):
        TaskSettings.from_config({"state.snapshot.async-mode": "process"})


def test_auto_snapshot_mode_forks_only_after_a_large_state_file() -> None:
    auto = TaskSettings.from_config({"state.snapshot.fork-threshold": "64 kb"})
    assert auto.snapshot_async_mode == "auto" and auto.fork_threshold_bytes == 64 << 10
    # nothing written yet: fork (the state may be large); then by the last file's size
    assert [auto.fork_snapshot_of(n) for n in (None, 0, 64 << 10, (64 << 10) + 1)] == [True, False, False, True]
    fork = TaskSettings.from_config({"state.snapshot.async-mode": "fork"})
    thread = TaskSettings.from_config({"state.snapshot.async-mode": "thread"})
    assert [fork.fork_snapshot_of(0), thread.fork_snapshot_of(None), thread.fork_snapshot_of(1 << 30)] == [True, False, False]
    with pytest.raises(ConfigurationError, match=r"^state.snapshot.fork-threshold: '-1 kb' is not a memory size"):
        TaskSettings.from_config({"state.snapshot.fork-threshold": "-1 kb"})
