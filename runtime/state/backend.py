"""The keyed state backend interface and the state objects both backends share.

Port of Flink's AbstractKeyedStateBackend + the InternalKvState family: state is addressed by
(state name, key group, key, namespace). The backend holds the *current key* (set by the operator
before it calls user code); a state object holds its *current namespace* (None = Flink's
VoidNamespace; windows use the window). Storage is a `StateTable` per state name, implemented by
the hashmap backend (dicts) and the RocksDB backend (rocksdict); the state objects on top are
common, so both backends behave the same.

Checkpoints follow runtime.core.checkpoint: `snapshot_sync()` pins the state on the task thread
(cheap) and returns a supplier that builds the `KeyedSnapshot` -- {key group: {state name: (kind,
[(key, namespace, value), ...])}}, list values as lists, map values as dicts -- later, on the
snapshot thread. The format is the same for both backends, so `restore_keyed` loads a snapshot
into either backend and with a different KeyGroupRange (rescaling: it keeps only its key groups).

Types (Flink: the state meta info and key serializer a snapshot records): `snapshot_meta` says what
each state's descriptor declared and what the keys are; a restore given that record checks it as
Flink does: the key type at once if the program declares one (else on the first keys,
`check_restored_keys`), each state's type when the program registers the state (its descriptor
is known only then): compatible as is, migrated (the restored values converted), or refused with
IncompatibleStateError (runtime.state.compatibility).
"""
from __future__ import annotations

import abc
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

from runtime.core.checkpoint import KeyedSnapshot
from runtime.core.errors import IncompatibleStateError, MillraceError
from runtime.core.gc_pause import gc_paused
from runtime.core.keygroups import KeyGroupRange, assign_to_key_group
from runtime.core.state import (
    AggregatingState,
    AggregatingStateDescriptor,
    ListState,
    MapState,
    ReducingState,
    ReducingStateDescriptor,
    StateDescriptor,
    StateKind,
    ValueState,
)
from runtime.state.compatibility import KeyTypes, SchemaCompatibility, resolve_key_compatibility, resolve_schema_compatibility
from runtime.state.type_descriptions import (
    TypeDescription,
    describe_state,
    describe_type_info,
    format_type,
    is_known,
    observed_key_types,
)

_log = logging.getLogger(__name__)

VOID_NAMESPACE = None
"""Flink's VoidNamespace: the namespace of state that is not scoped to a window."""

# kinds of keyed-snapshot entries that belong to operators, not to the state backend
TIMER_KIND = "timer"
PANE_KIND = "pane"

_MISSING = object()


class StateError(MillraceError):
    """Keyed state was used wrongly (no current key, kind mismatch, key outside the range)."""


# --------------------------------------------------------------------------- storage tables
class StateTable(abc.ABC):
    """Storage of one named state. Values are canonical: list state -> list, map state -> dict."""

    def __init__(self, name: str, kind: str) -> None:
        self.name = name
        self.kind = kind

    @abc.abstractmethod
    def get(self, kg: int, key: Any, ns: Any) -> Any:
        """The value, or None if absent."""

    @abc.abstractmethod
    def put(self, kg: int, key: Any, ns: Any, value: Any) -> None: ...

    @abc.abstractmethod
    def remove(self, kg: int, key: Any, ns: Any) -> None: ...

    @abc.abstractmethod
    def keys(self, namespace: Any) -> Iterator[Any]:
        """Keys that have a value in `namespace` (Flink: KeyedStateBackend.getKeys)."""

    @abc.abstractmethod
    def keys_and_namespaces(self) -> Iterator[tuple[Any, Any]]: ...

    def put_all(self, kg: int, entries: Sequence[tuple[Any, Any, Any]]) -> None:
        """Put (key, namespace, canonical value) entries of one key group (restore)."""
        put = self.put
        for key, ns, value in entries:
            put(kg, key, ns, value)

    # list and map primitives; the defaults work on the canonical value (the heap backend keeps
    # them; RocksDB overrides them with one entry per element / map key).
    def list_add(self, kg: int, key: Any, ns: Any, value: Any) -> None:
        cur = self.get(kg, key, ns)
        if cur is None:
            self.put(kg, key, ns, [value])
        else:
            cur.append(value)
            self.put(kg, key, ns, cur)

    def list_add_all(self, kg: int, key: Any, ns: Any, values: list[Any]) -> None:
        if not values:
            return
        cur = self.get(kg, key, ns)
        self.put(kg, key, ns, list(values) if cur is None else cur + list(values))

    def map_get(self, kg: int, key: Any, ns: Any, user_key: Any) -> Any:
        d = self.get(kg, key, ns)
        return None if d is None else d.get(user_key)

    def map_contains(self, kg: int, key: Any, ns: Any, user_key: Any) -> bool:
        d = self.get(kg, key, ns)
        return d is not None and user_key in d

    def map_put(self, kg: int, key: Any, ns: Any, user_key: Any, value: Any) -> None:
        d = self.get(kg, key, ns)
        if d is None:
            d = {}
        d[user_key] = value
        self.put(kg, key, ns, d)

    def map_put_all(self, kg: int, key: Any, ns: Any, values: Mapping[Any, Any]) -> None:
        d = self.get(kg, key, ns) or {}
        d.update(values)
        if d:
            self.put(kg, key, ns, d)

    def map_remove(self, kg: int, key: Any, ns: Any, user_key: Any) -> None:
        d = self.get(kg, key, ns)
        if d is not None and user_key in d:
            del d[user_key]
            if d:
                self.put(kg, key, ns, d)
            else:
                self.remove(kg, key, ns)

    def map_items(self, kg: int, key: Any, ns: Any) -> list[tuple[Any, Any]]:
        d = self.get(kg, key, ns)
        return [] if d is None else list(d.items())


