"""The broadcast state pattern (Flink: CoBroadcastWithNonKeyedOperator, CoBroadcastWithKeyedOperator).

Input 0 is the element side (non-broadcast; keyed for the keyed variant), input 1 the broadcast
side: every subtask sees every broadcast element and keeps its own copy of the broadcast state
(one dict per MapStateDescriptor named in `broadcast()`). The element side reads it only, the
broadcast side may write it, so the copies stay equal as long as the function is deterministic
(Flink's contract). Checkpoints and savepoints hold subtask 0's copy as union list state; every
subtask of a restored job (at any parallelism) starts from it.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from runtime.api.datastream.functions import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    OutputTag,
    TimeDomain,
    TimerService,
)
from runtime.api.datastream.state import BroadcastState, MapStateDescriptor, ReadOnlyBroadcastState
from runtime.api.operators.base import OperatorContext, StreamOperator
from runtime.api.operators.keyed_process import AbstractKeyedProcessOperator, KeyedTimerContext, close_function, open_function
from runtime.api.operators.runtime_context import emit_objects
from runtime.core.checkpoint import OperatorSnapshot, StateInitializationContext
from runtime.core.errors import InvalidProgramError
from runtime.core.keys import KeyExtractor
from runtime.core.records import RecordBatch

BROADCAST_STATE = "__broadcast_state__"  # union list of (state name, key, value)


class _BroadcastStates:
    """The operator's copies of its broadcast states, and their snapshot/restore."""

    def __init__(self, descriptors: list[MapStateDescriptor]) -> None:
        self.names = [d.name for d in descriptors]
        self.maps: dict[str, dict[Any, Any]] = {n: {} for n in self.names}

    def view(self, descriptor: Any, writable: bool) -> ReadOnlyBroadcastState:
        name = getattr(descriptor, "name", None)
        if name not in self.maps:
            raise InvalidProgramError(
                f"get_broadcast_state({descriptor!r}): not a broadcast state of this stream; "
                f"broadcast() was given {self.names}"
            )
        return (BroadcastState if writable else ReadOnlyBroadcastState)(name, self.maps[name])

    def snapshot(self, subtask_index: int) -> list[tuple[str, Any, Any]]:
        if subtask_index != 0:  # the copies are equal: one is enough
            return []
        return [(name, k, v) for name, d in self.maps.items() for k, v in d.items()]

    def restore(self, context: StateInitializationContext) -> None:
        for name, k, v in context.union_lists.get(BROADCAST_STATE, []):
            if name in self.maps:  # a state this program no longer broadcasts is dropped
                self.maps[name][k] = v


class _BroadcastOperator(Protocol):
    """What the contexts use of their operator (BroadcastProcessOperator, KeyedBroadcastProcessOperator)."""

    broadcast_states: _BroadcastStates

    @property
    def ctx(self) -> OperatorContext | None: ...

    @property
    def current_watermark(self) -> int: ...

    def collect_side(self, tag_id: str, value: Any, ts: int | None) -> None: ...


class _Contexts:
    """Context methods both variants share (the operator is `_op`)."""

    __slots__ = ()
    # slots of the subclasses
    _op: _BroadcastOperator
    _ts: int | None
    _writable: bool

    def timestamp(self) -> int | None:
        return self._ts

    def current_processing_time(self) -> int:
        ctx = self._op.ctx
        if ctx is None:
            raise RuntimeError("current_processing_time(): the operator is not set up yet")
        return ctx.processing_time_service.current_processing_time()

    def current_watermark(self) -> int:
        return self._op.current_watermark

    def get_broadcast_state(self, state_descriptor: Any) -> Any:
        return self._op.broadcast_states.view(state_descriptor, self._writable)

    def output(self, output_tag: OutputTag, value: Any) -> None:
        self._op.collect_side(output_tag.tag_id, value, self._ts)


# --- non-keyed ---------------------------------------------------------------------------------
class _NonKeyedContext(_Contexts, BroadcastProcessFunction.Context, BroadcastProcessFunction.ReadOnlyContext):
    __slots__ = ("_op", "_ts", "_writable")

    def __init__(self, op: BroadcastProcessOperator, writable: bool) -> None:
        self._op, self._ts, self._writable = op, None, writable


