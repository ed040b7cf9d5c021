"""pyflink.common.types: Row."""
from runtime.core.row import Row

__all__ = ["Row"]
