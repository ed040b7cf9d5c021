"""pyflink.datastream.connectors.number_seq.NumberSequenceSource."""
from runtime.api.connectors.generator import NumberSequenceSource

__all__ = ["NumberSequenceSource"]