# --------------------------------------------------------------------------- state objects
class _KvState:
    """Common part of every state object: backend (current key), table, current namespace."""

    __slots__ = ("_backend", "_table", "_ns", "descriptor")

    def __init__(self, backend: KeyedStateBackend, table: StateTable, descriptor: StateDescriptor, namespace: Any) -> None:
        self._backend = backend
        self._table = table
        self._ns = namespace
        self.descriptor = descriptor

    # Flink: InternalKvState.setCurrentNamespace (internal; used by the window operator)
    def set_current_namespace(self, namespace: Any) -> None:
        self._ns = namespace

    @property
    def namespace(self) -> Any:
        return self._ns

    def _kk(self) -> tuple[int, Any]:
        b = self._backend
        if b._current_kg < 0:
            raise StateError(
                f"state {self._table.name!r} was used with no current key: keyed state is only "
                "available while an element or timer of a KeyedStream is being processed"
            )
        return b._current_kg, b._current_key

    def clear(self) -> None:
        kg, key = self._kk()
        self._table.remove(kg, key, self._ns)

    # Explicit (key group, key, namespace) access for the window operator's per-record loop, which
    # knows all three: one call instead of setting the backend's key and this state's namespace.
    def raw_at(self, kg: int, key: Any, ns: Any) -> Any:
        """The stored value (a list, the reduced value or the accumulator), or None."""
        return self._table.get(kg, key, ns)

    def clear_at(self, kg: int, key: Any, ns: Any) -> None:
        self._table.remove(kg, key, ns)

    # merging (Flink: InternalMergingState.mergeNamespaces)
    def _merge_values(self, a: Any, b: Any) -> Any:
        raise StateError(f"state {self._table.name!r} of kind {self._table.kind} cannot be merged")

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        """Merge the values of `sources` into `target` and remove them (session windows)."""
        kg, key = self._kk()
        table = self._table
        merged: Any = None
        for src in sources:
            v = table.get(kg, key, src)
            if v is None:
                continue
            table.remove(kg, key, src)
            merged = v if merged is None else self._merge_values(merged, v)
        if merged is not None:
            cur = table.get(kg, key, target)
            table.put(kg, key, target, merged if cur is None else self._merge_values(cur, merged))


class KvValueState(_KvState, ValueState):
    __slots__ = ()

    def value(self) -> Any:
        kg, key = self._kk()
        return self._table.get(kg, key, self._ns)

    def update(self, value: Any) -> None:
        kg, key = self._kk()
        self.update_at(kg, key, self._ns, value)

    def update_at(self, kg: int, key: Any, ns: Any, value: Any) -> None:
        if value is None:  # Flink: update(null) clears the value
            self._table.remove(kg, key, ns)
        else:
            self._table.put(kg, key, ns, value)


