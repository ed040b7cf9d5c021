"""Connectors: sources (collection, data generator, number sequence) and sinks (print, collect, Delta)."""
from runtime.api.connectors.base import Sink, Source
from runtime.api.connectors.collection import CollectionSource
from runtime.api.connectors.delta import DeltaSink
from runtime.api.connectors.generator import DataGeneratorSource, NumberSequenceSource
from runtime.api.connectors.print import PrintSink

__all__ = ["CollectionSource", "DataGeneratorSource", "DeltaSink", "NumberSequenceSource", "PrintSink", "Sink", "Source"]
