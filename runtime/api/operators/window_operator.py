"""Keyed windows. Port of Flink's WindowOperator (+ MergingWindowSet for session windows).

Elements are assigned to windows; a pane (key, window) keeps its contents in keyed state with the
window as namespace ("window-contents": a ReducingState, AggregatingState or ListState depending
on the window function). Triggers decide when a pane fires; event-time triggers and cleanup use
timers at window.max_timestamp() (+ allowed lateness for cleanup), so windows fire when the
watermark passes them: at the end of a bounded input, the sources' final MAX watermark fires
what is left. Output records carry window.max_timestamp().

window_function_spec is one of
    ("reduce", reduce_fn, process_window_fn_or_None)
    ("aggregate", aggregate_fn, process_window_fn_or_None)
    ("process", process_window_fn)
where a process window function is a ProcessWindowFunction, a WindowFunction (apply) or a
callable(key, window, elements).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from runtime.api.datastream.functions import Function, ProcessWindowFunction
from runtime.api.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
)
from runtime.api.datastream.window import (
    EventTimeTrigger,
    MergingWindowAssigner,
    TimestampedValue,
    TimeWindow,
    Trigger,
    TriggerResult,
    TumblingEventTimeWindows,
    Window,
    WindowAssigner,
)
from runtime.api.operators.runtime_context import AbstractKeyedOperator, close_function, open_function
from runtime.core.errors import InvalidProgramError, MillraceError
from runtime.core.keygroups import assign_to_key_group
from runtime.core.keys import KeyExtractor
from runtime.core.records import MAX_TIMESTAMP, MIN_TIMESTAMP, RecordBatch
from runtime.state import VOID_NAMESPACE, KeyedStateBackend
from runtime.state.backend import KvAggregatingState, KvListState, KvReducingState
from runtime.state.timers import InternalTimer, InternalTimerService

_FAST_CONTENTS = (KvAggregatingState, KvReducingState, KvListState)

WINDOW_CONTENTS = "window-contents"
MERGING_WINDOW_SET = "merging-window-set"
WINDOW_TIMERS = "window-timers"


# --------------------------------------------------------------------------- merging windows
class MergingWindowSet:
    """Flink: MergingWindowSet: which in-flight (merged) window keeps its state in which
    namespace ("state window"), so merging never copies state more than once."""

    def __init__(self, assigner: MergingWindowAssigner, state: Any) -> None:
        self._assigner = assigner
        self._state = state
        self.windows: dict[Any, Any] = {w: sw for w, sw in state.get()}
        self._initial = dict(self.windows)

    def persist(self) -> None:
        if self.windows != self._initial:
            self._state.update(list(self.windows.items()))
            self._initial = dict(self.windows)

    def get_state_window(self, window: Any) -> Any:
        return self.windows.get(window)

    def retire_window(self, window: Any) -> None:
        if self.windows.pop(window, None) is None:
            raise MillraceError(f"window {window} is not in the in-flight window set")

    def add_window(self, new_window: Any, merge_function: Callable[[Any, list, Any, list], None]) -> Any:
        candidates = list(self.windows) + [new_window]
        merge_results: dict[Any, list] = {}

        def on_merge(to_be_merged: Iterable[Any], merge_result: Any) -> None:
            merge_results[merge_result] = list(to_be_merged)

        self._assigner.merge_windows(candidates, on_merge)
        result_window = new_window
        for merge_result, merged in merge_results.items():
            if new_window in merged:  # the new window never had state of its own
                merged.remove(new_window)
                result_window = merge_result
            merged_state_window = self.windows.get(merged[0])
            merged_state_windows = []
            for w in merged:
                res = self.windows.pop(w, None)
                if res is not None:
                    merged_state_windows.append(res)
            self.windows[merge_result] = merged_state_window
            if merged_state_window in merged_state_windows:
                merged_state_windows.remove(merged_state_window)
            # don't merge when a pre-existing window merely absorbs the new one
            if not (merge_result in merged and len(merged) == 1):
                merge_function(merge_result, merged, self.windows[merge_result], merged_state_windows)
        if result_window == new_window:  # a new, self-contained window
            self.windows[result_window] = result_window
        return result_window


# --------------------------------------------------------------------------- contexts
class _KeyedStateStore:
    """Flink: KeyedStateStore scoped to one namespace (window_state / global_state)."""

    __slots__ = ("_backend", "_ns")

    def __init__(self, backend: KeyedStateBackend, namespace: Any) -> None:
        self._backend = backend
        self._ns = namespace

    def _get(self, d: StateDescriptor) -> Any:
        return self._backend.get_partitioned_state(d, self._ns)

    get_state = get_list_state = get_map_state = get_reducing_state = get_aggregating_state = _get


class _ProcessContext(ProcessWindowFunction.Context):
    __slots__ = ("_op", "_window")

    def __init__(self, op: WindowOperator) -> None:
        self._op = op
        self._window: Any = None

    def window(self) -> Any:
        return self._window

    def current_processing_time(self) -> int:
        return self._op._timers.current_processing_time()

    def current_watermark(self) -> int:
        return self._op._timers.current_watermark()

    def window_state(self) -> Any:
        assert self._op.keyed_state_backend is not None
        return _KeyedStateStore(self._op.keyed_state_backend, self._window)

    def global_state(self) -> Any:
        assert self._op.keyed_state_backend is not None
        return _KeyedStateStore(self._op.keyed_state_backend, VOID_NAMESPACE)

    def output(self, output_tag: Any, value: Any) -> None:
        self._op.collect_side(output_tag.tag_id, value, self._window.max_timestamp())


class _AssignerContext(WindowAssigner.WindowAssignerContext):
    def __init__(self, op: WindowOperator) -> None:
        self._op = op

    def get_current_processing_time(self) -> int:
        return self._op._timers.current_processing_time()

    def get_runtime_context(self) -> Any:
        return self._op.runtime_context


class _TriggerContext(Trigger.OnMergeContext):
    """Flink: WindowOperator.Context: the trigger's view for the current key and `window`."""

    def __init__(self, op: WindowOperator, trigger: Trigger) -> None:
        self._op = op
        self._trigger = trigger
        self.window: Any = None
        self.merged_windows: Sequence[Any] | None = None

    def get_current_processing_time(self) -> int:
        return self._op._timers.current_processing_time()

    def get_current_watermark(self) -> int:
        return self._op._timers.current_watermark()

    def register_processing_time_timer(self, time: int) -> None:
        self._op._timers.register_processing_time_timer(self.window, time)

    def register_event_time_timer(self, time: int) -> None:
        self._op._timers.register_event_time_timer(self.window, time)

    def delete_processing_time_timer(self, time: int) -> None:
        self._op._timers.delete_processing_time_timer(self.window, time)

    def delete_event_time_timer(self, time: int) -> None:
        self._op._timers.delete_event_time_timer(self.window, time)

    def get_partitioned_state(self, state_descriptor: Any) -> Any:
        assert self._op.keyed_state_backend is not None
        return self._op.keyed_state_backend.get_partitioned_state(state_descriptor, self.window)

    def merge_partitioned_state(self, state_descriptor: Any) -> None:
        if self.merged_windows:
            state = self.get_partitioned_state(state_descriptor)
            if not hasattr(state, "merge_namespaces") or state_descriptor.kind not in ("list", "reducing", "aggregating"):
                raise MillraceError(f"trigger state {state_descriptor.name!r} cannot be merged: use a list, reducing or aggregating state")
            state.merge_namespaces(self.window, list(self.merged_windows))

    def on_element(self, element: Any, timestamp: int | None) -> TriggerResult:
        return self._trigger.on_element(element, timestamp, self.window, self)

    def on_event_time(self, time: int) -> TriggerResult:
        return self._trigger.on_event_time(time, self.window, self)

    def on_processing_time(self, time: int) -> TriggerResult:
        return self._trigger.on_processing_time(time, self.window, self)

    def on_merge(self, merged_windows: Sequence[Any]) -> None:
        self.merged_windows = merged_windows
        self._trigger.on_merge(self.window, self)

    def clear(self) -> None:
        self._trigger.clear(self.window, self)