class BroadcastProcessOperator(StreamOperator):
    num_inputs = 2

    def __init__(self, function: BroadcastProcessFunction, descriptors: list[MapStateDescriptor]) -> None:
        super().__init__()
        self.function = function
        self.broadcast_states = _BroadcastStates(descriptors)
        self._values: list[Any] = []
        self._stamps: list[int | None] = []
        self._side: dict[str, tuple[list[Any], list[int | None]]] = {}

    def initialize_state(self, context: StateInitializationContext) -> None:
        self.broadcast_states.restore(context)

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        assert self.ctx is not None
        return OperatorSnapshot(union_lists={BROADCAST_STATE: self.broadcast_states.snapshot(self.ctx.subtask_index)})

    def open(self) -> None:
        self._contexts = (_NonKeyedContext(self, False), _NonKeyedContext(self, True))
        assert self.ctx is not None
        open_function(self.function, _runtime_context(self.ctx))

    def close(self) -> None:
        close_function(self.function)

    def collect_side(self, tag_id: str, value: Any, ts: int | None) -> None:
        vals, tss = self._side.setdefault(tag_id, ([], []))
        vals.append(value)
        tss.append(ts)

    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        fn = self.function.process_element if input_index == 0 else self.function.process_broadcast_element
        ctx = self._contexts[input_index]
        for v, ts in batch.records_with_timestamps():
            ctx._ts = ts
            _collect(self, fn(v, ctx), ts)
        self._flush()

    def _flush(self) -> None:
        assert self.output is not None
        if self._values:
            vals, tss, self._values, self._stamps = self._values, self._stamps, [], []
            emit_objects(self.output.emit, vals, tss)
        if self._side:
            sides, self._side = self._side, {}
            output = self.output
            for tag_id, (vals, tss) in sides.items():
                emit_objects(functools.partial(output.emit_side, tag_id), vals, tss)


def _collect(op: Any, results: Iterable[Any] | None, ts: int | None) -> None:
    if results is None:
        return
    for r in results:
        if type(r) is tuple and len(r) == 2 and isinstance(r[0], OutputTag):
            op.collect_side(r[0].tag_id, r[1], ts)
        else:
            op._values.append(r)
            op._stamps.append(ts)


def _runtime_context(ctx: OperatorContext) -> Any:
    from runtime.api.operators.runtime_context import StreamingRuntimeContext

    return StreamingRuntimeContext(ctx, None)


# --- keyed -------------------------------------------------------------------------------------
class _KeyedReadOnlyContext(_Contexts, KeyedTimerContext, KeyedBroadcastProcessFunction.OnTimerContext):
    """Element side and on_timer: keyed state, timers, the broadcast state read-only."""

    __slots__ = ("_writable",)
    _op: KeyedBroadcastProcessOperator

    def __init__(self, op: KeyedBroadcastProcessOperator, timer_service: TimerService) -> None:
        KeyedTimerContext.__init__(self, op, timer_service)
        self._writable = False


class _KeyedBroadcastContext(_Contexts, KeyedBroadcastProcessFunction.Context):
    """Broadcast side: no current key; the broadcast state writable; every key's state via apply_to_keyed_state."""

    __slots__ = ("_op", "_ts", "_writable")
    _op: KeyedBroadcastProcessOperator

    def __init__(self, op: KeyedBroadcastProcessOperator) -> None:
        self._op, self._ts, self._writable = op, None, True

    def apply_to_keyed_state(self, state_descriptor: Any, function: Callable[[Any, Any], None]) -> None:
        """Call function(key, state) for every key of this subtask that has `state_descriptor`'s state."""
        backend = self._op.keyed_state_backend
        assert backend is not None
        state = backend.get_partitioned_state(state_descriptor)
        for key in list(backend.get_keys(state_descriptor.name)):
            backend.set_current_key(key)
            function(key, state)


class KeyedBroadcastProcessOperator(AbstractKeyedProcessOperator):
    num_inputs = 2
    context_type = _KeyedReadOnlyContext

    def __init__(self, key_selector: Any, function: KeyedBroadcastProcessFunction, descriptors: list[MapStateDescriptor]) -> None:
        super().__init__(function)
        self.key_selector = key_selector
        self._key = KeyExtractor(key_selector)
        self.broadcast_states = _BroadcastStates(descriptors)

    def initialize_state(self, context: StateInitializationContext) -> None:
        super().initialize_state(context)
        self.broadcast_states.restore(context)

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot:
        snap = super().snapshot_state(checkpoint_id)
        assert self.ctx is not None
        snap.union_lists[BROADCAST_STATE] = self.broadcast_states.snapshot(self.ctx.subtask_index)
        return snap

    def open(self) -> None:
        super().open()
        self._bctx = _KeyedBroadcastContext(self)

    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        if input_index == 0:
            self._process_keyed(batch, self._key, self.function.process_element)
            return
        ctx = self._bctx
        for v, ts in batch.records_with_timestamps():
            ctx._ts = ts
            self.collect_all(self.function.process_broadcast_element(v, ctx), ts)
        self.flush_output()


__all__ = ["BroadcastProcessOperator", "KeyedBroadcastProcessOperator", "BroadcastState", "ReadOnlyBroadcastState", "TimeDomain"]
