"""Transformations: what the DataStream API records; StreamGraphGenerator turns them into a StreamGraph.

Pure data. Operators are carried as factories (picklable callables that build a StreamOperator on
the TaskManager); this module never calls them.
"""
from __future__ import annotations

import enum
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_ids = itertools.count(1)


class ChainingStrategy(enum.Enum):
    """Flink's ChainingStrategy: ALWAYS chains both ways, HEAD starts a new chain, NEVER isolates."""

    ALWAYS = "ALWAYS"
    HEAD = "HEAD"
    NEVER = "NEVER"


class PartitionerKind(str, enum.Enum):
    FORWARD = "forward"
    REBALANCE = "rebalance"
    RESCALE = "rescale"
    HASH = "hash"  # by key group
    BROADCAST = "broadcast"
    SHUFFLE = "shuffle"
    GLOBAL = "global"

    @property
    def is_pointwise(self) -> bool:
        return self in (PartitionerKind.FORWARD, PartitionerKind.RESCALE)

    @property
    def is_deterministic(self) -> bool:
        """A restarted producer sends every record to the same consumer again."""
        return self not in (PartitionerKind.REBALANCE, PartitionerKind.SHUFFLE, PartitionerKind.RESCALE)


class ExchangeMode(str, enum.Enum):
    UNDEFINED = "undefined"
    PIPELINED = "pipelined"
    BATCH = "batch"  # blocking


@dataclass
class PartitionerSpec:
    kind: PartitionerKind
    key_selector: Any = None  # callable or field name; HASH only
    explicit: bool = False  # set by the user (forward with a parallelism change is then an error)


@dataclass
class Transformation:
    name: str
    parallelism: int | None = None
    max_parallelism: int | None = None
    uid: str | None = None
    uid_hash: str | None = None  # set_uid_hash(): Flink's user-provided operator hash
    slot_sharing_group: str | None = None
    chaining_strategy: ChainingStrategy = ChainingStrategy.ALWAYS
    output_type: Any = None  # runtime.api.common.TypeInformation or None
    id: int = field(default_factory=lambda: next(_ids))
    parallelism_configured: bool = False
    resources: Any = None

    @property
    def inputs(self) -> list[Transformation]:
        return []


@dataclass
class SourceTransformation(Transformation):
    operator_factory: Callable[[], Any] | None = None
    coordinator_provider: Any = None
    bounded: bool = True


@dataclass
class OneInputTransformation(Transformation):
    input: Transformation | None = None
    operator_factory: Callable[[], Any] | None = None
    coordinator_provider: Any = None
    is_sink: bool = False
    keyed: bool = False

    @property
    def inputs(self) -> list[Transformation]:
        return [self.input] if self.input is not None else []


@dataclass
class TwoInputTransformation(Transformation):
    input1: Transformation | None = None
    input2: Transformation | None = None
    operator_factory: Callable[[], Any] | None = None
    keyed: bool = False

    @property
    def inputs(self) -> list[Transformation]:
        return [t for t in (self.input1, self.input2) if t is not None]


@dataclass
class PartitionTransformation(Transformation):
    """Virtual: changes how the input is partitioned to its consumers."""

    input: Transformation | None = None
    partitioner: PartitionerSpec | None = None
    exchange_mode: ExchangeMode = ExchangeMode.UNDEFINED

    @property
    def inputs(self) -> list[Transformation]:
        return [self.input] if self.input is not None else []


@dataclass
class SideOutputTransformation(Transformation):
    """Virtual: the records its input operator emitted to the side output `output_tag` (a tag id)."""

    input: Transformation | None = None
    output_tag: str = ""

    @property
    def inputs(self) -> list[Transformation]:
        return [self.input] if self.input is not None else []


@dataclass
class UnionTransformation(Transformation):
    """Virtual: several inputs feed one logical input of the consumer."""

    union_inputs: list[Transformation] = field(default_factory=list)

    @property
    def inputs(self) -> list[Transformation]:
        return list(self.union_inputs)
