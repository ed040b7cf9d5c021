"""Where TaskManagers come from and the cluster modes (embedded mini cluster, session, application).

The executors for `execution.target` are registered as entry points of the group
`millrace.executors` (pyproject.toml) and found by runtime.api.execution:
- embedded: runtime.deploy.embedded:EmbeddedExecutorFactory (the default)
- remote:   runtime.deploy:RemoteExecutorFactory, a running session cluster over REST

This module stays import-light: the factories import their implementation when asked for an executor.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.core.options import deployment as deployment_options

# the option keys under their old names (declared in runtime.core.options.deployment)
REST_ADDRESS_KEY = deployment_options.REST_ADDRESS.key  # URL, cluster file / folder, or unset: the cluster under MILLRACE_HOME
ATTACHED_KEY = deployment_options.ATTACHED.key  # Flink's option: "false" submits and returns at once


class RemoteExecutorFactory:
    """`execution.target: remote`: submit to a running session cluster (Flink's RemoteExecutorFactory).

    `rest.address` is the cluster's URL (token from $MILLRACE_TOKEN or its cluster file), a path
    to a cluster file or its folder, or unset for the session cluster recorded under MILLRACE_HOME.
    """

    name = "remote"

    def get_executor(self, config: Mapping[str, str]) -> Any:
        from runtime.core.errors import ConfigurationError
        from runtime.deploy.cluster_file import resolve_cluster
        from runtime.deploy.remote import RestExecutor

        address = deployment_options.REST_ADDRESS.get(config)
        attached = deployment_options.ATTACHED.get(config)
        try:
            endpoint = resolve_cluster(address)
        except ConfigurationError as e:
            raise ConfigurationError(
                f"execution.target 'remote': cannot reach a cluster through {REST_ADDRESS_KEY}={address!r}: {e}"
            ) from e
        return RestExecutor(endpoint, detached=not attached)


__all__ = ["ATTACHED_KEY", "REST_ADDRESS_KEY", "RemoteExecutorFactory"]
