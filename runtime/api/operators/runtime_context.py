"""The RuntimeContext user functions see, and the base of keyed operators.

`StreamingRuntimeContext` is Flink's StreamingRuntimeContext: subtask info from the
OperatorContext and keyed state from the operator's KeyedStateBackend (VoidNamespace).
`AbstractKeyedOperator` is the keyed part of Flink's AbstractStreamOperator: it creates the keyed
state backend and timer services at setup, advances event-time timers before forwarding a
watermark, buffers outputs so each input batch / timer round leaves as one ObjectBatch, and
implements the checkpoint contract (`snapshot_state` / `initialize_state`) per key group.
"""
from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from runtime.api.datastream.functions import Function, OutputTag, RuntimeContext
from runtime.api.operators.base import OperatorContext, StreamOperator
from runtime.core.checkpoint import KeyedSnapshot, OperatorSnapshot, StateEntries, StateInitializationContext, snapshot_is_canonical
from runtime.core.errors import MillraceError
from runtime.core.keygroups import assign_to_key_groups
from runtime.core.keys import KeyExtractor, int_key_array
from runtime.core.options import state as state_options
from runtime.core.records import ObjectBatch, RecordBatch, Watermark
from runtime.state import KeyedStateBackend, create_keyed_state_backend
from runtime.state.backend import TIMER_KIND
from runtime.state.timers import InternalTimerService, Triggerable
from runtime.state.type_descriptions import SCALAR_KEY_TYPES, observed_key_types

# the option's keys under their old names (declared in runtime.core.options.state)
STATE_BACKEND_CONFIG_KEYS = (state_options.STATE_BACKEND.key, *state_options.STATE_BACKEND.deprecated_keys)
"""OperatorContext.config keys naming the backend ("hashmap" default, or "rocksdb")."""
ROCKSDB_LOCAL_DIR_KEY = state_options.ROCKSDB_LOCAL_DIRECTORY.key


class StreamingRuntimeContext(RuntimeContext):
    """Flink: StreamingRuntimeContext."""

    def __init__(self, ctx: OperatorContext, keyed_state_backend: KeyedStateBackend | None) -> None:
        self._ctx = ctx
        self._backend = keyed_state_backend

    # subtask info ----------------------------------------------------------------------------
    def get_task_name(self) -> str:
        return self._ctx.task_name

    def get_number_of_parallel_subtasks(self) -> int:
        return self._ctx.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._ctx.max_parallelism

    def get_index_of_this_subtask(self) -> int:
        return self._ctx.subtask_index

    def get_attempt_number(self) -> int:
        return self._ctx.attempt_number

    def get_task_name_with_subtasks(self) -> str:
        c = self._ctx
        return f"{c.task_name} ({c.subtask_index + 1}/{c.parallelism})#{c.attempt_number}"

    def get_job_parameter(self, key: str, default_value: str | None = None) -> str | None:
        return self._ctx.config.get(key, default_value)

    def get_metrics_group(self) -> Any:
        return self._ctx.metrics

    # keyed state -----------------------------------------------------------------------------
    @property
    def keyed_state_backend(self) -> KeyedStateBackend | None:
        return self._backend

    def _keyed(self, descriptor: Any) -> Any:
        if self._backend is None:
            raise MillraceError(
                f"Keyed state can only be used on a KeyedStream: operator {self._ctx.operator_name!r} "
                f"(subtask {self._ctx.subtask_index}) asked for state {getattr(descriptor, 'name', descriptor)!r}. "
                "Call key_by(...) before this operation, or keep the value in a plain attribute."
            )
        return self._backend.get_partitioned_state(descriptor)

    def get_state(self, state_descriptor: Any) -> Any:
        return self._keyed(state_descriptor)

    def get_list_state(self, state_descriptor: Any) -> Any:
        return self._keyed(state_descriptor)

    def get_map_state(self, state_descriptor: Any) -> Any:
        return self._keyed(state_descriptor)

    def get_reducing_state(self, state_descriptor: Any) -> Any:
        return self._keyed(state_descriptor)

    def get_aggregating_state(self, state_descriptor: Any) -> Any:
        return self._keyed(state_descriptor)


def open_function(fn: Any, runtime_context: RuntimeContext) -> None:
    """Call open(runtime_context) on rich functions (plain callables have none)."""
    if isinstance(fn, Function) or callable(getattr(fn, "open", None)):
        fn.open(runtime_context)


def close_function(fn: Any) -> None:
    if isinstance(fn, Function) or callable(getattr(fn, "close", None)):
        fn.close()


