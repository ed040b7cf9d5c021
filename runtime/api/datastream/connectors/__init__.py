"""PyFlink's pyflink.datastream.connectors path; the implementations live in runtime.api.connectors."""
from runtime.api.connectors import CollectionSource, DataGeneratorSource, DeltaSink, NumberSequenceSource, PrintSink, Sink, Source

__all__ = ["CollectionSource", "DataGeneratorSource", "DeltaSink", "NumberSequenceSource", "PrintSink", "Sink", "Source"]
