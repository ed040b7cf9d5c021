"""Connectors: sources (collection, data generator, number sequence, Delta) and sinks (print, collect, Delta)."""
from runtime.api.connectors.base import RateLimiter, RateLimiterStrategy, Sink, Source
from runtime.api.connectors.collection import CollectionSource
from runtime.api.connectors.delta import DeltaSink
from runtime.api.connectors.delta_source import DeltaSource
from runtime.api.connectors.generator import DataGeneratorSource, NumberSequenceSource
from runtime.api.connectors.print import PrintSink

__all__ = [
    "CollectionSource", "DataGeneratorSource", "DeltaSink", "DeltaSource", "NumberSequenceSource", "PrintSink",
    "RateLimiter", "RateLimiterStrategy", "Sink", "Source",
]
