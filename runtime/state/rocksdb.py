"""The RocksDB keyed state backend (rocksdict), one database per operator subtask.

Port of Flink's RocksDBKeyedStateBackend. Key layout (big-endian, so byte order = key-group
order and a key group is one contiguous range):

    key group (2 bytes) | state id (2 bytes) | enc(key) | enc(namespace) [| suffix]

enc() is the stable self-delimiting encoding of runtime.state.serialization. Value, reducing and
aggregating states store one entry per (key, namespace). Map state stores one entry per user key
(suffix = enc(user key)), list state one entry per element (suffix = 8-byte sequence number), so
adding to a list or putting into a map never rewrites the whole collection (Flink uses a merge
operator for lists; a sequence suffix gives the same cost without one). Values are pickled.
"""
from __future__ import annotations

import operator
import os
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, cast

from rocksdict import AccessType, Checkpoint, Options, Rdict, ReadOptions, WriteBatch

from runtime.core.checkpoint import NATIVE_CHANGELOG_FILE, KeyedSnapshot, NativeStateBundle, StateEntries, in_forked_snapshot_writer
from runtime.core.gc_pause import gc_paused
from runtime.core.keygroups import KeyGroupRange
from runtime.core.state import StateKind
from runtime.state.backend import KeyedStateBackend, StateError, StateTable
from runtime.state.changelog import ChangelogOptions, StateChangelog, encode_log, merge_logs
from runtime.state.serialization import decode_key, dumps_value, encode_key, loads_state, loads_value
from runtime.state.type_descriptions import KeyTypeTracker

_HDR = struct.Struct(">HH")
NATIVE_FORMAT = "rocksdb-native-v1"  # a native checkpoint: the files of a RocksDB checkpoint + catalog
_SEQ = struct.Struct(">Q")


def _prefix_end(prefix: bytes) -> bytes:
    """The smallest byte string greater than every string starting with `prefix`."""
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return b"\xff" * (len(prefix) + 1)
    p[-1] += 1
    return bytes(p)


_TAG_INT, _TAG_STR = ord("i"), ord("s")
_INT_UNPACK = struct.Struct(">q").unpack_from
_LEN_UNPACK = struct.Struct(">I").unpack_from


def _split_keys(raw_keys: list[bytes]) -> tuple[list[Any], list[Any]]:
    """Keys and namespaces of value-like entries (header | enc(key) | enc(namespace)).

    The common key types (int, str) are cut out with struct calls in comprehensions, and the few
    distinct namespace encodings are decoded once each; other key types decode one by one.
    """
    tags = set(map(operator.itemgetter(4), raw_keys))
    if tags == {_TAG_INT}:
        keys = [_INT_UNPACK(k, 5)[0] for k in raw_keys]
        rests = [k[13:] for k in raw_keys]
    elif tags == {_TAG_STR}:
        ends = [9 + _LEN_UNPACK(k, 5)[0] for k in raw_keys]
        keys = [k[9:e].decode("utf-8") for k, e in zip(raw_keys, ends)]
        rests = [k[e:] for k, e in zip(raw_keys, ends)]
    else:
        keys, rests = [], []
        for k in raw_keys:
            key, pos = decode_key(k, 4)
            keys.append(key)
            rests.append(k[pos:])
    ns_of = {r: decode_key(r)[0] for r in set(rests)}
    return keys, list(map(ns_of.__getitem__, rests))


class _EncodeCache:
    """Encoding a key costs Python work per call; the current key/namespace repeat a lot.

    `tracker` (keys only) notes the type of each key encoded: native checkpoints never iterate
    the keys, yet a snapshot records their types (see KeyedStateBackend.tracked_key_types).
    """

    __slots__ = ("obj", "enc", "valid", "tracker")

    def __init__(self, tracker: KeyTypeTracker | None = None) -> None:
        self.obj: Any = None
        self.enc = b""
        self.valid = False
        self.tracker = tracker

    def __call__(self, obj: Any) -> bytes:
        if self.valid and (self.obj is obj or (type(self.obj) is type(obj) and self.obj == obj)):
            return self.enc
        if self.tracker is not None:
            self.tracker.add(obj)
        self.obj, self.enc, self.valid = obj, encode_key(obj), True
        return self.enc


