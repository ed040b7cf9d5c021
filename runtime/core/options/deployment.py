"""Where a program's jobs go and where their TaskManagers come from (Flink's DeploymentOptions and
RestOptions; the provider and Spark master are Millrace's).
"""
from __future__ import annotations

from runtime.core.config_options import ConfigOptions

TITLE = "Deployment"

DEFAULT_EXECUTION_TARGET = "embedded"
PROVIDERS = ("spark", "local")

EXECUTION_TARGET = (
    ConfigOptions.key("execution.target").string_type().default_value(DEFAULT_EXECUTION_TARGET)
    .with_description(
        "The executor a program's execute() submits to, by the name it is registered under in the "
        "`millrace.executors` entry points: embedded (a cluster in this process for the job), remote "
        "(a running session cluster), or a registered one of your own."
    )
)

ATTACHED = (
    ConfigOptions.key("execution.attached").boolean_type().default_value(True)
    .with_description("Remote target: false submits the job and returns at once; true waits for its result.")
)

REST_ADDRESS = (
    ConfigOptions.key("rest.address").string_type().no_default_value()
    .with_description(
        "Remote target: the session cluster's REST URL (token from $MILLRACE_TOKEN or its cluster file), "
        "a cluster file or its folder. Unset: the session cluster recorded under $MILLRACE_HOME."
    )
)

TASK_MANAGER_PROVIDER = (
    ConfigOptions.key("execution.taskmanager.provider").enum_type(PROVIDERS, what="TaskManager provider")
    .default_value("spark")
    .with_description("Embedded target: TaskManagers on Spark executors (spark) or as local processes (local).")
)

SPARK_MASTER = (
    ConfigOptions.key("spark.master").string_type().no_default_value()
    .with_description("Embedded target with Spark TaskManagers: the Spark master URL. Unset: local[N] for a job of N slots.")
)


__all__ = ["ATTACHED", "DEFAULT_EXECUTION_TARGET", "EXECUTION_TARGET", "PROVIDERS", "REST_ADDRESS", "SPARK_MASTER", "TASK_MANAGER_PROVIDER"]