# --------------------------------------------------------------------------- window functions
def _window_function_adapter(fn: Any) -> Callable[[Any, Any, _ProcessContext, Iterable[Any]], Iterable[Any] | None]:
    """Adapt ProcessWindowFunction / WindowFunction / callable to (key, window, ctx, elements)."""
    if fn is None:
        return lambda key, window, ctx, elements: elements
    if isinstance(fn, ProcessWindowFunction) or (hasattr(fn, "process") and callable(fn.process)):
        return lambda key, window, ctx, elements: fn.process(key, ctx, elements)
    if hasattr(fn, "apply") and callable(fn.apply):
        return lambda key, window, ctx, elements: fn.apply(key, window, elements)
    if callable(fn):
        return lambda key, window, ctx, elements: fn(key, window, elements)
    raise InvalidProgramError(f"window function must be a ProcessWindowFunction, WindowFunction or callable, not {type(fn).__name__}")


class WindowOperator(AbstractKeyedOperator):
    """Flink: WindowOperator, and EvictingWindowOperator with an `evictor` (the pane then keeps every
    element with its timestamp, and reduce/aggregate run when the window fires, over what the
    evictor left); late elements go to `late_data_tag`'s side output if set."""

    def __init__(
        self,
        key_selector: Any,
        window_assigner: WindowAssigner,
        trigger: Trigger | None = None,
        window_function_spec: tuple = (),
        allowed_lateness: int = 0,
        late_data_tag: str | None = None,
        evictor: Any = None,
    ) -> None:
        super().__init__()
        self.late_data_tag = late_data_tag
        self.evictor = evictor
        if allowed_lateness < 0:
            raise InvalidProgramError("allowed lateness must be >= 0")
        self.key_selector = key_selector
        self.window_assigner = window_assigner
        self.trigger = trigger if trigger is not None else window_assigner.get_default_trigger(None)
        self.allowed_lateness = int(allowed_lateness)
        self.window_function_spec = window_function_spec
        self._key = KeyExtractor(key_selector)
        self._merging_assigner = window_assigner if isinstance(window_assigner, MergingWindowAssigner) else None
        self._merging = self._merging_assigner is not None
        self._event_time = window_assigner.is_event_time()
        if self._merging and not self.trigger.can_merge():
            raise InvalidProgramError(f"a merging window assigner cannot be used with trigger {self.trigger!r}, which does not support merging")

        kind = window_function_spec[0] if window_function_spec else None
        self._functions: list[Any] = []
        if kind == "reduce":
            reduce_fn = window_function_spec[1]
            user_fn = window_function_spec[2] if len(window_function_spec) > 2 else None
            self._contents_desc: StateDescriptor = ReducingStateDescriptor(WINDOW_CONTENTS, reduce_fn)
            self._functions = [reduce_fn, user_fn]
        elif kind == "aggregate":
            agg_fn = window_function_spec[1]
            user_fn = window_function_spec[2] if len(window_function_spec) > 2 else None
            self._contents_desc = AggregatingStateDescriptor(WINDOW_CONTENTS, agg_fn)
            self._functions = [agg_fn, user_fn]
        elif kind == "process":
            user_fn = window_function_spec[1]
            if user_fn is None:
                raise InvalidProgramError("('process', fn) needs a window function")
            self._contents_desc = ListStateDescriptor(WINDOW_CONTENTS)
            self._functions = [user_fn]
        else:
            raise InvalidProgramError(
                f"window_function_spec must start with 'reduce', 'aggregate' or 'process', got {window_function_spec!r}"
            )
        self._single_value = kind != "process"
        self._kind = kind
        if evictor is not None:  # Flink's EvictingWindowOperator: every element kept, functions run at firing
            self._contents_desc = ListStateDescriptor(WINDOW_CONTENTS)
            self._single_value = False
        self._user_fn = user_fn
        self._call_fn = _window_function_adapter(user_fn)
        self.num_late_records_dropped = 0

    # lifecycle ---------------------------------------------------------------------------
    def open(self) -> None:
        assert self.keyed_state_backend is not None and self.runtime_context is not None
        self._timers: InternalTimerService = self.get_internal_timer_service(WINDOW_TIMERS, self)
        self._contents = self.keyed_state_backend.get_partitioned_state(self._contents_desc, None)
        self._merging_set_state = (
            self.keyed_state_backend.get_partitioned_state(ListStateDescriptor(MERGING_WINDOW_SET), VOID_NAMESPACE)
            if self._merging
            else None
        )
        self._tctx = _TriggerContext(self, self.trigger)
        self._pctx = _ProcessContext(self)
        self._actx = _AssignerContext(self)
        self._process_fn = self._user_fn if isinstance(self._user_fn, ProcessWindowFunction) else None
        # The common case -- event-time windows, the default EventTimeTrigger, no lateness, no
        # merging -- needs no trigger context: the trigger's timer and the cleanup timer are the
        # same timer (window.max_timestamp()), and when it fires the pane fires and is cleared.
        self._fast_event_time = (
            self._event_time and not self._merging and self.allowed_lateness == 0 and type(self.trigger) is EventTimeTrigger
            and self.evictor is None
        )
        # ... and then, with Millrace's own state classes (no TTL wrapper), elements go straight to
        # (key group, key, window) in the state table, a batch at a time
        self._fast_batch = self._fast_event_time and type(self._contents) in _FAST_CONTENTS
        self._agg_result = self._functions[0].get_result if self._kind == "aggregate" and self.evictor is None else None
        # ProcessWindowFunction.clear is called per fired window only when the user overrides it
        self._user_clear = self._process_fn is not None and type(self._process_fn).clear is not ProcessWindowFunction.clear
        # Triggerable's batch hook: event-time timers a timestamp at once on the fast batch path;
        # otherwise the window contexts register and delete timers when they fire: one at a time
        self.on_event_time_bucket = self._fire_event_time_bucket if self._fast_batch else None
        for fn in self._functions:
            if isinstance(fn, Function):
                open_function(fn, self.runtime_context)

    def close(self) -> None:
        try:
            for fn in self._functions:
                if isinstance(fn, Function):
                    close_function(fn)
        finally:
            super().close()

    # helpers (Flink names) -----------------------------------------------------------------
    def _cleanup_time(self, window: Window) -> int:
        if self._event_time:
            return min(window.max_timestamp() + self.allowed_lateness, MAX_TIMESTAMP)
        return window.max_timestamp()

    def _is_window_late(self, window: Window) -> bool:
        return self._event_time and self._cleanup_time(window) <= self._timers.current_watermark()

    def _is_element_late(self, timestamp: int | None) -> bool:
        return (
            self._event_time
            and timestamp is not None
            and timestamp + self.allowed_lateness <= self._timers.current_watermark()
        )

    def _register_cleanup_timer(self, window: Window) -> None:
        t = self._cleanup_time(window)
        if t == MAX_TIMESTAMP:
            return  # global / count windows are never cleaned up by time
        if self._event_time:
            self._tctx.register_event_time_timer(t)
        else:
            self._tctx.register_processing_time_timer(t)

    def _delete_cleanup_timer(self, window: Window) -> None:
        t = self._cleanup_time(window)
        if t == MAX_TIMESTAMP:
            return
        if self._event_time:
            self._tctx.delete_event_time_timer(t)
        else:
            self._tctx.delete_processing_time_timer(t)

    def _contents_or_none(self) -> Any:
        c = self._contents.get()
        if self._single_value:
            return c
        return c if c else None

    def _emit_window_contents(self, window: Window, contents: Any) -> None:
        assert self.keyed_state_backend is not None
        key = self.keyed_state_backend.get_current_key()
        self._pctx._window = window
        if self.evictor is not None:
            self._emit_evicting(key, window, list(contents))
            return
        elements = [contents] if self._single_value else contents
        self.collect_all(self._call_fn(key, window, self._pctx, elements), window.max_timestamp())

    def _emit_evicting(self, key: Any, window: Window, pane: list[Any]) -> None:
        """Flink's EvictingWindowOperator.emitWindowContents: evict before, apply, evict after, keep the rest."""
        evictor = self.evictor
        evictor.evict_before(pane, len(pane), window, self._pctx)
        values = [e.value for e in pane]
        if self._kind == "reduce" and values:
            reduce_fn = self._functions[0]
            acc = values[0]
            for v in values[1:]:
                acc = reduce_fn(acc, v) if callable(reduce_fn) else reduce_fn.reduce(acc, v)
            values = [acc]
        elif self._kind == "aggregate" and values:
            agg = self._functions[0]
            acc = agg.create_accumulator()
            for v in values:
                acc = agg.add(v, acc)
            values = [agg.get_result(acc)]
        if values:
            self.collect_all(self._call_fn(key, window, self._pctx, values), window.max_timestamp())
        evictor.evict_after(pane, len(pane), window, self._pctx)
        self._contents.update(pane)  # what the evictors left stays in the pane (update([]) clears it)

    def _clear_all_state(self, window: Window, merging: MergingWindowSet | None) -> None:
        self._contents.clear()
        self._tctx.window = window
        self._tctx.clear()
        self._pctx._window = window
        if isinstance(self._user_fn, ProcessWindowFunction):
            self._user_fn.clear(self._pctx)
        if merging is not None:
            merging.retire_window(window)
            merging.persist()

    def _fire_and_purge(self, window: Window, result: TriggerResult) -> None:
        """Act on a trigger's answer for the pane whose namespace `self._contents` is set to."""
        if result.is_fire():
            c = self._contents_or_none()
            if c is not None:
                self._emit_window_contents(window, c)
        if result.is_purge():
            self._contents.clear()

    def _add_to_pane(self, window: Window, state_window: Any, value: Any, ts: int | None) -> None:
        """Add value to `window`'s pane (its contents live under `state_window`; for merging
        windows that is the MergingWindowSet's state window, else the window itself), let the
        trigger decide, and register the cleanup timer."""
        contents, tctx = self._contents, self._tctx
        contents.set_current_namespace(state_window)
        contents.add(TimestampedValue(value, ts) if self.evictor is not None else value)
        tctx.window = window
        tctx.merged_windows = None
        self._fire_and_purge(window, tctx.on_element(value, ts))
        self._register_cleanup_timer(window)

    # elements ------------------------------------------------------------------------------
    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        backend = self.keyed_state_backend
        assert backend is not None
        keys, kgs = self._keys_and_groups(self._key, batch)
        rows = batch.rows()
        tss = batch.timestamps.tolist() if batch.timestamps is not None else None
        if self._fast_batch and tss is not None:
            self._process_batch_fast(keys, kgs, rows, tss)
            return
        for i, value in enumerate(rows):
            if kgs is not None:
                backend.set_current_key_and_group(keys[i], kgs[i])
            else:
                backend.set_current_key(keys[i])
            self._process_element(value, tss[i] if tss is not None else None)
        if self._side_out:  # late elements for the late data side output
            self.flush_output()
        self.flush_output()

    def _process_batch_fast(self, keys: list[Any], kgs: list[int] | None, rows: list[Any], tss: list[int]) -> None:
        """`_process_element` for a whole batch in the fast event-time case: the same windows, state
        and timers, with the key, key group and window passed explicitly (no per-record calls to
        set the backend's key, the state's namespace or the trigger context)."""
        backend = self.keyed_state_backend
        assert backend is not None
        if kgs is None:
            kgs = [assign_to_key_group(k, backend.max_parallelism) for k in keys]
        backend.check_key_groups(keys, kgs)
        add = self._contents.add_at
        register = self._timers.register_event_time_timer_at
        wm = self._timers.current_watermark()
        assigner = self.window_assigner
        if type(assigner) is TumblingEventTimeWindows:
            tumbling, size, offset = True, assigner.size, assigner.offset
        else:
            tumbling, size, offset = False, 0, 0
        windows_by_start: dict[int, TimeWindow] = {}  # one window object per start in this batch
        late: list[tuple[Any, int]] = []
        for value, key, kg, ts in zip(rows, keys, kgs, tss):
            # user functions (a reduce or aggregate function's own keyed state) see the record's key
            backend._current_key, backend._current_kg = key, kg  # key groups checked above
            if tumbling and ts is not None and ts > MIN_TIMESTAMP:
                start = ts - (ts - offset) % size
                max_ts = start + size - 1
                if max_ts <= wm:
                    late.append((value, ts))
                    continue
                window = windows_by_start.get(start)
                if window is None:
                    window = windows_by_start[start] = TimeWindow(start, start + size)
                add(kg, key, window, value)
                register(kg, key, window, max_ts)
                continue
            skipped = True
            for window in assigner.assign_windows(value, ts, self._actx):
                max_ts = window.max_timestamp()
                if max_ts <= wm:
                    continue  # late (no allowed lateness)
                skipped = False
                add(kg, key, window, value)
                register(kg, key, window, max_ts)
            if skipped:
                late.append((value, ts))
        for value, ts in late:
            if self._is_element_late(ts):
                if self.late_data_tag is not None:  # Flink: sideOutput(element) with lateDataOutputTag
                    self.collect_side(self.late_data_tag, value, ts)
                else:
                    self.num_late_records_dropped += 1  # Flink: numLateRecordsDropped
        if late and self._side_out:
            self.flush_output()
        self.flush_output()

    def _process_element(self, value: Any, ts: int | None) -> None:
        windows = self.window_assigner.assign_windows(value, ts, self._actx)
        skipped = True
        tctx, contents = self._tctx, self._contents
        if self._merging_assigner is not None:
            merging = MergingWindowSet(self._merging_assigner, self._merging_set_state)

            def merge_fn(merge_result: Any, merged_windows: list, state_window_result: Any, merged_state_windows: list) -> None:
                if self._event_time and merge_result.max_timestamp() + self.allowed_lateness <= self._timers.current_watermark():
                    raise MillraceError(
                        "The end timestamp of an event-time window cannot become earlier than the current "
                        f"watermark by merging. Current watermark: {self._timers.current_watermark()} window: {merge_result}"
                    )
                if not self._event_time and merge_result.max_timestamp() <= self._timers.current_processing_time():
                    raise MillraceError(
                        "The end timestamp of a processing-time window cannot become earlier than the current "
                        f"processing time by merging. Current processing time: {self._timers.current_processing_time()} "
                        f"window: {merge_result}"
                    )
                tctx.window = merge_result
                tctx.on_merge(merged_windows)
                for m in merged_windows:
                    tctx.window = m
                    tctx.clear()
                    self._delete_cleanup_timer(m)
                contents.merge_namespaces(state_window_result, merged_state_windows)

            for window in windows:
                actual = merging.add_window(window, merge_fn)
                if self._is_window_late(actual):
                    merging.retire_window(actual)
                    continue
                skipped = False
                state_window = merging.get_state_window(actual)
                if state_window is None:
                    raise MillraceError(f"window {actual} has no state window")
                self._add_to_pane(actual, state_window, value, ts)
            merging.persist()
        elif self._fast_event_time:
            wm = self._timers.current_watermark()
            for window in windows:
                max_ts = window.max_timestamp()
                if max_ts <= wm:
                    continue  # late (no allowed lateness)
                skipped = False
                contents.set_current_namespace(window)
                contents.add(value)
                self._timers.register_event_time_timer(window, max_ts)
        else:
            for window in windows:
                if self._is_window_late(window):
                    continue
                skipped = False
                self._add_to_pane(window, window, value, ts)
        if skipped and self._is_element_late(ts):
            if self.late_data_tag is not None:  # Flink: sideOutput(element) with lateDataOutputTag
                self.collect_side(self.late_data_tag, value, ts)
            else:
                self.num_late_records_dropped += 1  # Flink: numLateRecordsDropped

    # timers (Triggerable) ------------------------------------------------------------------
    def _on_timer(self, timer: InternalTimer, event_time: bool) -> None:
        tctx, contents = self._tctx, self._contents
        window = timer.namespace
        if self._fast_event_time and event_time:
            # EventTimeTrigger fires at max_timestamp, which is also the cleanup time
            contents.set_current_namespace(window)
            c = self._contents_or_none()
            if c is not None:
                self._emit_window_contents(window, c)
            contents.clear()
            if self._process_fn is not None:
                self._pctx._window = window
                self._process_fn.clear(self._pctx)
            return
        tctx.window = window
        tctx.merged_windows = None
        merging: MergingWindowSet | None = None
        if self._merging_assigner is not None:
            merging = MergingWindowSet(self._merging_assigner, self._merging_set_state)
            state_window = merging.get_state_window(window)
            if state_window is None:
                # the window was merged away or already cleaned up: nothing to do
                return
            contents.set_current_namespace(state_window)
        else:
            contents.set_current_namespace(window)
        result = tctx.on_event_time(timer.timestamp) if event_time else tctx.on_processing_time(timer.timestamp)
        self._fire_and_purge(window, result)
        if self._event_time == event_time and self._cleanup_time(window) == timer.timestamp:
            self._clear_all_state(window, merging)
        if merging is not None:
            merging.persist()

    def on_event_time(self, timer: InternalTimer) -> None:
        self._on_timer(timer, True)

    def _fire_event_time_bucket(self, timestamp: int, timers: dict[tuple[Any, Any], int]) -> None:
        """The timers of one timestamp at once (the batch path: each is its window's end, and firing
        a window registers or deletes no timer): `_on_timer`'s fast branch, in a loop."""
        backend = self.keyed_state_backend
        assert backend is not None
        contents, pctx, call_fn, collect_all = self._contents, self._pctx, self._call_fn, self.collect_all
        get, remove = contents.raw_at, contents.clear_at
        agg_result, process_kind = self._agg_result, self._kind == "process"
        user_clear = self._process_fn.clear if self._user_clear and self._process_fn is not None else None
        for (key, window), kg in timers.items():
            backend._current_key, backend._current_kg = key, kg  # registered for this subtask's key groups
            c = get(kg, key, window)
            pctx._window = window
            if c is not None and (c or not process_kind):
                if agg_result is not None:
                    c = agg_result(c)
                collect_all(call_fn(key, window, pctx, c if process_kind else [c]), timestamp)
                remove(kg, key, window)
            if user_clear is not None:
                user_clear(pctx)

    def on_processing_time(self, timer: InternalTimer) -> None:
        self._on_timer(timer, False)
