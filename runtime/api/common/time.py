"""Time and Duration (pyflink.common.time): defined in `runtime.core.time`, low in the layers, so the state backends and the
TaskManager use them without loading the API; re-exported here at PyFlink's path."""
from runtime.core.time import (  # re-exported
    Duration,
    Time,
    to_millis,
)

__all__ = [
    "Duration",
    "Time",
    "to_millis",
]