def read_entries(view: Rdict, kg: int, sid: int, kind: str) -> Sequence[tuple[Any, Any, Any]]:
    """All (key, namespace, canonical value) of state `sid` (of `kind`) in key group `kg` of `view`."""
    prefix = _HDR.pack(kg, sid)
    ro = ReadOptions()
    ro.set_iterate_upper_bound(_prefix_end(prefix))
    # raw mode: keys and values are bytes (rocksdict's stubs type them as any value it stores)
    pairs = cast(list[tuple[bytes, bytes]], list(view.items(from_key=prefix, read_opt=ro)))
    if not pairs:
        return []
    if kind not in (StateKind.LIST, StateKind.MAP):
        raw_keys = [k for k, _ in pairs]
        keys, nss = _split_keys(raw_keys)
        # columns, as the state file wants them (no entry tuple to build and take apart again)
        return StateEntries(list(zip(keys, nss)), list(map(loads_state, [v for _, v in pairs])))  # = loads_value
    out: list[tuple[Any, Any, Any]] = []
    cur_kn: Any = None
    cur_val: Any = None
    is_list = kind == StateKind.LIST
    for k, v in pairs:
        key, pos = decode_key(k, 4)
        ns, pos = decode_key(k, pos)
        if cur_kn is None or cur_kn != (key, ns):
            if cur_kn is not None:
                out.append((cur_kn[0], cur_kn[1], cur_val))
            cur_kn = (key, ns)
            cur_val = [] if is_list else {}
        if is_list:
            cur_val.append(loads_value(v))
        else:
            cur_val[decode_key(k, pos)[0]] = loads_value(v)
    if cur_kn is not None:
        out.append((cur_kn[0], cur_kn[1], cur_val))
    return out


