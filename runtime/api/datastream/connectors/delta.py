"""Delta Lake sink (Millrace; PyFlink has no Delta connector in its DataStream API)."""
from runtime.api.connectors.delta import DeltaSink

__all__ = ["DeltaSink"]
