"""PyFlink's pyflink.datastream.connectors path; the implementations live in runtime.api.connectors."""
from runtime.api.connectors import CollectionSource, DataGeneratorSource, DeltaSink, NumberSequenceSource, PrintSink, Sink, Source
from runtime.api.connectors.sink import DeliveryGuarantee

__all__ = ["CollectionSource", "DataGeneratorSource", "DeliveryGuarantee", "DeltaSink", "NumberSequenceSource", "PrintSink", "Sink", "Source"]