class KvListState(_KvState, ListState):
    __slots__ = ()

    def get(self) -> list[Any]:
        kg, key = self._kk()
        v = self._table.get(kg, key, self._ns)
        return [] if v is None else v

    def add(self, value: Any) -> None:
        if value is None:
            raise StateError(f"list state {self._table.name!r}: cannot add None")
        kg, key = self._kk()
        self._table.list_add(kg, key, self._ns, value)

    def add_all(self, values: list[Any]) -> None:
        kg, key = self._kk()
        self._table.list_add_all(kg, key, self._ns, list(values))

    def add_at(self, kg: int, key: Any, ns: Any, value: Any) -> None:
        if value is None:
            raise StateError(f"list state {self._table.name!r}: cannot add None")
        self._table.list_add(kg, key, ns, value)

    def update(self, values: list[Any]) -> None:
        kg, key = self._kk()
        values = list(values)
        if values:
            self._table.put(kg, key, self._ns, values)
        else:
            self._table.remove(kg, key, self._ns)

    def _merge_values(self, a: Any, b: Any) -> Any:
        return list(a) + list(b)


class KvReducingState(_KvState, ReducingState):
    __slots__ = ("_reduce",)

    def __init__(self, backend: KeyedStateBackend, table: StateTable, descriptor: ReducingStateDescriptor, namespace: Any) -> None:
        super().__init__(backend, table, descriptor, namespace)
        self._reduce = descriptor.reduce

    def get(self) -> Any:
        kg, key = self._kk()
        return self._table.get(kg, key, self._ns)

    def add(self, value: Any) -> None:
        kg, key = self._kk()
        self.add_at(kg, key, self._ns, value)

    def add_at(self, kg: int, key: Any, ns: Any, value: Any) -> None:
        table = self._table
        cur = table.get(kg, key, ns)
        table.put(kg, key, ns, value if cur is None else self._reduce(cur, value))

    def _merge_values(self, a: Any, b: Any) -> Any:
        return self._reduce(a, b)


class KvAggregatingState(_KvState, AggregatingState):
    __slots__ = ("_agg",)

    def __init__(self, backend: KeyedStateBackend, table: StateTable, descriptor: AggregatingStateDescriptor, namespace: Any) -> None:
        super().__init__(backend, table, descriptor, namespace)
        self._agg = descriptor.agg_function

    def get(self) -> Any:
        kg, key = self._kk()
        acc = self._table.get(kg, key, self._ns)
        return None if acc is None else self._agg.get_result(acc)

    def get_accumulator(self) -> Any:
        kg, key = self._kk()
        return self._table.get(kg, key, self._ns)

    def add(self, value: Any) -> None:
        kg, key = self._kk()
        self.add_at(kg, key, self._ns, value)

    def add_at(self, kg: int, key: Any, ns: Any, value: Any) -> None:
        table, agg = self._table, self._agg
        acc = table.get(kg, key, ns)
        if acc is None:
            acc = agg.create_accumulator()
        table.put(kg, key, ns, agg.add(value, acc))

    def _merge_values(self, a: Any, b: Any) -> Any:
        return self._agg.merge(a, b)


class KvMapState(_KvState, MapState):
    __slots__ = ()

    def get(self, key: Any) -> Any:
        kg, k = self._kk()
        return self._table.map_get(kg, k, self._ns, key)

    def put(self, key: Any, value: Any) -> None:
        kg, k = self._kk()
        self._table.map_put(kg, k, self._ns, key, value)

    def put_all(self, dict_value: Mapping[Any, Any]) -> None:
        kg, k = self._kk()
        self._table.map_put_all(kg, k, self._ns, dict(dict_value))

    def remove(self, key: Any) -> None:
        kg, k = self._kk()
        self._table.map_remove(kg, k, self._ns, key)

    def contains(self, key: Any) -> bool:
        kg, k = self._kk()
        return self._table.map_contains(kg, k, self._ns, key)

    def items(self) -> list[tuple[Any, Any]]:
        kg, k = self._kk()
        return self._table.map_items(kg, k, self._ns)

    def keys(self) -> list[Any]:
        return [k for k, _ in self.items()]

    def values(self) -> list[Any]:
        return [v for _, v in self.items()]

    def is_empty(self) -> bool:
        return not self.items()


