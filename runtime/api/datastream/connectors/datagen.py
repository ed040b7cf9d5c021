"""Flink's datagen connector (DataGeneratorSource)."""
from runtime.api.connectors.generator import DataGeneratorSource

__all__ = ["DataGeneratorSource"]