class RocksDBStateTable(StateTable):
    def __init__(self, backend: RocksDBKeyedStateBackend, name: str, kind: str, state_id: int) -> None:
        super().__init__(name, kind)
        self._b = backend
        self._db = backend._db
        self._sid = state_id
        self._key_enc = _EncodeCache(backend._key_types)
        self._ns_enc = _EncodeCache()
        self.multi = kind in (StateKind.LIST, StateKind.MAP)

    def _k(self, kg: int, key: Any, ns: Any) -> bytes:
        return _HDR.pack(kg, self._sid) + self._key_enc(key) + self._ns_enc(ns)

    # every write also goes to the changelog when the backend keeps one (incremental checkpoints)
    def _set(self, k: bytes, v: bytes) -> None:
        self._db[k] = v
        c = self._b._changelog
        if c is not None and c.logging:
            c.keys.append(k)
            c.values.append(v)

    def _del(self, k: bytes) -> None:
        self._db.delete(k)
        c = self._b._changelog
        if c is not None and c.logging:
            c.keys.append(k)
            c.values.append(None)

    def _log_prefix_deleted(self, prefix: bytes) -> None:
        """Before a range delete: log a delete of each entry in it (a log holds point writes only)."""
        c = self._b._changelog
        if c is not None and c.logging:
            for k, _ in self._scan(prefix):
                c.keys.append(k)
                c.values.append(None)

    def _log_puts(self, puts: list[tuple[bytes, bytes]]) -> None:
        c = self._b._changelog
        if c is not None and c.logging:
            for k, v in puts:
                c.keys.append(k)
                c.values.append(v)

    def _scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        it = self._db.iter()
        it.seek(prefix)
        n = len(prefix)
        while it.valid():
            k = it.key()
            if k[:n] != prefix:
                break
            yield k, it.value()
            it.next()

    # whole-value operations ---------------------------------------------------------------
    def get(self, kg: int, key: Any, ns: Any) -> Any:
        k = self._k(kg, key, ns)
        if not self.multi:
            raw = self._db.get(k)
            return None if raw is None else loads_value(raw)
        if self.kind == StateKind.LIST:
            vals = [loads_value(v) for _, v in self._scan(k)]
            return vals or None
        items = self._map_items_raw(k)
        return dict(items) if items else None

    def put(self, kg: int, key: Any, ns: Any, value: Any) -> None:
        k = self._k(kg, key, ns)
        if not self.multi:
            self._set(k, dumps_value(value))
            return
        if self.kind == StateKind.LIST:
            puts = [(k + _SEQ.pack(self._b._next_seq()), dumps_value(v)) for v in value]
        else:
            puts = [(k + encode_key(uk), dumps_value(v)) for uk, v in value.items()]
        self._log_prefix_deleted(k)
        wb = WriteBatch(raw_mode=True)
        wb.delete_range(k, _prefix_end(k))
        for pk, pv in puts:
            wb.put(pk, pv)
        self._db.write(wb)
        self._log_puts(puts)

    def remove(self, kg: int, key: Any, ns: Any) -> None:
        k = self._k(kg, key, ns)
        if self.multi:
            self._log_prefix_deleted(k)
            self._db.delete_range(k, _prefix_end(k))
        else:
            self._del(k)

    # list --------------------------------------------------------------------------------
    def list_add(self, kg: int, key: Any, ns: Any, value: Any) -> None:
        self._set(self._k(kg, key, ns) + _SEQ.pack(self._b._next_seq()), dumps_value(value))

    def list_add_all(self, kg: int, key: Any, ns: Any, values: list[Any]) -> None:
        if not values:
            return
        k = self._k(kg, key, ns)
        self._write_puts([(k + _SEQ.pack(self._b._next_seq()), dumps_value(v)) for v in values])

    def _write_puts(self, puts: list[tuple[bytes, bytes]]) -> None:
        wb = WriteBatch(raw_mode=True)
        for pk, pv in puts:
            wb.put(pk, pv)
        self._db.write(wb)
        self._log_puts(puts)

    # map ---------------------------------------------------------------------------------
    def _map_items_raw(self, prefix: bytes) -> list[tuple[Any, Any]]:
        n = len(prefix)
        return [(decode_key(k, n)[0], loads_value(v)) for k, v in self._scan(prefix)]

    def map_get(self, kg: int, key: Any, ns: Any, user_key: Any) -> Any:
        raw = self._db.get(self._k(kg, key, ns) + encode_key(user_key))
        return None if raw is None else loads_value(raw)

    def map_contains(self, kg: int, key: Any, ns: Any, user_key: Any) -> bool:
        return self._db.get(self._k(kg, key, ns) + encode_key(user_key)) is not None

    def map_put(self, kg: int, key: Any, ns: Any, user_key: Any, value: Any) -> None:
        self._set(self._k(kg, key, ns) + encode_key(user_key), dumps_value(value))

    def map_put_all(self, kg: int, key: Any, ns: Any, values: Mapping[Any, Any]) -> None:
        k = self._k(kg, key, ns)
        self._write_puts([(k + encode_key(uk), dumps_value(v)) for uk, v in values.items()])

    def map_remove(self, kg: int, key: Any, ns: Any, user_key: Any) -> None:
        self._del(self._k(kg, key, ns) + encode_key(user_key))

    def map_items(self, kg: int, key: Any, ns: Any) -> list[tuple[Any, Any]]:
        return self._map_items_raw(self._k(kg, key, ns))

    # iteration ---------------------------------------------------------------------------
    def _iter_key_ns(self, kg: int) -> Iterator[tuple[Any, Any, bytes, int, bytes]]:
        """(key, namespace, full entry key, offset of the suffix, value bytes) of one key group."""
        prefix = _HDR.pack(kg, self._sid)
        for k, v in self._scan(prefix):
            key, pos = decode_key(k, 4)
            ns, pos = decode_key(k, pos)
            yield key, ns, k, pos, v

    def keys_and_namespaces(self) -> Iterator[tuple[Any, Any]]:
        out: list[tuple[Any, Any]] = []
        for kg in self._b.key_group_range:
            last: Any = object()
            for key, ns, _, _, _ in self._iter_key_ns(kg):
                if (key, ns) != last:  # multi-entry states repeat (key, ns)
                    out.append((key, ns))
                    last = (key, ns)
        return iter(out)

    def keys(self, namespace: Any) -> Iterator[Any]:
        return iter([k for k, ns in self.keys_and_namespaces() if ns == namespace])

    # checkpoints -----------------------------------------------------------------------------
    def put_all(self, kg: int, entries: Sequence[tuple[Any, Any, Any]]) -> None:
        """A restore's bulk load. Restores run before the first checkpoint, when no changelog is
        kept yet (the first checkpoint materializes); one kept later gets the writes one by one."""
        c = self._b._changelog
        if c is not None and c.logging:
            for key, ns, value in entries:
                self.put(kg, key, ns, value)
            return
        wb = WriteBatch(raw_mode=True)
        k = self._k
        if not self.multi:
            for key, ns, value in entries:
                wb.put(k(kg, key, ns), dumps_value(value))
        else:
            seq = self._b._next_seq
            for key, ns, value in entries:
                p = k(kg, key, ns)
                wb.delete_range(p, _prefix_end(p))
                if self.kind == StateKind.LIST:
                    for v in value:
                        wb.put(p + _SEQ.pack(seq()), dumps_value(v))
                else:
                    for uk, v in value.items():
                        wb.put(p + encode_key(uk), dumps_value(v))
        self._db.write(wb)

    def read_entries(self, view: Rdict, kg: int) -> Sequence[tuple[Any, Any, Any]]:
        """All (key, namespace, canonical value) of one key group in `view` (a checkpoint)."""
        return read_entries(view, kg, self._sid, self.kind)


