"""execution.target: executors found by name (Flink's PipelineExecutorServiceLoader), and the API
never importing the deploy layer."""
from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.execution import (
    DEFAULT_EXECUTION_TARGET,
    EXECUTION_TARGET_KEY,
    PipelineExecutorFactory,
    current_executor,
    executor_factory,
    known_execution_targets,
    register_executor_factory,
    unregister_executor_factory,
    use_executor,
)
from runtime.core.errors import ConfigurationError
from tests.unit.api.local_runner import LocalExecutor

pytestmark = pytest.mark.unit


class RecordingFactory:
    def __init__(self) -> None:
        self.configs: list[dict[str, str]] = []
        self.executor = LocalExecutor()

    def get_executor(self, config: Mapping[str, str]) -> Any:
        self.configs.append(dict(config))
        return self.executor


@pytest.fixture
def testing_target() -> Iterator[RecordingFactory]:
    factory = RecordingFactory()
    register_executor_factory("testing", factory)
    try:
        yield factory
    finally:
        unregister_executor_factory("testing")


def test_the_embedded_and_remote_targets_come_from_entry_points() -> None:
    assert DEFAULT_EXECUTION_TARGET == "embedded" and EXECUTION_TARGET_KEY == "execution.target"
    assert {"embedded", "remote"} <= set(known_execution_targets())
    factory = executor_factory("embedded")
    assert isinstance(factory, PipelineExecutorFactory)
    assert type(factory).__module__ == "runtime.deploy.embedded"
    executor = factory.get_executor({"execution.taskmanager.provider": "local"})
    from runtime.deploy.embedded import EmbeddedExecutor

    assert type(executor) is EmbeddedExecutor and executor.provider == "local"


def test_default_target_is_embedded() -> None:
    ex = current_executor({"execution.taskmanager.provider": "local"})  # nothing installed with use_executor
    assert type(ex).__name__ == "EmbeddedExecutor"


def test_unknown_target_lists_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"execution.target: unknown target 'yarn'; known targets: .*embedded.*remote"):
        current_executor({"execution.target": "yarn"})


def test_remote_target_names_its_key_when_no_cluster_is_reachable(tmp_path) -> None:
    with pytest.raises(ConfigurationError, match=r"execution.target 'remote'.*rest.address"):
        executor_factory("remote").get_executor({"rest.address": str(tmp_path / "nowhere")})


def test_execution_target_picks_a_registered_factory(testing_target: RecordingFactory) -> None:
    env = StreamExecutionEnvironment.get_execution_environment({"execution.target": "Testing"})
    assert env.from_collection([1, 2, 3]).map(lambda x: x + 1).execute_and_collect(limit=3) == [2, 3, 4]
    (cfg,) = testing_target.configs
    assert cfg["execution.target"] == "Testing"
    assert len(testing_target.executor.job_graphs) == 1


def test_use_executor_wins_over_execution_target(testing_target: RecordingFactory) -> None:
    installed = LocalExecutor()
    with use_executor(installed):
        env = StreamExecutionEnvironment.get_execution_environment({"execution.target": "testing"})
        env.from_collection([1]).print()
        env.execute("job")
    assert len(installed.job_graphs) == 1 and testing_target.configs == []


def test_registered_class_is_instantiated_and_bad_factories_are_named() -> None:
    register_executor_factory("by-class", RecordingFactory)
    register_executor_factory("broken", object())
    try:
        assert isinstance(executor_factory("by-class"), RecordingFactory)
        with pytest.raises(ConfigurationError, match="'broken' .* not a PipelineExecutorFactory"):
            executor_factory("broken")
    finally:
        unregister_executor_factory("by-class")
        unregister_executor_factory("broken")


def test_importing_the_api_does_not_import_the_deploy_layer() -> None:
    code = (
        "import sys\n"
        "import runtime.api, runtime.api.common, runtime.api.datastream, runtime.api.execution\n"
        "import runtime.api.common.restart_strategy, runtime.api.datastream.checkpoint_config\n"
        "import runtime.api.datastream.stream_execution_environment\n"
        "from runtime.api.datastream import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "env.from_collection([1]).print()\n"
        "env.get_job_graph('job')\n"
        "bad = sorted(m for m in sys.modules if m == 'runtime.deploy' or m.startswith('runtime.deploy.'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"runtime.api imported {out.stdout.strip()}"


def test_execution_module_has_no_deploy_reference_in_code() -> None:
    import ast
    import inspect

    import runtime.api.execution as execution

    tree = ast.parse(inspect.getsource(execution))
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    imports = [
        (n.module or "") if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in (n.names if isinstance(n, ast.Import) else [None])
    ]
    assert not [i for i in imports if "deploy" in i]
    docstring = ast.get_docstring(tree) or ""
    assert not [s for s in strings if "runtime.deploy" in s and s.strip() != docstring.strip()]