_STATE_CLASSES: dict[str, type[_KvState]] = {
    StateKind.VALUE: KvValueState,
    StateKind.LIST: KvListState,
    StateKind.MAP: KvMapState,
    StateKind.REDUCING: KvReducingState,
    StateKind.AGGREGATING: KvAggregatingState,
}


# --------------------------------------------------------------------------- the backend
# the StateTable class of a backend (its tables are all of one implementation)
TableT = TypeVar("TableT", bound=StateTable)


class KeyedStateBackend(abc.ABC, Generic[TableT]):
    """Flink: AbstractKeyedStateBackend. One per keyed operator subtask; task thread only."""

    kind: str = ""

    def __init__(self, key_group_range: KeyGroupRange, max_parallelism: int, operator_id: str) -> None:
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self.operator_id = operator_id
        self._tables: dict[str, TableT] = {}
        self._current_key: Any = None
        self._current_kg = -1
        # processing time in ms for state TTL (settable: tests inject a clock)
        self.ttl_clock: Callable[[], float] = time.time
        # how messages name the operator ("'counts' (uid 'counts')") and the job it runs in; the
        # operator sets them
        self.operator_label = repr(operator_id)
        self.job_id: str | None = None
        # types: declared by the descriptors registered in this run, and recorded by the snapshot
        # this backend restored (compared when a state is registered)
        self._state_types: dict[str, TypeDescription | None] = {}
        self._restored_types: dict[str, TypeDescription | None] = {}
        self._declared_key_type: TypeDescription | None = None
        self._restored_keys: KeyTypes | None = None  # checked against the first keys, then None

    def ttl_time_ms(self) -> int:
        return int(self.ttl_clock() * 1000)

    # current key ---------------------------------------------------------------------------
    def set_current_key(self, key: Any) -> None:
        kg = assign_to_key_group(key, self.max_parallelism)
        self.set_current_key_and_group(key, kg)

    def set_current_key_and_group(self, key: Any, key_group: int) -> None:
        """Like set_current_key when the key group is already known (timers, vectorized keys)."""
        rng = self.key_group_range
        if not rng.start <= key_group <= rng.end:
            raise StateError(
                f"operator {self.operator_id}: key {key!r} is in key group {key_group}, outside this "
                f"subtask's key groups {rng.start}..{rng.end}. The input is not partitioned by this "
                "key: a keyed operator must follow key_by() with the same key selector."
            )
        self._current_key = key
        self._current_kg = key_group

    def check_key_groups(self, keys: Sequence[Any], key_groups: Sequence[int]) -> None:
        """What set_current_key_and_group checks, for a batch of keys at once."""
        rng = self.key_group_range
        if key_groups and not (rng.start <= min(key_groups) and max(key_groups) <= rng.end):
            for key, kg in zip(keys, key_groups):
                self.set_current_key_and_group(key, kg)  # raises for the first key outside the range

    def get_current_key(self) -> Any:
        return self._current_key

    @property
    def current_key_group(self) -> int:
        return self._current_kg

    # states ----------------------------------------------------------------------------------
    @abc.abstractmethod
    def _create_table(self, name: str, kind: str) -> TableT: ...

    def _table(self, name: str, kind: str) -> TableT:
        t = self._tables.get(name)
        if t is None:
            t = self._tables[name] = self._create_table(name, kind)
        elif t.kind != kind:
            raise StateError(
                f"operator {self.operator_id}: state {name!r} is a {t.kind} state but was requested as "
                f"a {kind} state; use a different state name"
            )
        return t

    def get_partitioned_state(self, descriptor: StateDescriptor, namespace: Any = VOID_NAMESPACE) -> Any:
        """A state object for `descriptor`, bound to the current key and `namespace`.

        The first request of a state in this run registers its type: a restored state is checked
        against the type its snapshot recorded, and migrated if it must be (see the module doc).
        """
        kind = getattr(descriptor, "kind", None)
        if not isinstance(kind, str) or kind not in _STATE_CLASSES:
            raise StateError(f"{descriptor!r} is not a state descriptor")
        cls = _STATE_CLASSES[kind]
        if getattr(descriptor, "ttl_config", None) is not None:
            from runtime.state.ttl import TTL_STATE_CLASSES

            cls = TTL_STATE_CLASSES[kind]
        table = self._table(descriptor.name, kind)
        if descriptor.name not in self._state_types:
            self._register_state_type(descriptor, table)
        return cls(self, table, descriptor, namespace)

    # types (Flink: state meta info and serializer compatibility on restore) ----------------------
    def declare_key_type(self, type_info: Any) -> None:
        """The key type the program declares (key_by(..., key_type=...)); checked at restore."""
        self._declared_key_type = describe_type_info(type_info)

    def _register_state_type(self, descriptor: StateDescriptor, table: StateTable) -> None:
        name = descriptor.name
        new = describe_state(descriptor)
        if name in self._restored_types:
            old = self._restored_types[name]
            compatibility = resolve_schema_compatibility(old, new)
            if compatibility.is_incompatible:
                raise IncompatibleStateError(
                    f"cannot restore state {name!r} of operator {self.operator_label}: it was written as {format_type(old)} and "
                    f"the program now declares {format_type(new)} ({compatibility.reason}). A state's new type must be compatible "
                    "with its old one: the same type, a widened number (INT -> LONG, FLOAT -> DOUBLE, INT -> DOUBLE), or a ROW with "
                    "nullable fields added at the end. Keep the old type, give the state a new name (it then starts empty), "
                    "or start the job without the savepoint."
                )
            if compatibility.is_compatible_after_migration:
                self._migrate_state(table, old, new, compatibility)
        self._state_types[name] = new

    def _migrate_state(self, table: StateTable, old: TypeDescription | None, new: TypeDescription | None, compatibility: SchemaCompatibility) -> None:
        """Convert every restored value of `table` once (Flink: a full-scan state migration).

        A list state's type is its element's, a map state's its (user key, value); values of a
        state with TTL are TtlValue(value, timestamp): the value is converted, the time kept.
        """
        from runtime.state.ttl import TtlValue  # ttl builds on this module

        def leaf(fn: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
            if fn is None:
                return lambda v: v
            return lambda v: TtlValue(fn(v.value), v.last_access_ms) if isinstance(v, TtlValue) else fn(v)

        convert: Callable[[Any], Any]
        if table.kind == StateKind.LIST:
            element = leaf(compatibility.migrate)

            def convert_list(values: list[Any]) -> list[Any]:
                return [element(v) for v in values]

            convert = convert_list
        elif table.kind == StateKind.MAP:
            assert isinstance(old, dict) and isinstance(new, dict)
            user_key = resolve_schema_compatibility(old["map"][0], new["map"][0]).migrate or (lambda k: k)
            value = leaf(resolve_schema_compatibility(old["map"][1], new["map"][1]).migrate)

            def convert_map(d: dict[Any, Any]) -> dict[Any, Any]:
                return {user_key(k): value(v) for k, v in d.items()}

            convert = convert_map
        else:
            convert = leaf(compatibility.migrate)
        migrated = 0
        for key, ns in list(table.keys_and_namespaces()):
            kg = assign_to_key_group(key, self.max_parallelism)
            stored = table.get(kg, key, ns)
            if stored is None:
                continue
            try:
                table.put(kg, key, ns, convert(stored))
            except Exception as e:  # a value that does not fit its recorded type
                raise IncompatibleStateError(
                    f"cannot migrate state {table.name!r} of operator {self.operator_label} from {format_type(old)} to "
                    f"{format_type(new)}: the value of key {key!r} ({stored!r}) does not convert: {type(e).__name__}: {e}. "
                    "Keep the old type, or give the state a new name."
                ) from e
            migrated += 1
        _log.info("operator %s: state %r migrated from %s to %s (%d entries)", self.operator_label, table.name, format_type(old), format_type(new), migrated)

    def restore_meta(self, meta: Mapping[str, Any] | None) -> None:
        """What the restored snapshot recorded (runtime.storage.state_files' state meta rows):
        each state's type, kept for when the program registers the state, and the key types,
        checked now against a declared key type or later against the first keys."""
        if not meta:
            return  # written before types were recorded: nothing to check (never refused)
        for name, info in (meta.get("states") or {}).items():
            self._restored_types.setdefault(name, (info or {}).get("type"))
        old = KeyTypes.from_record(meta.get("key"))
        if old.python_types() is None:
            return
        if is_known(self._declared_key_type):
            self._check_keys(old, KeyTypes(declared=self._declared_key_type))
        elif self.job_id is None or meta.get("job") != self.job_id:
            # keys seen are data: a failover of the same job (same program) is not checked by
            # them, or a first batch of keys of a type its state never had would fail it for good
            self._restored_keys = old

    def check_restored_keys(self, keys: Sequence[Any]) -> None:
        """The first keys after a restore (of a program that declares no key type) must be of a
        type the snapshot's keys had (the operator calls this with its first input batch)."""
        old, self._restored_keys = self._restored_keys, None
        if old is not None and len(keys):
            self._check_keys(old, KeyTypes(observed=frozenset(observed_key_types(keys))))

    @property
    def restored_keys_unchecked(self) -> bool:
        return self._restored_keys is not None

    def _check_keys(self, old: KeyTypes, new: KeyTypes) -> None:
        compatibility = resolve_key_compatibility(old, new)
        if compatibility.is_incompatible:
            raise IncompatibleStateError(
                f"cannot restore the keyed state of operator {self.operator_label}: {compatibility.reason}. Key by the old "
                "type, give the operator a new uid (its state then starts empty), or start the job without the savepoint."
            )

    def snapshot_meta(self) -> dict[str, Any]:
        """What a snapshot records besides the entries (task thread, cheap): every state's kind and
        type (registered in this run, else as restored) and the declared key type. The observed
        key types are added from the snapshot's keys by the operator (`observed_key_types`)."""
        states = {
            name: {"kind": t.kind, "type": self._state_types[name] if name in self._state_types else self._restored_types.get(name)}
            for name, t in self._tables.items()
        }
        return {"job": self.job_id, "key": {"declared": self._declared_key_type, "observed": None}, "states": states}

    def tracked_key_types(self) -> set[str]:
        """Key types this backend saw being written, for snapshots whose keys are not iterated
        (a RocksDB native checkpoint); the heap backend's snapshots always iterate them."""
        return set()

    def registered_state_names(self) -> list[str]:
        return list(self._tables)

    def get_keys(self, state_name: str, namespace: Any = VOID_NAMESPACE) -> Iterator[Any]:
        """Keys with a value of `state_name` in `namespace` (Flink: getKeys)."""
        t = self._tables.get(state_name)
        return iter(()) if t is None else t.keys(namespace)

    def get_keys_and_namespaces(self, state_name: str) -> Iterator[tuple[Any, Any]]:
        t = self._tables.get(state_name)
        return iter(()) if t is None else t.keys_and_namespaces()

    # checkpoints (runtime.core.checkpoint) -------------------------------------------------------
    def snapshot_native_sync(self, checkpoint_id: int | None = None) -> Callable[[], Any] | None:
        """A checkpoint in the backend's own format (a supplier of a NativeStateBundle), or None
        when it has none (then snapshot_sync's canonical entries are written)."""
        return None

    def shared_checkpoints(self, checkpoint_id: int) -> list[int]:
        """Earlier checkpoints whose state files the native snapshot `checkpoint_id` builds on
        (incremental checkpoints); [] for a self-contained one."""
        return []

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint `checkpoint_id` is durable (incremental checkpoints build on it from now)."""

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Checkpoint `checkpoint_id` was discarded."""

    @abc.abstractmethod
    def snapshot_sync(self) -> Callable[[], KeyedSnapshot]:
        """The synchronous part of a snapshot (task thread, cheap): pin the current state.

        Returns a supplier, to be called once on any thread, that builds the KeyedSnapshot of this
        backend's key groups (key groups and states without entries are left out). Updates made
        after snapshot_sync returns never show in what the supplier builds.
        """

    def restore_keyed(self, snapshot: KeyedSnapshot, meta: Mapping[str, Any] | None = None) -> None:
        """Load the key groups of `snapshot` that this backend owns; others are ignored.

        Either backend may have written it. Entries of operator-internal kinds (timers, panes) are
        left to their operators. May be called several times (rescaling merges the snapshots of
        several old subtasks); an entry overwrites the same (state, key, namespace). `meta` is
        what the snapshot recorded of its types (see `restore_meta`).
        """
        self.restore_meta(meta)
        rng = self.key_group_range
        with gc_paused():
            for kg, states in snapshot.items():
                if kg not in rng:
                    continue
                for name, (kind, entries) in states.items():
                    if kind in _STATE_CLASSES and entries:
                        self._table(name, kind).put_all(kg, entries)

    def dispose(self) -> None:
        """Release resources (files of the RocksDB backend)."""

    close = dispose