class RocksDBKeyedStateBackend(KeyedStateBackend[RocksDBStateTable]):
    """Flink: RocksDBKeyedStateBackend (state.backend.type: rocksdb). Data in a temp directory."""

    kind = "rocksdb"

    def __init__(
        self,
        key_group_range: KeyGroupRange,
        max_parallelism: int,
        operator_id: str,
        local_dir: str | None = None,
        changelog: ChangelogOptions | None = None,
    ) -> None:
        super().__init__(key_group_range, max_parallelism, operator_id)
        if max_parallelism > 0xFFFF:
            raise StateError(f"max parallelism {max_parallelism} does not fit the 2-byte key-group prefix")
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in operator_id)[:80]
        if local_dir:
            os.makedirs(local_dir, exist_ok=True)
        self._dir = tempfile.mkdtemp(prefix=f"millrace-rocksdb-{safe}-", dir=local_dir)
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        self._db = Rdict(os.path.join(self._dir, "db"), opts)
        self._seq = 0
        self._closed = False
        self._key_types = KeyTypeTracker()  # every table's key encoder notes its keys' types
        # incremental checkpoints: writes are logged, RocksDB is materialized now and then
        self._changelog = StateChangelog(changelog) if changelog is not None and changelog.enabled else None

    @property
    def path(self) -> str:
        return self._dir

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _create_table(self, name: str, kind: str) -> RocksDBStateTable:
        sid = len(self._tables) + 1
        if sid > 0xFFFF:
            raise StateError(f"operator {self.operator_id}: too many states (max 65535)")
        return RocksDBStateTable(self, name, kind, sid)

    def snapshot_native_sync(self, checkpoint_id: int | None = None) -> Callable[[], NativeStateBundle]:
        """A checkpoint in RocksDB's own format (Flink's native RocksDB checkpoint): the synchronous
        part is a RocksDB checkpoint (memtable flush + hard links); the supplier reads its files as
        they are, so nothing is iterated, decoded or encoded entry by entry. Restoring it (any
        parallelism, either backend) reads the entries of the restoring key groups back.

        With a changelog (incremental checkpoints) most checkpoints skip all that: the bundle holds
        only the log of writes since the last completed checkpoint, and names the earlier
        checkpoints it builds on (`shared_checkpoints`)."""
        rng = self.key_group_range
        catalog: dict[str, Any] = {
            "format": NATIVE_FORMAT,
            "key_group_start": rng.start,
            "key_group_end": rng.end,
            "tables": {name: [t.kind, t._sid] for name, t in self._tables.items()},
        }
        if self._changelog is None or checkpoint_id is None:
            return self._materialize(catalog, None)
        plan = self._changelog.plan(checkpoint_id)
        catalog.update(checkpoint_id=checkpoint_id, chain=plan.chain)
        if plan.materialize:
            return self._materialize(catalog, checkpoint_id)
        segments = plan.segments

        def log_supplier() -> NativeStateBundle:
            return NativeStateBundle(catalog, {NATIVE_CHANGELOG_FILE: encode_log(segments)}, checkpoint_id=checkpoint_id)

        return log_supplier

    def _materialize(self, catalog: dict[str, Any], checkpoint_id: int | None) -> Callable[[], NativeStateBundle]:
        self._seq += 1
        cp_dir = os.path.join(self._dir, f"snapshot-{self._seq}")
        Checkpoint(self._db).create_checkpoint(cp_dir)

        def supplier() -> NativeStateBundle:
            try:
                files = {}
                for name in sorted(os.listdir(cp_dir)):
                    with open(os.path.join(cp_dir, name), "rb") as f:
                        files[name] = f.read()
                return NativeStateBundle(catalog, files, checkpoint_id=checkpoint_id)
            finally:
                shutil.rmtree(cp_dir, ignore_errors=True)

        return supplier

    def tracked_key_types(self) -> set[str]:
        return set(self._key_types.types)

    def shared_checkpoints(self, checkpoint_id: int) -> list[int]:
        """Earlier checkpoints whose state files checkpoint `checkpoint_id`'s state builds on."""
        if self._changelog is None:
            return []
        return self._changelog.chain_of(checkpoint_id)[:-1]

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        if self._changelog is not None:
            self._changelog.notify_complete(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        if self._changelog is not None:
            self._changelog.notify_aborted(checkpoint_id)

    def snapshot_sync(self) -> Callable[[], KeyedSnapshot]:
        """Synchronous part: a native RocksDB checkpoint (memtable flush + hard links), like Flink's.

        The supplier (snapshot thread) opens that checkpoint, reads the entries and deletes it. Not a
        rocksdict Snapshot: its iterators ignore the snapshot (measured with rocksdict 0.3.x), only
        point reads honour it.
        """
        self._seq += 1
        cp_dir = os.path.join(self._dir, f"snapshot-{self._seq}")
        Checkpoint(self._db).create_checkpoint(cp_dir)
        tables = [(name, t.kind, t) for name, t in self._tables.items()]
        rng = self.key_group_range

        def supplier() -> KeyedSnapshot:
            forked = in_forked_snapshot_writer()
            # in a forked child RocksDB's background threads are gone: a read-write open or a close
            # waits for them forever; read-only and left to the child's _exit instead
            view = Rdict(cp_dir, Options(raw_mode=True), access_type=AccessType.read_only()) if forked else Rdict(cp_dir, Options(raw_mode=True))
            try:
                out: KeyedSnapshot = {}
                with gc_paused():
                    for name, kind, table in tables:
                        for kg in rng:
                            entries = table.read_entries(view, kg)
                            if entries:
                                out.setdefault(kg, {})[name] = (kind, entries)
                return out
            finally:
                if not forked:
                    view.close()
                shutil.rmtree(cp_dir, ignore_errors=True)

        return supplier

    def dispose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._db.close()
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)

    close = dispose

    def __del__(self) -> None:  # best effort: never leave temp directories behind
        try:
            self.dispose()
        except Exception:  # noqa: BLE001 - __del__ cannot report it, and a failed close leaves only a temp directory
            pass