def emit_objects(emit: Callable[[ObjectBatch], None], vals: list[Any], tss: list[int | None]) -> None:
    """Values as ObjectBatches, split only where timestamps come and go."""
    has = [t is not None for t in tss]
    if all(has):
        emit(ObjectBatch(vals, np.asarray(tss, dtype=np.int64)))
        return
    if not any(has):
        emit(ObjectBatch(vals, None))
        return
    start = 0
    for i in range(1, len(vals) + 1):
        if i == len(vals) or has[i] != has[start]:
            ts = np.asarray(tss[start:i], dtype=np.int64) if has[start] else None
            emit(ObjectBatch(vals[start:i], ts))
            start = i


def _key_types_of(snapshot: KeyedSnapshot) -> set[str]:
    """The Python types of every key in a keyed snapshot (state entries and timers alike).

    The classes first, in C (measured: ~0.1 s per million keys, memory-bound); only keys of
    classes whose fields matter (tuples, Rows) are described one by one."""
    classes: set[type] = set()
    for states in snapshot.values():
        for _kind, entries in states.values():
            classes.update(map(type, map(_FIRST, entries.pairs if isinstance(entries, StateEntries) else entries)))
    out = {SCALAR_KEY_TYPES[c] for c in classes if c in SCALAR_KEY_TYPES}
    if classes.difference(SCALAR_KEY_TYPES):
        composite: list[Any] = []
        for states in snapshot.values():
            for _kind, entries in states.values():
                composite.extend(k for k in map(_FIRST, entries.pairs if isinstance(entries, StateEntries) else entries) if type(k) not in SCALAR_KEY_TYPES)
        out |= observed_key_types(composite)
    return out


_FIRST = operator.itemgetter(0)


def with_declared_key_type(factory: Callable[[], Any], key_type: Any) -> Any:
    """An operator factory whose keyed operator knows the declared key type (key_by(..., key_type))."""
    op = factory()
    op.declared_key_type = key_type
    return op


