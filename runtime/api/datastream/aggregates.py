"""Declarative column aggregates: Count(), Sum(f), Min(f), Max(f), Aggregates.of(name=agg, ...).

A `ColumnarAggregate` runs two ways with the same results:
- vectorized, over numpy columns (ColumnarWindowAggregateOperator: partial aggregates per group
  with sort + ufunc.reduceat, then a final combine of partials), and
- per record, as an ordinary AggregateFunction (create_accumulator/add/get_result/merge), so it
  also works in the generic WindowOperator and in AggregatingState.
get_result returns a Row with one named field per aggregate.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime.api.datastream.functions import AggregateFunction
from runtime.core.row import Row

COUNT, SUM, MIN, MAX = "count", "sum", "min", "max"


@dataclass(frozen=True)
class AggSpec:
    name: str
    kind: str
    field: str | None


def _field(value: Any, field: str) -> Any:
    try:
        return value[field]
    except (TypeError, KeyError, IndexError):
        return getattr(value, field)


def _sum_dtype(col: np.ndarray) -> Any:
    return np.int64 if col.dtype.kind in "iub" else np.float64


class ColumnarAggregate(AggregateFunction):
    """One or more named aggregates over columns. Also a per-record AggregateFunction."""

    def __init__(self, specs: list[AggSpec]) -> None:
        if not specs:
            raise ValueError("a ColumnarAggregate needs at least one aggregate")
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ValueError(f"aggregate names must be unique, got {names}")
        for s in specs:
            if s.kind not in (COUNT, SUM, MIN, MAX):
                raise ValueError(f"unknown aggregate kind {s.kind!r}")
            if s.kind != COUNT and not s.field:
                raise ValueError(f"{s.kind} needs a field")
        self.specs = tuple(specs)
        self.names = tuple(names)

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.field for s in self.specs if s.field is not None))

    # per-record AggregateFunction ------------------------------------------------------------
    def create_accumulator(self) -> list[Any]:
        return [0 if s.kind in (COUNT, SUM) else None for s in self.specs]

    def add(self, value: Any, accumulator: list[Any]) -> list[Any]:
        for i, s in enumerate(self.specs):
            if s.kind == COUNT:
                accumulator[i] += 1
                continue
            assert s.field is not None  # __init__ refuses a sum, min or max without a field
            v = _field(value, s.field)
            cur = accumulator[i]
            if s.kind == SUM:
                accumulator[i] = cur + v
            elif s.kind == MIN:
                accumulator[i] = v if cur is None or v < cur else cur
            else:
                accumulator[i] = v if cur is None or v > cur else cur
        return accumulator

    def get_result(self, accumulator: list[Any]) -> Row:
        return Row.of(self.names, list(accumulator))

    def merge(self, acc_a: list[Any], acc_b: list[Any]) -> list[Any]:
        out = []
        for s, a, b in zip(self.specs, acc_a, acc_b):
            if s.kind in (COUNT, SUM):
                out.append(a + b)
            elif a is None or b is None:
                out.append(b if a is None else a)
            else:
                out.append(min(a, b) if s.kind == MIN else max(a, b))
        return out

    # vectorized ------------------------------------------------------------------------------
    def partial_sorted(self, columns: dict[str, np.ndarray], order: np.ndarray | None, starts: np.ndarray, n: int) -> list[np.ndarray]:
        """Partial aggregates of groups: rows `order` (None = identity) are sorted by group and
        each group begins at `starts`."""
        out: list[np.ndarray] = []
        sorted_cols: dict[str, np.ndarray] = {}
        for s in self.specs:
            if s.kind == COUNT:
                out.append(np.diff(np.append(starts, n)).astype(np.int64))
                continue
            assert s.field is not None  # __init__ refuses a sum, min or max without a field
            col = sorted_cols.get(s.field)
            if col is None:
                raw = columns[s.field]
                col = raw if order is None else raw[order]
                sorted_cols[s.field] = col
            if s.kind == SUM:
                out.append(np.add.reduceat(col.astype(_sum_dtype(col), copy=False), starts))
            elif s.kind == MIN:
                out.append(np.minimum.reduceat(col, starts))
            else:
                out.append(np.maximum.reduceat(col, starts))
        return out

    def combine_sorted(self, partials: list[np.ndarray], order: np.ndarray | None, starts: np.ndarray) -> list[np.ndarray]:
        """Combine partial aggregates (as produced by partial_sorted) of equal groups."""
        out = []
        for s, p in zip(self.specs, partials):
            col = p if order is None else p[order]
            if s.kind in (COUNT, SUM):
                out.append(np.add.reduceat(col, starts))
            elif s.kind == MIN:
                out.append(np.minimum.reduceat(col, starts))
            else:
                out.append(np.maximum.reduceat(col, starts))
        return out

    def __repr__(self) -> str:
        inner = ", ".join(f"{s.name}={s.kind.capitalize()}({repr(s.field) if s.field else ''})" for s in self.specs)
        return f"Aggregates({inner})"


class Count(ColumnarAggregate):
    def __init__(self, name: str = COUNT) -> None:
        super().__init__([AggSpec(name, COUNT, None)])


class Sum(ColumnarAggregate):
    def __init__(self, field: str, name: str | None = None) -> None:
        super().__init__([AggSpec(name or f"sum_{field}", SUM, field)])


class Min(ColumnarAggregate):
    def __init__(self, field: str, name: str | None = None) -> None:
        super().__init__([AggSpec(name or f"min_{field}", MIN, field)])


class Max(ColumnarAggregate):
    def __init__(self, field: str, name: str | None = None) -> None:
        super().__init__([AggSpec(name or f"max_{field}", MAX, field)])


class Aggregates:
    @staticmethod
    def of(*aggregates: ColumnarAggregate, **named: ColumnarAggregate) -> ColumnarAggregate:
        """Combine aggregates; keyword arguments rename them: of(count=Count(), total=Sum("v"))."""
        specs: list[AggSpec] = []
        for a in aggregates:
            specs.extend(a.specs)
        for name, a in named.items():
            if len(a.specs) != 1:
                raise ValueError(f"{name}=... must be a single aggregate, got {a!r}")
            s = a.specs[0]
            specs.append(AggSpec(name, s.kind, s.field))
        return ColumnarAggregate(specs)


__all__ = ["AggSpec", "ColumnarAggregate", "Count", "Sum", "Min", "Max", "Aggregates"]
