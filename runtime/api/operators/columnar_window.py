"""Vectorized keyed window aggregation over ColumnBatches (tumbling / sliding, event or processing time).

The per-record WindowOperator pays Python work per record and key. This operator does the same
job as `key_by(field).window(tumbling|sliding).aggregate(ColumnarAggregate)` with numpy only:

- per batch: window starts for every row (Flink's TimeWindow.getWindowStartWithOffset, vectorized;
  a sliding window puts each row into size/slide windows), late rows dropped, then per window
  start one sort of the keys and ufunc.reduceat -> partial aggregates per (key, window start);
- partials wait per window start as arrays (no per-key Python dicts), compacted now and then;
- when the watermark reaches window_end - 1 (processing time: the clock), a window's partials are
  concatenated, combined per key, and all windows fired by one watermark leave as ONE ColumnBatch
  with columns [key_field, "window_start", "window_end", <aggregate names>], timestamps end - 1.

Allowed lateness: a fired window keeps its partials until end - 1 + lateness; a late-but-allowed
row re-emits the updated result of its (key, window), once per batch (Flink's EventTimeTrigger
fires once per late element).
"""
from __future__ import annotations

import itertools
import operator
from typing import Any

import numpy as np

from runtime.api.datastream.aggregates import ColumnarAggregate
from runtime.api.datastream.window import (
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
)
from runtime.api.operators.base import StreamOperator
from runtime.core.checkpoint import KeyedSnapshot, OperatorSnapshot, StateInitializationContext
from runtime.core.errors import InvalidProgramError, MillraceError
from runtime.core.gc_pause import gc_paused
from runtime.core.keygroups import assign_to_key_groups, stable_hash
from runtime.core.records import ColumnBatch, RecordBatch, Watermark
from runtime.state.backend import PANE_KIND

PANE_STATE = "__window_panes__"
_COMPACT_AFTER_CHUNKS = 16  # bounds memory and final-combine cost per pane
_MANY_WINDOWS = 8  # a batch spanning more windows is aggregated in one pass (not window by window)
_SPILL_ROWS = 1 << 21  # spilled (window, key) partials distributed to panes at the latest then


def _group(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, starts, unique keys): keys[order] is sorted and group i starts at starts[i]."""
    # grouping needs no stability; introsort is fastest on numbers, mergesort on strings
    order = np.argsort(keys, kind=None if keys.dtype.kind in "iufb" else "stable")
    sk = keys[order]
    n = len(sk)
    flag = np.empty(n, dtype=bool)
    if n:
        flag[0] = True
        np.not_equal(sk[1:], sk[:-1], out=flag[1:])
    starts = np.flatnonzero(flag)
    return order, starts, sk[starts]


def _group_by_window_and_key(ws: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(order, sorted window starts, sorted keys, group starts) of (window start, key) groups (non-empty input)."""
    order = np.lexsort((keys, ws))
    sws, sk = ws[order], keys[order]
    flag = np.empty(len(order), dtype=bool)
    flag[0] = True
    np.not_equal(sws[1:], sws[:-1], out=flag[1:])
    flag[1:] |= sk[1:] != sk[:-1]
    return order, sws, sk, np.flatnonzero(flag)


class _Pane:
    """Pending partial aggregates of one window start (all keys)."""

    __slots__ = ("keys", "partials", "fired")

    def __init__(self) -> None:
        self.keys: list[np.ndarray] = []
        self.partials: list[list[np.ndarray]] = []
        self.fired = False

    def add(self, keys: np.ndarray, partials: list[np.ndarray]) -> None:
        self.keys.append(keys)
        self.partials.append(partials)

    def consolidate(self, agg: ColumnarAggregate) -> tuple[np.ndarray, list[np.ndarray]]:
        if len(self.keys) == 1:
            return self.keys[0], self.partials[0]
        keys = np.concatenate(self.keys)
        parts = [np.concatenate([p[i] for p in self.partials]) for i in range(len(agg.specs))]
        order, starts, uniq = _group(keys)
        combined = agg.combine_sorted(parts, order, starts)
        self.keys, self.partials = [uniq], [combined]
        return uniq, combined


