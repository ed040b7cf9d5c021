"""pyflink.datastream.execution_mode.RuntimeExecutionMode."""
from runtime.api.common.configuration import RuntimeExecutionMode

__all__ = ["RuntimeExecutionMode"]
