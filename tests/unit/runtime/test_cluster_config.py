"""Cluster configuration is nested models handed down whole: ClusterConfig holds the MiniCluster's,
which holds the ResourceManager's; the flat names of the CLI and older callers still land there."""
from __future__ import annotations

import pytest

from runtime.core.errors import ConfigurationError
from runtime.deploy.cluster_entrypoint import ClusterConfig
from runtime.deploy.embedded import EmbeddedExecutor
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.jobmanager.resource_manager import ResourceManagerConfig
from runtime.rpc.messages import ResourceProfile

pytestmark = pytest.mark.unit


def test_a_session_cluster_gets_its_defaults_in_the_nested_models() -> None:
    c = ClusterConfig(home="/tmp/h")
    rm = c.cluster.resource_manager
    assert (c.cluster.provider, rm.initial_task_managers, rm.min_task_managers, rm.max_task_managers, rm.idle_timeout_s) == ("spark", 1, 1, 8, 30.0)
    assert c.spark_master_url() == "local[8]"


def test_the_cli_flags_land_in_the_nested_models_and_survive_the_trip_to_the_cluster_process() -> None:
    c = ClusterConfig(
        mode="session", home="/tmp/h", provider="local", task_managers=2, slots_per_task_manager=3, max_task_managers=5,
        log_level="WARNING", host="0.0.0.0", rest_port=8081, idle_timeout_s=None, rpc_port=6123,
    )
    rm = c.cluster.resource_manager
    assert (c.cluster.provider, c.cluster.host, c.cluster.port, c.cluster.tm_log_level, c.log_level) == ("local", "0.0.0.0", 6123, "WARNING", "WARNING")
    assert (rm.initial_task_managers, rm.min_task_managers, rm.slots_per_tm, rm.max_task_managers, rm.idle_timeout_s) == (2, 2, 3, 5, None)
    assert ClusterConfig.model_validate_json(c.model_dump_json()) == c  # MILLRACE_CLUSTER_CONFIG


def test_per_job_clusters_start_no_task_managers_up_front() -> None:
    cluster = ClusterConfig(home="/tmp/h", task_managers=3).cluster.with_task_managers_on_demand()
    rm = cluster.resource_manager
    assert (rm.initial_task_managers, rm.min_task_managers, rm.idle_timeout_s, rm.max_task_managers) == (0, 0, None, 8)


def test_the_mini_cluster_hands_the_resource_manager_its_settings_whole() -> None:
    profile = ResourceProfile(cpu_cores=1, task_heap_mb=64, managed_memory_mb=32)
    config = MiniClusterConfig(provider="local", slots_per_task_manager=2, max_task_managers=3, heartbeat_timeout_ms=5000,
                               start_retry_interval_s=0.25, task_manager_profile=profile)
    assert config.resource_manager == ResourceManagerConfig(
        slots_per_tm=2, max_task_managers=3, heartbeat_timeout_ms=5000, start_retry_interval_s=0.25, task_manager_profile=profile
    )
    nested = MiniClusterConfig(provider="local", resource_manager=config.resource_manager)
    assert nested == config
    rm = MiniCluster(config).resource_manager_config()
    assert rm.model_copy(update={"max_task_manager_profile": None}) == config.resource_manager
    assert rm.max_task_manager_profile is not None and profile.fits_in(rm.max_task_manager_profile)  # this machine's


def test_inconsistent_resource_manager_settings_are_refused_wherever_they_are_given() -> None:
    with pytest.raises(ConfigurationError, match=r"min_task_managers \(3\) exceeds max_task_managers \(2\)"):
        MiniClusterConfig(min_task_managers=3, max_task_managers=2)
    with pytest.raises(ConfigurationError, match=r"min_task_managers \(4\) exceeds max_task_managers \(2\)"):
        ClusterConfig(home="/tmp/h", task_managers=4, max_task_managers=2)


def test_the_embedded_executor_runs_its_cluster_from_one_model() -> None:
    ex = EmbeddedExecutor(provider="local", tm_log_level="ERROR")
    assert (ex.provider, ex.tm_log_level, ex.cluster_config.echo_task_manager_stdout) == ("local", "ERROR", True)
    given = MiniClusterConfig(provider="local", slots_per_task_manager=2)
    assert EmbeddedExecutor(cluster=given).cluster_config.resource_manager.slots_per_tm == 2


def test_a_misspelt_cluster_setting_is_an_error_naming_it_not_silently_the_default() -> None:
    from pydantic import ValidationError

    assert MiniClusterConfig(slots_per_task_manager=4).resource_manager.slots_per_tm == 4
    assert MiniClusterConfig(slots_per_tm=3).resource_manager.slots_per_tm == 3  # the nested field's own name, flat
    with pytest.raises(ValidationError, match="slots_per_taskmanager"):
        MiniClusterConfig(slots_per_taskmanager=4)
    with pytest.raises(ValidationError, match="evenly_spread_slots"):
        ResourceManagerConfig(evenly_spread_slots=True)