class ColumnarWindowAggregateOperator(StreamOperator):
    """Keyed tumbling/sliding window aggregation on columns (a vectorized WindowOperator)."""

    def __init__(
        self,
        key_field: str,
        window_assigner: WindowAssigner,
        aggregate: ColumnarAggregate,
        allowed_lateness: int = 0,
    ) -> None:
        super().__init__()
        if not isinstance(aggregate, ColumnarAggregate):
            raise InvalidProgramError("ColumnarWindowAggregateOperator needs a ColumnarAggregate (Count, Sum, Min, Max, Aggregates.of)")
        if isinstance(window_assigner, (TumblingEventTimeWindows, TumblingProcessingTimeWindows)):
            self.size = self.slide = window_assigner.size
        elif isinstance(window_assigner, (SlidingEventTimeWindows, SlidingProcessingTimeWindows)):
            self.size, self.slide = window_assigner.size, window_assigner.slide
        else:
            raise InvalidProgramError(
                f"the columnar window aggregate supports tumbling and sliding time windows, not {window_assigner!r}"
            )
        if allowed_lateness < 0:
            raise InvalidProgramError("allowed lateness must be >= 0")
        self.offset = window_assigner.offset
        self.event_time = window_assigner.is_event_time()
        self.key_field = key_field
        self._key_kind: str | None = None  # the key column's type, fixed by the first batch
        self.window_assigner = window_assigner
        self.aggregate = aggregate
        self.allowed_lateness = int(allowed_lateness) if self.event_time else 0
        self._windows_per_row = -(-self.size // self.slide)
        self._panes: dict[int, _Pane] = {}
        # partials of batches that span many windows, not yet in their panes: (window starts, keys, partials)
        self._spill: list[tuple[np.ndarray, np.ndarray, list[np.ndarray]]] = []
        self._spill_rows = 0
        self.num_late_records_dropped = 0
        self._out_cols = (key_field, "window_start", "window_end", *aggregate.names)
        if len(set(self._out_cols)) != len(self._out_cols):
            raise InvalidProgramError(f"output column names collide: {self._out_cols}")

    # input ---------------------------------------------------------------------------------
    def _columns(self, batch: RecordBatch) -> ColumnBatch:
        if isinstance(batch, ColumnBatch):
            return batch
        rows = batch.rows()
        if rows and isinstance(rows[0], dict):
            names = list(rows[0])
            return ColumnBatch({n: np.asarray([r[n] for r in rows]) for n in names}, batch.timestamps)
        try:
            return ColumnBatch.from_rows(rows, batch.timestamps)
        except (ValueError, AttributeError) as e:
            raise MillraceError(
                f"columnar window aggregate: records must be Rows with field names (or dicts) to become columns: {e}"
            ) from e

    def _check_key_dtype(self, keys: np.ndarray) -> None:
        """Keys of one kind only: numpy would silently promote mixed key dtypes when windows are
        combined (int 1 and str "1" merged, large ints collapsed through float)."""
        kind = "str" if keys.dtype.kind in "USO" else keys.dtype.str
        if keys.dtype.kind == "O" and len(keys) and not isinstance(keys[0], str):
            kind = f"object:{type(keys[0]).__name__}"
        if self._key_kind is None:
            self._key_kind = kind
        elif kind != self._key_kind:
            raise MillraceError(
                f"columnar window aggregate: key column {self.key_field!r} changed type from {self._key_kind} to {kind} "
                "between batches; cast the key column to one type (e.g. in map_batches) before key_by"
            )

    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        n = len(batch)
        if n == 0:
            return
        cb = self._columns(batch)
        if self.key_field not in cb.columns:
            raise MillraceError(f"columnar window aggregate: no key column {self.key_field!r} in {list(cb.columns)}")
        keys = cb.columns[self.key_field]
        self._check_key_dtype(keys)
        size, slide = self.size, self.slide
        if self.event_time:
            if cb.timestamps is None:
                raise MillraceError(
                    "Record has no timestamp but an event-time window needs one. Did you forget "
                    "data_stream.assign_timestamps_and_watermarks(...) or a source watermark strategy?"
                )
            ts = cb.timestamps.astype(np.int64, copy=False)
        else:
            assert self.ctx is not None
            ts = np.full(n, int(self.ctx.processing_time_service.current_processing_time()), dtype=np.int64)

        # window assignment (Flink: TimeWindow.getWindowStartWithOffset; numpy % is floor-mod)
        last_start = ts - (ts - self.offset) % slide
        if self._windows_per_row == 1:
            ws = last_start
            idx: np.ndarray | None = None
        else:
            ws_parts, idx_parts = [], []
            lower = ts - size
            for j in range(self._windows_per_row):
                s = last_start - j * slide
                m = s > lower
                ws_parts.append(s[m])
                idx_parts.append(np.flatnonzero(m))
            ws = np.concatenate(ws_parts)
            idx = np.concatenate(idx_parts)

        # late rows: the window's cleanup time (end - 1 + lateness) is not after the watermark
        if self.event_time:
            wm = self.current_watermark
            keep = ws + (size - 1 + self.allowed_lateness) > wm
            if not keep.all():
                if idx is None:
                    self.num_late_records_dropped += int(n - np.count_nonzero(keep))
                    idx = np.flatnonzero(keep)
                else:
                    alive = np.zeros(n, dtype=bool)
                    alive[idx[keep]] = True
                    self.num_late_records_dropped += int(n - np.count_nonzero(alive))
                    idx = idx[keep]
                ws = ws[keep]
                if len(ws) == 0:
                    return

        agg = self.aggregate
        refire: list[tuple[int, np.ndarray]] = []
        wmin, wmax = int(ws.min()), int(ws.max())
        if wmin != wmax and keys.dtype.kind in "iufbU" and (wmax - wmin) // slide >= _MANY_WINDOWS:
            # rows of many windows (a batch exchange's key-group subpartition spans the whole input):
            # one sort by (window start, key) and one reduceat for all of them, then slices per window
            rows_all = np.arange(n) if idx is None else idx
            o, sws, sk, starts = _group_by_window_and_key(ws, keys[rows_all])
            partials = agg.partial_sorted(cb.columns, rows_all[o], starts, len(o))
            if self.event_time and not self.allowed_lateness:
                # no row can reach a fired window (it would be late): the partials wait as they are
                # and go to their panes in one pass before anything reads the panes
                self._spill.append((sws[starts], sk[starts], partials))
                self._spill_rows += len(starts)
                if self._spill_rows >= _SPILL_ROWS:
                    self._distribute()
                return
            self._add_by_window(sws[starts], sk[starts], partials, refire)
        else:
            # per window start: one sort of the keys, partial aggregates by reduceat
            if wmin == wmax:
                groups: list[tuple[int, np.ndarray | None]] = [(wmin, idx)]
            else:
                o = np.argsort(ws, kind="stable")
                sws = ws[o]
                wb = np.flatnonzero(sws[1:] != sws[:-1]) + 1
                rows_sorted = o if idx is None else idx[o]
                groups = [
                    (int(sws[b0]), rows_sorted[b0:b1])
                    for b0, b1 in zip(np.concatenate(([0], wb)).tolist(), np.concatenate((wb, [len(sws)])).tolist())
                ]
            for w, rows in groups:
                k_sub = keys if rows is None else keys[rows]
                order, starts, uniq = _group(k_sub)
                full_order = order if rows is None else rows[order]
                self._add_partials(w, uniq, agg.partial_sorted(cb.columns, full_order, starts, len(k_sub)), refire)
        if refire:
            self._emit([self._result(w, only_keys=k) for w, k in refire])

    def _add_by_window(self, ws: np.ndarray, keys: np.ndarray, partials: list[np.ndarray], refire: list[tuple[int, np.ndarray]]) -> None:
        """Partials of (window start, key) groups sorted by window start, then key: one pane add per window."""
        bounds = np.flatnonzero(np.concatenate(([True], ws[1:] != ws[:-1]))).tolist() + [len(ws)]
        for a, b in zip(bounds[:-1], bounds[1:]):
            self._add_partials(int(ws[a]), keys[a:b], [p[a:b] for p in partials], refire)

    def _distribute(self) -> None:
        """Spilled partials of many windows into their panes: one sort and combine over all of them."""
        if not self._spill:
            return
        chunks, self._spill, self._spill_rows = self._spill, [], 0
        ws = np.concatenate([c[0] for c in chunks])
        keys = np.concatenate([c[1] for c in chunks])
        parts = [np.concatenate([c[2][i] for c in chunks]) for i in range(len(self.aggregate.specs))]
        order, sws, sk, starts = _group_by_window_and_key(ws, keys)
        combined = self.aggregate.combine_sorted(parts, order, starts)
        refire: list[tuple[int, np.ndarray]] = []
        self._add_by_window(sws[starts], sk[starts], combined, refire)
        assert not refire  # spilled only without allowed lateness: no fired window gets rows

    def _add_partials(self, w: int, uniq: np.ndarray, partials: list[np.ndarray], refire: list[tuple[int, np.ndarray]]) -> None:
        pane = self._panes.get(w)
        if pane is None:
            pane = self._panes[w] = _Pane()
            if not self.event_time:
                self._register_processing_timer(w + self.size - 1)
        pane.add(uniq, partials)
        if pane.fired:
            refire.append((w, uniq))
        elif len(pane.keys) > _COMPACT_AFTER_CHUNKS:
            pane.consolidate(self.aggregate)

    # firing ----------------------------------------------------------------------------------
    def _result(self, w: int, only_keys: np.ndarray | None = None) -> dict[str, np.ndarray]:
        keys, values = self._panes[w].consolidate(self.aggregate)
        if only_keys is not None:
            sel = np.isin(keys, only_keys)
            keys = keys[sel]
            values = [v[sel] for v in values]
        m = len(keys)
        cols: dict[str, np.ndarray] = {
            self.key_field: keys,
            "window_start": np.full(m, w, dtype=np.int64),
            "window_end": np.full(m, w + self.size, dtype=np.int64),
        }
        for name, v in zip(self.aggregate.names, values):
            cols[name] = v
        return cols

    def _emit(self, parts: list[dict[str, np.ndarray]]) -> None:
        parts = [p for p in parts if len(p["window_start"])]
        if not parts:
            return
        if len(parts) == 1:
            cols = parts[0]
        else:
            cols = {c: np.concatenate([p[c] for p in parts]) for c in self._out_cols}
        assert self.output is not None
        self.output.emit(ColumnBatch(cols, cols["window_end"] - 1))

    def _fire_until(self, time: int) -> None:
        """Fire windows whose end - 1 <= time; drop those past their cleanup time."""
        self._distribute()
        size, lateness = self.size, self.allowed_lateness
        due = sorted(w for w, p in self._panes.items() if not p.fired and w + size - 1 <= time)
        parts = []
        for w in due:
            parts.append(self._result(w))
            self._panes[w].fired = True
        for w in [w for w in self._panes if w + size - 1 + lateness <= time]:
            del self._panes[w]
        self._emit(parts)

    def on_watermark(self, timestamp: int) -> None:
        if self.event_time:
            self._fire_until(timestamp)
        assert self.output is not None
        self.output.emit_watermark(Watermark(timestamp))

    def _register_processing_timer(self, t: int) -> None:
        assert self.ctx is not None
        self.ctx.processing_time_service.register_timer(t, self._on_processing_time)

    def _on_processing_time(self, time: int) -> None:
        self._fire_until(time)

    @property
    def pending_windows(self) -> list[int]:
        self._distribute()
        return sorted(self._panes)

    # checkpoints (runtime.core.checkpoint) -----------------------------------------------------
    def _key_groups(self, keys: np.ndarray) -> np.ndarray:
        assert self.ctx is not None
        mp = self.ctx.max_parallelism
        if keys.dtype.kind in "iub":
            return assign_to_key_groups(keys, mp)
        return np.fromiter((stable_hash(k) % mp for k in keys.tolist()), dtype=np.int64, count=len(keys))

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot:
        """Pending partials as keyed entries of kind "pane": (key, window start, (partial, ..., fired 0/1)).

        A flat tuple of numbers, so the state file types it (Spark SQL: value_tuple[0].long is the
        first partial, the last item whether the window fired already).

        Synchronous part: consolidate each pane (numpy; its arrays are never changed in place
        afterwards, so holding them pins them). The supplier builds the entries of a window with
        one sort by key group and one tolist() per column, then cuts them into key groups.
        """
        self._distribute()
        panes = [(w, *pane.consolidate(self.aggregate), pane.fired) for w, pane in self._panes.items()]
        key_groups = self._key_groups

        def keyed() -> KeyedSnapshot:
            by_group: dict[int, list[tuple[Any, Any, Any]]] = {}  # key group -> its pane entries
            with gc_paused():
                for w, keys, parts, fired in panes:
                    if not len(keys):
                        continue
                    kgs = key_groups(keys)
                    order = np.argsort(kgs, kind="stable")
                    skg = kgs[order]
                    cuts = (np.flatnonzero(skg[1:] != skg[:-1]) + 1).tolist()
                    values = zip(*(p[order].tolist() for p in parts))
                    flag = (int(fired),)
                    entries = [(k, w, v + flag) for k, v in zip(keys[order].tolist(), values)]
                    for g, s0, e0 in zip(skg[[0, *cuts]].tolist(), [0, *cuts], [*cuts, len(entries)]):
                        by_group.setdefault(g, []).extend(entries[s0:e0])
            return {g: {PANE_STATE: (PANE_KIND, group_entries)} for g, group_entries in by_group.items()}

        return OperatorSnapshot(keyed=keyed)

    def initialize_state(self, context: StateInitializationContext) -> None:
        """Take the panes of this subtask's key groups (after setup, before open); others are ignored."""
        assert self.ctx is not None
        rng = self.ctx.key_group_range
        k0, k1, k2 = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(2)
        with gc_paused():
            entries = [e for kg, states in context.keyed.items() if kg in rng and PANE_STATE in states for e in states[PANE_STATE][1]]
            entries.sort(key=k1)
            for w, group in itertools.groupby(entries, key=k1):
                rows = list(group)
                state = list(map(k2, rows))  # (partial, ..., fired)
                pane = self._panes.get(w)
                if pane is None:
                    pane = self._panes[w] = _Pane()
                    if not self.event_time:
                        self._register_processing_timer(w + self.size - 1)
                pane.add(np.asarray(list(map(k0, rows))), [np.asarray(col) for col in list(zip(*state))[:-1]])
                pane.fired = pane.fired or any(v[-1] for v in state)


__all__ = ["ColumnarWindowAggregateOperator"]
