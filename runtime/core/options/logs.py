"""Where Millrace logs in a program's own process (Flink's env.log.* options); see runtime.core.logs."""
from __future__ import annotations

from runtime.core.config_options import ConfigOptions

TITLE = "Logging"

LOG_DIR = (
    ConfigOptions.key("env.log.dir").string_type().no_default_value()
    .with_description(
        "The folder of the client's log file (millrace-client-<host>.log). Unset: $MILLRACE_HOME/log."
    )
)

LOG_PROPAGATE = (
    ConfigOptions.key("env.log.propagate").boolean_type().default_value(False)
    .with_description(
        "Millrace: the framework's log records also reach the root logger's handlers (the program's), "
        "as `millrace --log-propagate` does. false: they go to the log file, warnings also to stderr."
    )
)


__all__ = ["LOG_DIR", "LOG_PROPAGATE"]
