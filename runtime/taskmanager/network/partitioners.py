"""Stream partitioners over record batches.

Flink: StreamPartitioner and its subclasses (ForwardPartitioner, RebalancePartitioner,
RescalePartitioner, KeyGroupStreamPartitioner, BroadcastPartitioner, ShufflePartitioner,
GlobalPartitioner). Flink selects a channel per record; here `select(batch)` splits a whole batch
into one sub-batch per output channel with numpy, so no per-record Python work happens on the
ColumnBatch paths (except HASH with a callable selector, which must call user code per record).
"""
from __future__ import annotations

import random
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from runtime.core.keygroups import check_parallelism, operator_indexes_for_key_groups
from runtime.core.keys import KeyExtractor
from runtime.core.records import RecordBatch
from runtime.graph.transformations import PartitionerKind

Selection = list[RecordBatch | None]


class StreamPartitioner(ABC):
    """Splits a batch into per-channel batches: entry i goes to output channel i (None = none)."""

    kind: PartitionerKind
    is_broadcast: bool = False

    def __init__(self, num_channels: int) -> None:
        if num_channels < 1:
            raise ValueError(f"a partitioner needs at least one channel, got {num_channels}")
        self.num_channels = num_channels

    @property
    def is_pointwise(self) -> bool:
        return self.kind.is_pointwise

    def select(self, batch: RecordBatch) -> Selection:
        n = len(batch)
        if n == 0:
            return [None] * self.num_channels
        if self.num_channels == 1:
            return [batch]
        return self._select(batch, n)

    @abstractmethod
    def _select(self, batch: RecordBatch, n: int) -> Selection:
        """Split a non-empty batch over num_channels > 1 channels."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(channels={self.num_channels})"


def _round_robin(batch: RecordBatch, n: int, start: int, num_channels: int) -> Selection:
    """Record i goes to channel (start + i) % num_channels; strided slices, no sort."""
    out: Selection = []
    for c in range(num_channels):
        first = (c - start) % num_channels
        if first >= n:
            out.append(None)
        else:
            out.append(batch.take(np.arange(first, n, num_channels)))
    return out


class ForwardPartitioner(StreamPartitioner):
    """Flink: ForwardPartitioner -- everything to the one local consumer (channel 0)."""

    kind = PartitionerKind.FORWARD

    def _select(self, batch: RecordBatch, n: int) -> Selection:
        return [batch] + [None] * (self.num_channels - 1)


class GlobalPartitioner(StreamPartitioner):
    """Flink: GlobalPartitioner -- everything to the first consumer subtask."""

    kind = PartitionerKind.GLOBAL

    def _select(self, batch: RecordBatch, n: int) -> Selection:
        return [batch] + [None] * (self.num_channels - 1)


class RescalePartitioner(StreamPartitioner):
    """Flink: RescalePartitioner -- round-robin per record over this producer's subpartitions
    (the pointwise subset of consumers), starting at channel 0."""

    kind = PartitionerKind.RESCALE

    def __init__(self, num_channels: int) -> None:
        super().__init__(num_channels)
        self._next = 0

    def _select(self, batch: RecordBatch, n: int) -> Selection:
        out = _round_robin(batch, n, self._next, self.num_channels)
        self._next = (self._next + n) % self.num_channels
        return out


class RebalancePartitioner(RescalePartitioner):
    """Flink: RebalancePartitioner -- round-robin per record over all consumers, continuing across
    batches, starting at a random channel so producers do not all hit consumer 0 first."""

    kind = PartitionerKind.REBALANCE

    def __init__(self, num_channels: int, seed: int | None = None) -> None:
        super().__init__(num_channels)
        self._next = random.Random(seed).randrange(num_channels)


class ShufflePartitioner(StreamPartitioner):
    """Flink: ShufflePartitioner -- a uniformly random channel per record."""

    kind = PartitionerKind.SHUFFLE

    def __init__(self, num_channels: int, seed: int | None = None) -> None:
        super().__init__(num_channels)
        self._rng = np.random.default_rng(seed)

    def _select(self, batch: RecordBatch, n: int) -> Selection:
        return batch.split_by(self._rng.integers(0, self.num_channels, size=n), self.num_channels)


class BroadcastPartitioner(StreamPartitioner):
    """Flink: BroadcastPartitioner -- the same batch object to every channel (consumers must
    treat received batches as immutable, which holds for local and remote channels alike)."""

    kind = PartitionerKind.BROADCAST
    is_broadcast = True

    def _select(self, batch: RecordBatch, n: int) -> Selection:
        return [batch] * self.num_channels


class KeyGroupStreamPartitioner(StreamPartitioner):
    """Flink: KeyGroupStreamPartitioner -- key -> key group -> consumer subtask, the same mapping
    keyed state uses (runtime.core.keygroups), so a key always lands where its state lives."""

    kind = PartitionerKind.HASH

    def __init__(self, num_channels: int, key_selector: Any, max_parallelism: int) -> None:
        super().__init__(num_channels)
        check_parallelism(max_parallelism, num_channels)
        self.max_parallelism = max_parallelism
        self.extractor = KeyExtractor(key_selector)

    def channels_of(self, batch: RecordBatch) -> np.ndarray:
        kgs = self.extractor.key_groups(batch, self.max_parallelism)
        return operator_indexes_for_key_groups(self.max_parallelism, self.num_channels, kgs)

    def _select(self, batch: RecordBatch, n: int) -> Selection:
        return batch.split_by(self.channels_of(batch), self.num_channels)


_BY_KIND: dict[PartitionerKind, type[StreamPartitioner]] = {
    PartitionerKind.FORWARD: ForwardPartitioner,
    PartitionerKind.GLOBAL: GlobalPartitioner,
    PartitionerKind.RESCALE: RescalePartitioner,
    PartitionerKind.REBALANCE: RebalancePartitioner,
    PartitionerKind.SHUFFLE: ShufflePartitioner,
    PartitionerKind.BROADCAST: BroadcastPartitioner,
}


def create_partitioner(
    kind: PartitionerKind, key_selector: Any, num_channels: int, max_parallelism: int
) -> StreamPartitioner:
    """The partitioner for one produced result partition (`num_channels` = its subpartitions)."""
    kind = PartitionerKind(kind)
    if kind is PartitionerKind.HASH:
        if key_selector is None:
            raise ValueError("a HASH partitioner needs a key selector")
        return KeyGroupStreamPartitioner(num_channels, key_selector, max_parallelism)
    cls = _BY_KIND.get(kind)
    if cls is None:
        raise ValueError(f"unknown partitioner kind {kind!r}")
    return cls(num_channels)
