"""State time-to-live (Flink: TtlStateFactory and its Ttl*State decorators).

A state whose descriptor has a StateTtlConfig stores its values as TtlValue(value, last access ms)
in the same tables, so both backends, checkpoints, savepoints and rescaling carry the timestamps.
Value, reducing and aggregating states expire as a whole; every list element and map entry has its
own timestamp. Time is the backend's `ttl_time_ms` (processing time; injectable in tests). An
expired entry is removed when it is read (Flink's cleanup on access); entries never read again
stay until their key is (Flink's background cleanups, incremental and in RocksDB compaction, are
accepted by the builder and not run). A value stored without TTL (state restored from a job
without it) counts as written now.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from runtime.core.state import StateTtlConfig
from runtime.state.backend import KvAggregatingState, KvListState, KvMapState, KvReducingState, KvValueState, StateKind, _KvState


class TtlValue(NamedTuple):
    value: Any
    last_access_ms: int


class _TtlMixin(_KvState):
    """Expiry checks shared by the TTL states (each also derives from the plain state of its kind)."""

    __slots__ = ()

    def _config(self) -> StateTtlConfig:
        return self.descriptor.ttl_config

    def _now(self) -> int:
        return self._backend.ttl_time_ms()

    def _expired(self, tv: TtlValue, now: int) -> bool:
        return tv.last_access_ms + self._config().ttl_ms <= now

    def _on_read(self) -> bool:
        return self._config().update_type == StateTtlConfig.UpdateType.OnReadAndWrite

    def _return_expired(self) -> bool:
        return self._config().state_visibility == StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp

    def _read_whole(self) -> Any:
        """The state's value, None if absent or expired (then removed); refreshed on read if configured."""
        kg, key = self._kk()
        table, ns = self._table, self._ns
        stored = table.get(kg, key, ns)
        if stored is None:
            return None
        if not isinstance(stored, TtlValue):
            return stored  # written without TTL: fresh
        now = self._now()
        if self._expired(stored, now):
            table.remove(kg, key, ns)
            return stored.value if self._return_expired() else None
        if self._on_read():
            table.put(kg, key, ns, TtlValue(stored.value, now))
        return stored.value

    def _write_whole(self, value: Any) -> None:
        kg, key = self._kk()
        self._table.put(kg, key, self._ns, TtlValue(value, self._now()))

    def _live_elements(self, stored: list[Any] | None, now: int) -> tuple[list[Any], list[Any], bool]:
        """(values to return, TtlValues to keep, changed) of a list of TtlValues."""
        if not stored:
            return [], [], False
        out, keep, changed = [], [], False
        refresh = self._on_read()
        for e in stored:
            tv = e if isinstance(e, TtlValue) else TtlValue(e, now)
            if self._expired(tv, now):
                changed = True
                if self._return_expired():
                    out.append(tv.value)
                continue
            out.append(tv.value)
            keep.append(TtlValue(tv.value, now) if refresh else tv)
            changed = changed or refresh or tv is not e
        return out, keep, changed


class TtlValueState(_TtlMixin, KvValueState):
    __slots__ = ()

    def value(self) -> Any:
        return self._read_whole()

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._write_whole(value)


class TtlListState(_TtlMixin, KvListState):
    __slots__ = ()

    def get(self) -> list[Any]:
        kg, key = self._kk()
        out, keep, changed = self._live_elements(self._table.get(kg, key, self._ns), self._now())
        if changed:
            if keep:
                self._table.put(kg, key, self._ns, keep)
            else:
                self._table.remove(kg, key, self._ns)
        return out

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError(f"list state {self._table.name!r}: cannot add None")
        kg, key = self._kk()
        self._table.list_add(kg, key, self._ns, TtlValue(value, self._now()))

    def add_all(self, values: list[Any]) -> None:
        kg, key = self._kk()
        now = self._now()
        self._table.list_add_all(kg, key, self._ns, [TtlValue(v, now) for v in values])

    def update(self, values: list[Any]) -> None:
        now = self._now()
        super().update([TtlValue(v, now) for v in values])


class TtlReducingState(_TtlMixin, KvReducingState):
    __slots__ = ()

    def get(self) -> Any:
        return self._read_whole()

    def add(self, value: Any) -> None:
        current = self._read_whole()
        self._write_whole(value if current is None else self._reduce(current, value))

    def _merge_values(self, a: Any, b: Any) -> Any:
        return TtlValue(self._reduce(_plain(a), _plain(b)), self._now())


class TtlAggregatingState(_TtlMixin, KvAggregatingState):
    __slots__ = ()

    def get(self) -> Any:
        acc = self._read_whole()
        return None if acc is None else self._agg.get_result(acc)

    def get_accumulator(self) -> Any:
        return self._read_whole()

    def add(self, value: Any) -> None:
        acc = self._read_whole()
        if acc is None:
            acc = self._agg.create_accumulator()
        self._write_whole(self._agg.add(value, acc))

    def _merge_values(self, a: Any, b: Any) -> Any:
        return TtlValue(self._agg.merge(_plain(a), _plain(b)), self._now())


class TtlMapState(_TtlMixin, KvMapState):
    __slots__ = ()

    def get(self, key: Any) -> Any:
        kg, k = self._kk()
        stored = self._table.map_get(kg, k, self._ns, key)
        if stored is None:
            return None
        if not isinstance(stored, TtlValue):
            return stored
        now = self._now()
        if self._expired(stored, now):
            self._table.map_remove(kg, k, self._ns, key)
            return stored.value if self._return_expired() else None
        if self._on_read():
            self._table.map_put(kg, k, self._ns, key, TtlValue(stored.value, now))
        return stored.value

    def put(self, key: Any, value: Any) -> None:
        kg, k = self._kk()
        self._table.map_put(kg, k, self._ns, key, TtlValue(value, self._now()))

    def put_all(self, dict_value: Mapping[Any, Any]) -> None:
        kg, k = self._kk()
        now = self._now()
        self._table.map_put_all(kg, k, self._ns, {uk: TtlValue(v, now) for uk, v in dict(dict_value).items()})

    def contains(self, key: Any) -> bool:
        return self.get(key) is not None

    def items(self) -> list[tuple[Any, Any]]:
        kg, k = self._kk()
        now = self._now()
        out = []
        refresh = self._on_read()
        for uk, stored in self._table.map_items(kg, k, self._ns):
            tv = stored if isinstance(stored, TtlValue) else TtlValue(stored, now)
            if self._expired(tv, now):
                self._table.map_remove(kg, k, self._ns, uk)
                if self._return_expired():
                    out.append((uk, tv.value))
                continue
            if refresh:
                self._table.map_put(kg, k, self._ns, uk, TtlValue(tv.value, now))
            out.append((uk, tv.value))
        return out


def _plain(v: Any) -> Any:
    return v.value if isinstance(v, TtlValue) else v


TTL_STATE_CLASSES: dict[str, type[_KvState]] = {
    StateKind.VALUE: TtlValueState,
    StateKind.LIST: TtlListState,
    StateKind.MAP: TtlMapState,
    StateKind.REDUCING: TtlReducingState,
    StateKind.AGGREGATING: TtlAggregatingState,
}