def native_to_keyed(bundles: Sequence[NativeStateBundle], key_group_range: KeyGroupRange) -> KeyedSnapshot:
    """The canonical entries of the key groups in `key_group_range` held by native RocksDB
    checkpoint bundles (each written by one old subtask, over its own key-group range)."""
    out: KeyedSnapshot = {}
    for bundle in bundles:
        cat = bundle.catalog
        if cat.get("format") != NATIVE_FORMAT:
            raise StateError(f"cannot restore native state of format {cat.get('format')!r}; this build reads {NATIVE_FORMAT!r}")
        lo, hi = max(key_group_range.start, int(cat["key_group_start"])), min(key_group_range.end, int(cat["key_group_end"]))
        if lo > hi:
            continue
        tmp = tempfile.mkdtemp(prefix="millrace-rocksdb-restore-")
        try:
            for name, data in bundle.files.items():
                if "/" in name or name.startswith("."):
                    raise StateError(f"native RocksDB checkpoint holds a file name that is not plain: {name!r}")
                with open(os.path.join(tmp, name), "wb") as f:
                    f.write(data)
            if bundle.changelogs:  # an incremental checkpoint: its logs over the base (each key's last write)
                view = Rdict(tmp, Options(raw_mode=True))
                _apply_log(view, bundle.changelogs)
            else:
                view = Rdict(tmp, Options(raw_mode=True), access_type=AccessType.read_only())
            try:
                with gc_paused():
                    for name, (kind, sid) in cat["tables"].items():
                        for kg in range(lo, hi + 1):
                            entries = read_entries(view, kg, int(sid), kind)
                            if entries:
                                out.setdefault(kg, {})[name] = (kind, entries)
            finally:
                view.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def _apply_log(db: Rdict, blobs: list[bytes]) -> None:
    keys, values = merge_logs(blobs)
    wb = WriteBatch(raw_mode=True)
    for k, v in zip(keys, values):
        if v is None:
            wb.delete(k)
        else:
            wb.put(k, v)
    db.write(wb)