class AbstractKeyedOperator(StreamOperator):
    """Keyed state + timers + batched output for one-batch-in, one-batch-out keyed operators."""

    # the key type the program declared (key_by(..., key_type=...)); set on the instance by the
    # DataStream API. Snapshots record it and a restore checks it against the snapshot's keys
    declared_key_type: Any = None

    def __init__(self) -> None:
        super().__init__()
        self.keyed_state_backend: KeyedStateBackend | None = None
        self.runtime_context: StreamingRuntimeContext | None = None
        self._timer_services: dict[str, InternalTimerService] = {}
        self._out_values: list[Any] = []
        self._side_out: dict[str, tuple[list[Any], list[int | None]]] = {}  # side output tag -> collected
        self._out_ts: list[int | None] = []
        # restored timers of services not created yet (they usually are in open(), after the restore)
        self._restored_timers: KeyedSnapshot = {}

    # lifecycle ---------------------------------------------------------------------------
    def setup(self, ctx: OperatorContext) -> None:
        super().setup(ctx)
        backend = state_options.StateBackendSettings.from_config(ctx.config)
        op_id = f"{ctx.uid or ctx.node_id}-{ctx.subtask_index}"
        self.keyed_state_backend = create_keyed_state_backend(
            backend.backend_or_default, ctx.key_group_range, ctx.max_parallelism, op_id, local_dir=backend.rocksdb_local_dir,
            changelog=backend.changelog,
        )
        self.keyed_state_backend.operator_label = f"'{ctx.operator_name}'" + (f" (uid '{ctx.uid}')" if ctx.uid else "")
        self.keyed_state_backend.job_id = ctx.job_id
        if self.declared_key_type is not None:
            self.keyed_state_backend.declare_key_type(self.declared_key_type)
        self.runtime_context = StreamingRuntimeContext(ctx, self.keyed_state_backend)

    def close(self) -> None:
        if self.keyed_state_backend is not None:
            self.keyed_state_backend.dispose()

    def get_internal_timer_service(self, name: str, triggerable: Triggerable) -> InternalTimerService:
        """Flink: AbstractStreamOperator.getInternalTimerService."""
        svc = self._timer_services.get(name)
        if svc is None:
            assert self.ctx is not None and self.keyed_state_backend is not None, "setup() first"
            svc = InternalTimerService(
                name, self.keyed_state_backend, self.ctx.processing_time_service, triggerable, self.flush_output
            )
            self._timer_services[name] = svc
            if self._restored_timers:
                svc.restore_keyed(self._restored_timers)
                for states in self._restored_timers.values():
                    for state_name in svc.state_names():
                        states.pop(state_name, None)
        return svc

    # keys --------------------------------------------------------------------------------
    def _keys_and_groups(self, extractor: KeyExtractor, batch: RecordBatch) -> tuple[list[Any], list[int] | None]:
        """Keys as Python values, plus key groups when they can be computed vectorized."""
        keys = extractor.keys(batch)
        assert self.ctx is not None
        backend = self.keyed_state_backend
        if backend is not None and backend.restored_keys_unchecked:  # the first keys after a restore
            backend.check_restored_keys(keys.tolist() if isinstance(keys, np.ndarray) else keys)
        if isinstance(keys, np.ndarray):
            kgs = assign_to_key_groups(keys, self.ctx.max_parallelism).tolist() if keys.dtype.kind in "iub" else None
            return keys.tolist(), kgs
        ints = int_key_array(keys)  # Python int keys from a key selector: key groups vectorized too
        return keys, (None if ints is None else assign_to_key_groups(ints, self.ctx.max_parallelism).tolist())

    # output ------------------------------------------------------------------------------
    def collect(self, value: Any, timestamp: int | None) -> None:
        self._out_values.append(value)
        self._out_ts.append(timestamp)

    def collect_all(self, values: Iterable[Any] | None, timestamp: int | None) -> None:
        """Collect what a user function returned or yielded (None = nothing); a yielded
        `(OutputTag, value)` goes to that side output (PyFlink's way)."""
        if values is None:
            return
        ov, ot = self._out_values, self._out_ts
        for v in values:
            if type(v) is tuple and len(v) == 2 and isinstance(v[0], OutputTag):
                self.collect_side(v[0].tag_id, v[1], timestamp)
                continue
            ov.append(v)
            ot.append(timestamp)

    def collect_side(self, tag_id: str, value: Any, timestamp: int | None) -> None:
        values, stamps = self._side_out.setdefault(tag_id, ([], []))
        values.append(value)
        stamps.append(timestamp)

    def flush_output(self) -> None:
        """Emit what was collected as ObjectBatches (split only where timestamps come and go)."""
        assert self.output is not None
        if self._out_values:
            vals, tss = self._out_values, self._out_ts
            self._out_values, self._out_ts = [], []
            emit_objects(self.output.emit, vals, tss)
        if self._side_out:
            sides, self._side_out = self._side_out, {}
            output = self.output
            for tag_id, (vals, tss) in sides.items():
                emit_objects(functools.partial(output.emit_side, tag_id), vals, tss)

    # time --------------------------------------------------------------------------------
    def on_watermark(self, timestamp: int) -> None:
        # Flink order: fire event-time timers, then forward the watermark
        for svc in self._timer_services.values():
            svc.advance_watermark(timestamp)
        self.flush_output()
        assert self.output is not None
        self.output.emit_watermark(Watermark(timestamp))

    # state and checkpoints -----------------------------------------------------------------
    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot:
        """Keyed state and timers of this subtask: pinned now, entries built by the supplier."""
        assert self.keyed_state_backend is not None
        # checkpoints in the backend's own format where it has one (RocksDB); savepoints canonical
        backend = self.keyed_state_backend
        native = None if snapshot_is_canonical() else backend.snapshot_native_sync(checkpoint_id)
        shared = backend.shared_checkpoints(checkpoint_id) if native is not None else []
        parts = ([] if native is not None else [self.keyed_state_backend.snapshot_sync()]) + [
            svc.snapshot_sync() for svc in self._timer_services.values()
        ]

        def keyed() -> KeyedSnapshot:
            out: KeyedSnapshot = {}
            for part in parts:
                for kg, states in part().items():
                    out.setdefault(kg, {}).update(states)
            return out

        meta = backend.snapshot_meta()
        tracked = backend.tracked_key_types()

        def state_meta(snapshot: KeyedSnapshot) -> dict[str, Any]:
            # the keys' types, from the keys the snapshot holds (asynchronous part: no cost per record)
            meta["key"]["observed"] = sorted(tracked | _key_types_of(snapshot))
            return meta

        return OperatorSnapshot(keyed=keyed, native=native, shared_checkpoints=shared, state_meta=state_meta)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        if self.keyed_state_backend is not None:
            self.keyed_state_backend.notify_checkpoint_complete(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        if self.keyed_state_backend is not None:
            self.keyed_state_backend.notify_checkpoint_aborted(checkpoint_id)

    def initialize_state(self, context: StateInitializationContext) -> None:
        """Restore keyed state and timers of the key groups this subtask owns (after setup, before open).

        Other key groups are ignored. Timers of services created later (in open) are kept until then.
        """
        assert self.keyed_state_backend is not None and self.ctx is not None
        rng = self.ctx.key_group_range
        mine = {kg: states for kg, states in context.keyed.items() if kg in rng}
        if context.native:  # a native RocksDB checkpoint: its entries of these key groups
            from runtime.state.rocksdb import native_to_keyed

            for kg, states in native_to_keyed(context.native, rng).items():
                mine.setdefault(kg, {}).update(states)
        if not mine:
            return
        self.keyed_state_backend.restore_keyed(mine, context.state_meta)
        taken: set[str] = set()
        for svc in self._timer_services.values():
            svc.restore_keyed(mine)
            taken.update(svc.state_names())
        for kg, states in mine.items():
            timers = {n: e for n, e in states.items() if e[0] == TIMER_KIND and n not in taken}
            if timers:
                self._restored_timers.setdefault(kg, {}).update(timers)
