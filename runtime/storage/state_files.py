"""The row layout of the checkpoint Delta table, and the Parquet files tasks write into it.

One Parquet file per task per checkpoint, under `<checkpoint_dir>/checkpoint_id=<id>/`. The Delta
table is partitioned by `checkpoint_id`, so the files do not contain that column (Delta supplies it
from the partition value); everything else is plain columns, so Spark SQL can read state:

    operator_id, subtask, parallelism, kind ('keyed' | 'operator' | 'union' | 'meta' | 'native' | 'state_meta'),
    key_group (null unless keyed), state_name, state_kind, seq (order of list items),
    key_{long,string,bytes,tuple}, namespace_{long,string,bytes}, value_{long,double,string,bytes,tuple}

Each of key / namespace / value goes to exactly one of its columns (`runtime.storage.state_columns`):
ints, strings, floats (values) and plain tuples typed, None to none, anything else pickled.

Each keyed operator's rows end with one 'state_meta' row (value_string: JSON) recording what its
state's types are: each state's kind and declared type, the declared key type and the Python types
of the keys (Flink: the StateMetaInfoSnapshots and key serializer at the head of a keyed state
handle). A restore merges the rows of every old subtask (`merge_state_meta`) and checks them.

pyarrow and numpy only: TaskManagers import this module, and only storage/'s Delta code imports
deltalake (runtime.storage.checkpoint_store commits these files).
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import operator
import os
import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from runtime.core.checkpoint import NATIVE_CHANGELOG_FILE, KeyedSnapshot, NativeStateBundle, OperatorSnapshot, StateEntries, StateInitializationContext
from runtime.core.errors import CorruptStateError, StorageError
from runtime.core.gc_pause import gc_paused
from runtime.core.keygroups import KeyGroupRange
from runtime.storage import state_columns as columns
from runtime.storage.handles import StateFileHandle

log = logging.getLogger(__name__)

PARTITION_COLUMN = "checkpoint_id"
KIND_KEYED = "keyed"
KIND_OPERATOR = "operator"
KIND_UNION = "union"
KIND_META = "meta"
KIND_NATIVE = "native"  # a file of a backend's native checkpoint (value_bytes); state_name = file name
KIND_STATE_META = "state_meta"  # an operator's recorded state and key types (value_string: JSON)
STATE_META_NAME = "__state_meta__"
NATIVE_CATALOG = "__catalog__"  # the native row whose value_bytes is the bundle's catalog (JSON)
NATIVE_CHANGELOG = NATIVE_CHANGELOG_FILE  # an incremental checkpoint's log (runtime.state.changelog)
# native rows of an incremental checkpoint carry the id of the checkpoint that wrote them in
# key_long: a restore reads its chain (base + logs) out of several checkpoints' files
NATIVE_COLUMNS = ["subtask", "state_name", "value_bytes", "key_long"]
META_OPERATOR_ID = "__checkpoint__"  # reserved: the operator id of the one 'meta' row per checkpoint
META_STATE_NAME = "metadata"
LIST_STATE_KIND = "list"  # state_kind of operator and union list rows
STATE_FILE_PREFIX = "state-"
TEMP_PREFIX, TEMP_SUFFIX = ".", ".inprogress"  # a file being written: hidden, renamed when complete
METADATA_FILE_PREFIX = "metadata-"

STATE_FILE_SCHEMA: pa.Schema = pa.schema(
    [
        ("operator_id", pa.string()),
        ("subtask", pa.int32()),
        ("parallelism", pa.int32()),  # the writer's parallelism: operator lists are redistributed when it changes
        ("kind", pa.string()),
        ("key_group", pa.int32()),
        ("state_name", pa.string()),
        ("state_kind", pa.string()),
        ("seq", pa.int64()),
        *columns.fields("key", with_double=False, with_tuple=True),
        *columns.fields("namespace", with_double=False, with_tuple=False),
        *columns.fields("value", with_double=True, with_tuple=True),
    ]
)
# what the writer hands to Parquet: low-cardinality strings as dictionaries. Files are written
# without the Arrow schema (store_schema=False), so readers (Delta, Spark) see plain strings.
_DICT_COLUMNS = ("operator_id", "kind", "state_name", "state_kind")
_WRITE_SCHEMA: pa.Schema = pa.schema(
    [pa.field(f.name, pa.dictionary(pa.int32(), pa.string())) if f.name in _DICT_COLUMNS else f for f in STATE_FILE_SCHEMA]
)
# the whole Delta table: the file columns plus the partition column
CHECKPOINT_TABLE_SCHEMA: pa.Schema = STATE_FILE_SCHEMA.append(pa.field(PARTITION_COLUMN, pa.int64()))

# small row groups so a restoring subtask skips other key groups by their statistics (files are
# written sorted by operator, then key group)
_ROW_GROUP_SIZE = 64 * 1024
# statistics only where readers filter; min/max of pickled blobs would cost time and say nothing
_STATS_COLUMNS = ["operator_id", "subtask", "kind", "key_group", "state_name"]
_PARTITION_RE = re.compile(r"(?:^|/)checkpoint_id=(-?\d+)/")

# test hook (a settable callable, house style): called with ("writing", final path) before a state
# file is written and ("written", final path) once it is in place. A test's own code in the
# TaskManager sets it, e.g. to hold a snapshot writer at a known moment.
write_hook: Callable[[str, str], None] | None = None


def partition_dir(checkpoint_id: int) -> str:
    """The table-relative directory of a checkpoint's files (its Delta partition)."""
    return f"{PARTITION_COLUMN}={int(checkpoint_id)}"


def checkpoint_of_path(path: str) -> int | None:
    """The checkpoint id of a table-relative file path (its partition), or None if it has none."""
    m = _PARTITION_RE.search("/" + path.lstrip("/"))
    return int(m.group(1)) if m else None


def is_metadata_file(path: str) -> bool:
    return os.path.basename(path).startswith(METADATA_FILE_PREFIX)


def resolve_filesystem(
    checkpoint_dir: str, what: str = "checkpoint directory", error: type[StorageError] = StorageError,
) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and the root path inside it for a local path or a URI (file://, s3://, ...);
    a bad URI raises `error` naming `what` it was meant to be."""
    if "://" in checkpoint_dir:
        try:
            fs, root = pafs.FileSystem.from_uri(checkpoint_dir)
        except Exception as e:  # pyarrow raises several types for bad URIs
            raise error(f"{what} {checkpoint_dir!r} is not a usable filesystem URI: {e}") from e
        return fs, root.rstrip("/")
    return pafs.LocalFileSystem(), os.path.abspath(checkpoint_dir).rstrip("/") or "/"


def _join(root: str, rel: str) -> str:
    return f"{root}/{rel.lstrip('/')}"


# --- writing ---------------------------------------------------------------------------------
@dataclass
class _Segment:
    """A run of rows that share operator, kind, key group and state (a list of entries or items, or
    a slice of one starting at item `first_seq`)."""

    operator_id: str
    kind: str
    key_group: int | None
    state_name: str
    state_kind: str | None
    count: int
    first_seq: int = 0


def _dict_strings(segments: list[_Segment], counts: np.ndarray, attr: str) -> pa.DictionaryArray:
    """A per-row string column from per-segment values, as dictionary indices (no per-row Python;
    Parquet stores it dictionary-encoded without hashing every row)."""
    uniques: dict[Any, int] = {}
    idx = np.fromiter((uniques.setdefault(getattr(s, attr), len(uniques)) for s in segments), dtype=np.int32, count=len(segments))
    return pa.DictionaryArray.from_arrays(pa.array(np.repeat(idx, counts)), pa.array(list(uniques), type=pa.string()))


_NO_KEY = (None, None)
# rows encoded together: a snapshot is bound by memory latency (state objects lie scattered over the
# heap), and several passes (type scans, conversions) go over every row; over a small batch all but
# the first find the objects in the CPU cache. Measured: see docs/benchmarks.md (checkpoints.py).
_BATCH_ROWS = 4096
# on a thread that shares the GIL with a busy task, every point where pyarrow releases the GIL hands
# the task a whole switch interval: small batches then starve the writer (measured: a 1M-key
# snapshot took > 20 s in 4096-row batches, ~4 s in one), so threads encode in large batches
THREAD_BATCH_ROWS = 1 << 20
_K2, _K01 = operator.itemgetter(2), operator.itemgetter(0, 1)


class _Batch:
    """Rows of one or more segments (or slices of them), encoded into one record batch."""

    def __init__(self) -> None:
        self.segments: list[_Segment] = []
        self.pairs: list[tuple[Any, Any]] = []  # (key, namespace) per row
        self.values: list[Any] = []

    def add(self, seg: _Segment, pairs: Iterable[tuple[Any, Any]], values: Iterable[Any]) -> None:
        self.segments.append(seg)
        self.pairs.extend(pairs)
        self.values.extend(values)

    def encode(self, subtask_index: int, parallelism: int) -> pa.RecordBatch:
        segments, pairs, values, n = self.segments, self.pairs, self.values, len(self.values)
        counts = np.fromiter((s.count for s in segments), dtype=np.int64, count=len(segments))
        starts = np.cumsum(counts) - counts
        kg = np.repeat(np.fromiter((-1 if s.key_group is None else s.key_group for s in segments), dtype=np.int32, count=len(segments)), counts)
        try:
            keys, namespaces = columns.encode_pairs(pairs)
            encoded = {"key": keys, "namespace": namespaces, "value": columns.encode(values, with_double=True, with_tuple=True)}
        except columns.UnpicklableError as e:
            seg = segments[int(np.searchsorted(starts, e.index, side="right")) - 1]
            where = f"key group {seg.key_group}" if seg.key_group is not None else f"{seg.kind} list state"
            raise StorageError(
                f"cannot write state of operator {seg.operator_id!r}, state {seg.state_name!r} ({where}): a value of type "
                f"{type(e.value).__name__} cannot be pickled ({e.cause}); keep state values picklable"
            ) from e.cause
        cols: list[pa.Array] = [
            _dict_strings(segments, counts, "operator_id"),
            pa.array(np.full(n, subtask_index, dtype=np.int32)),
            pa.array(np.full(n, parallelism, dtype=np.int32)),
            _dict_strings(segments, counts, "kind"),
            pa.array(kg, type=pa.int32(), mask=kg < 0),
            _dict_strings(segments, counts, "state_name"),
            _dict_strings(segments, counts, "state_kind"),
            # index within its list
            pa.array(
                np.arange(n, dtype=np.int64)
                + np.repeat(np.fromiter((s.first_seq for s in segments), dtype=np.int64, count=len(segments)) - starts, counts)
            ),
        ]
        for f in list(_WRITE_SCHEMA)[len(cols):]:
            prefix, suffix = f.name.rsplit("_", 1)
            arr = encoded[prefix].get(suffix)
            cols.append(arr if arr is not None else pa.nulls(n, f.type))
        return pa.RecordBatch.from_arrays(cols, schema=_WRITE_SCHEMA)


def _segments(op_id: str, snap: OperatorSnapshot, keyed: KeyedSnapshot) -> Iterator[tuple[_Segment, Iterable[tuple[Any, Any]], Iterable[Any]]]:
    """One operator's rows as segments with their (key, namespace) pairs and values: keyed entries
    by key group (`keyed`: the materialized snap.keyed), then list items."""
    for kg in sorted(keyed):  # sorted: row-group statistics on key_group then prune well
        for name, (state_kind, entries) in keyed[kg].items():
            if entries:
                seg = _Segment(op_id, KIND_KEYED, int(kg), name, state_kind, len(entries))
                if isinstance(entries, StateEntries):  # columns already (e.g. a heap map's views)
                    yield seg, entries.pairs, entries.values
                else:
                    yield seg, map(_K01, entries), map(_K2, entries)
    for kind, lists in ((KIND_OPERATOR, snap.operator_lists), (KIND_UNION, snap.union_lists)):
        for name, items in lists.items():
            if items:  # list items have no key / namespace
                yield _Segment(op_id, kind, None, name, LIST_STATE_KIND, len(items)), itertools.repeat(_NO_KEY, len(items)), items


def _build_table(subtask_index: int, parallelism: int, snapshots: dict[str, OperatorSnapshot], batch_rows: int = _BATCH_ROWS) -> tuple[pa.Table, list[str]]:
    """All rows of a task's snapshots, encoded in batches of `batch_rows` rows."""
    batches: list[pa.RecordBatch] = []
    batch = _Batch()
    operator_ids: list[str] = []
    for op_id, snap in snapshots.items():
        if op_id == META_OPERATOR_ID:
            raise StorageError(f"operator id {META_OPERATOR_ID!r} is reserved for checkpoint metadata; give the operator another uid")
        rows = 0
        keyed: KeyedSnapshot = snap.materialize_keyed() or {}
        for seg, pairs, values in _segments(op_id, snap, keyed):
            pairs_it, values_it = iter(pairs), iter(values)
            done = 0
            while done < seg.count:  # a segment larger than the room left is sliced
                take = min(seg.count - done, batch_rows - len(batch.values))
                batch.add(dataclasses.replace(seg, count=take, first_seq=done), itertools.islice(pairs_it, take), itertools.islice(values_it, take))
                done += take
                if len(batch.values) >= batch_rows:
                    batches.append(batch.encode(subtask_index, parallelism))
                    batch = _Batch()
            rows += seg.count
        native = snap.materialize_native()
        if native is not None:
            batches.append(_native_batch(op_id, native, subtask_index, parallelism))
            rows += 1
        meta = snap.materialize_state_meta(keyed) if rows else None  # types of state that is there
        if meta is not None:
            seg = _Segment(op_id, KIND_STATE_META, None, STATE_META_NAME, "json", 1)
            batch.add(seg, [_NO_KEY], [json.dumps(meta, sort_keys=True)])
            rows += 1
            if len(batch.values) >= batch_rows:
                batches.append(batch.encode(subtask_index, parallelism))
                batch = _Batch()
        if rows:
            operator_ids.append(op_id)
    if batch.values:
        batches.append(batch.encode(subtask_index, parallelism))
    return pa.Table.from_batches(batches, schema=_WRITE_SCHEMA), operator_ids


def _native_batch(op_id: str, bundle: NativeStateBundle, subtask_index: int, parallelism: int) -> pa.RecordBatch:
    """A native checkpoint as rows: the catalog, then one row per file (its bytes as they are)."""
    names = [NATIVE_CATALOG, *bundle.files]
    blobs = [json.dumps(bundle.catalog).encode(), *bundle.files.values()]
    n = len(names)
    cols = {f.name: pa.nulls(n, f.type) for f in _WRITE_SCHEMA}
    cols["operator_id"] = pa.array([op_id] * n).dictionary_encode()
    cols["subtask"] = pa.array(np.full(n, subtask_index, dtype=np.int32))
    cols["parallelism"] = pa.array(np.full(n, parallelism, dtype=np.int32))
    cols["kind"] = pa.array([KIND_NATIVE] * n).dictionary_encode()
    cols["state_name"] = pa.array(names).dictionary_encode()
    cols["state_kind"] = pa.array([str(bundle.catalog.get("format"))] * n).dictionary_encode()
    cols["seq"] = pa.array(np.arange(n, dtype=np.int64))
    cols["value_bytes"] = pa.array(blobs, type=pa.binary())
    if bundle.checkpoint_id is not None:
        cols["key_long"] = pa.array(np.full(n, bundle.checkpoint_id, dtype=np.int64))
    return pa.RecordBatch.from_arrays([cols[f.name] for f in _WRITE_SCHEMA], schema=_WRITE_SCHEMA)


def native_bundles(table: pa.Table) -> list[NativeStateBundle]:
    """The native bundles in rows with columns NATIVE_COLUMNS, one per writer subtask.

    A subtask's rows from several checkpoints (an incremental chain) resolve through the newest
    catalog: the base's files, then the logs of the chain's later checkpoints, oldest first.
    """
    cids = table.column("key_long").to_pylist() if "key_long" in table.column_names else [None] * table.num_rows
    rows: dict[int, dict[int | None, dict[str, bytes]]] = {}
    for sub, name, blob, cid in zip(table.column("subtask").to_pylist(), table.column("state_name").to_pylist(), table.column("value_bytes").to_pylist(), cids):
        rows.setdefault(int(sub), {}).setdefault(cid, {})[str(name)] = blob
    out = []
    for sub, by_checkpoint in sorted(rows.items()):
        newest = max(by_checkpoint, key=lambda c: -1 if c is None else c)
        files = dict(by_checkpoint[newest])
        raw = files.pop(NATIVE_CATALOG, None)
        if raw is None:
            raise CorruptStateError(f"native state of subtask {sub} has no catalog row: the checkpoint is damaged")
        catalog = json.loads(raw)
        chain = [int(c) for c in catalog.get("chain") or []]
        if len(chain) <= 1:  # a full checkpoint: its own files
            out.append(NativeStateBundle(catalog, files, checkpoint_id=newest))
            continue

        def rows_of(
            cid: int, sub: int = sub, by_checkpoint: dict[int | None, dict[str, bytes]] = by_checkpoint, chain: list[int] = chain
        ) -> dict[str, bytes]:
            found = by_checkpoint.get(cid)
            if found is None:
                raise CorruptStateError(
                    f"native state of subtask {sub} builds on checkpoint {cid} (chain {chain}), whose files are not among "
                    "the checkpoint's files: the checkpoint is damaged"
                )
            return found

        base = {n: b for n, b in rows_of(chain[0]).items() if n not in (NATIVE_CATALOG, NATIVE_CHANGELOG)}
        found_logs = [rows_of(cid).get(NATIVE_CHANGELOG) for cid in chain[1:]]
        logs = [log for log in found_logs if log is not None]
        if len(logs) < len(found_logs):
            raise CorruptStateError(f"native state of subtask {sub}: a checkpoint of chain {chain} has no log row: the checkpoint is damaged")
        out.append(NativeStateBundle(catalog, base, checkpoint_id=newest, changelogs=logs))
    return out


def _write_atomically(checkpoint_dir: str, rel_path: str, table: pa.Table) -> int:
    """Write `table` to a hidden temp name, then rename: a crash never leaves a truncated file under the final name."""
    fs, root = resolve_filesystem(checkpoint_dir)
    final = _join(root, rel_path)
    tmp = _join(root, f"{os.path.dirname(rel_path)}/{TEMP_PREFIX}{os.path.basename(rel_path)}.{uuid.uuid4().hex[:8]}{TEMP_SUFFIX}")
    hook = write_hook
    try:
        if hook is not None:
            hook("writing", final)
        fs.create_dir(os.path.dirname(final), recursive=True)
        pq.write_table(
            table, tmp, filesystem=fs, row_group_size=_ROW_GROUP_SIZE, compression="snappy",
            write_statistics=_STATS_COLUMNS, use_dictionary=list(_DICT_COLUMNS), store_schema=False,
        )
        fs.move(tmp, final)
        size = fs.get_file_info(final).size
        if hook is not None:
            hook("written", final)
        return size
    except Exception as e:
        try:
            fs.delete_file(tmp)
        except Exception:  # noqa: BLE001 - best effort; the temp name is hidden from readers anyway
            pass
        raise StorageError(f"writing state file {final} failed: {e}") from e


def write_state_file(
    checkpoint_dir: str,
    checkpoint_id: int,
    subtask_index: int,
    attempt_number: int,
    parallelism: int,
    snapshots: dict[str, OperatorSnapshot],
    batch_rows: int = _BATCH_ROWS,
) -> StateFileHandle | None:
    """Write one task's state for a checkpoint as one Parquet file; None if there are no rows.

    The file is `<checkpoint_dir>/checkpoint_id=<id>/state-<subtask>-<attempt>-<uuid>.parquet`;
    the handle's path is relative to `checkpoint_dir`. `snapshots`: operator id -> snapshot
    (keyed state may be a supplier; it is evaluated here). Committables are not written: they
    travel in the acknowledgement.
    """
    table, operator_ids = _build_table(subtask_index, parallelism, snapshots, batch_rows)
    if table.num_rows == 0:
        return None
    rel = f"{partition_dir(checkpoint_id)}/{STATE_FILE_PREFIX}{subtask_index}-{attempt_number}-{uuid.uuid4().hex}.parquet"
    size = _write_atomically(checkpoint_dir, rel, table)
    return StateFileHandle(path=rel, size=size, rows=table.num_rows, operator_ids=operator_ids)


def discard_attempt_files(checkpoint_dir: str, checkpoint_id: int, subtask_index: int, attempt_number: int) -> list[str]:
    """Delete what one task attempt's snapshot writer wrote for one checkpoint that no
    acknowledgement listed: its state file and its temp files (a writer killed mid-write, one that
    finished after its task was cancelled), then the checkpoint's folder if that left it empty.
    Only the attempt's own names are touched (one state file per attempt and checkpoint), so files
    of other tasks, and anything a commit references, stay. Returns the deleted paths."""
    fs, root = resolve_filesystem(checkpoint_dir)
    folder = _join(root, partition_dir(checkpoint_id))
    ours = f"{STATE_FILE_PREFIX}{subtask_index}-{attempt_number}-"
    try:
        infos = fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
    except Exception as e:  # noqa: BLE001 - nothing to list
        log.debug("cannot list %s: %s", folder, e)
        return []
    gone = []
    for info in infos:
        name = info.base_name
        if info.type == pafs.FileType.File and (name.startswith(ours) or (name.startswith(TEMP_PREFIX + ours) and name.endswith(TEMP_SUFFIX))):
            try:
                fs.delete_file(info.path)
                gone.append(info.path)
            except FileNotFoundError:
                pass
    if os.path.isdir(folder):  # local only; object stores have no folders
        try:
            os.rmdir(folder)
        except OSError:
            pass  # other tasks' files are in it
    return gone


def write_metadata_file(checkpoint_dir: str, checkpoint_id: int, payload: bytes) -> StateFileHandle:
    """Write a checkpoint's metadata as one 'meta' row (operator '__checkpoint__', value_bytes=payload)."""
    n = 1
    row: dict[str, pa.Array] = {f.name: pa.nulls(n, f.type) for f in STATE_FILE_SCHEMA}
    row["operator_id"] = pa.array([META_OPERATOR_ID])
    row["kind"] = pa.array([KIND_META])
    row["state_name"] = pa.array([META_STATE_NAME])
    row["seq"] = pa.array([0], type=pa.int64())
    row["value_bytes"] = pa.array([bytes(payload)], type=pa.binary())
    table = pa.Table.from_arrays([row[f.name] for f in STATE_FILE_SCHEMA], schema=STATE_FILE_SCHEMA)
    rel = f"{partition_dir(checkpoint_id)}/{METADATA_FILE_PREFIX}{int(checkpoint_id)}-{uuid.uuid4().hex}.parquet"
    size = _write_atomically(checkpoint_dir, rel, table)
    return StateFileHandle(path=rel, size=size, rows=1, operator_ids=[META_OPERATOR_ID])


def read_metadata(path: str) -> bytes:
    """The payload of the 'meta' row of a metadata file (a local path or a URI)."""
    fs, full = resolve_filesystem(path)
    try:
        table = pq.read_table(full, filesystem=fs, columns=["kind", "value_bytes"], filters=pc.field("kind") == KIND_META)
    except FileNotFoundError as e:
        raise CorruptStateError(f"checkpoint metadata file {path} is missing: {e}") from e
    except Exception as e:  # pyarrow raises OSError / ArrowInvalid for damaged files
        raise CorruptStateError(f"checkpoint metadata file {path} cannot be read: {e}") from e
    if table.num_rows != 1:
        raise CorruptStateError(f"checkpoint metadata file {path} has {table.num_rows} 'meta' rows, expected exactly 1")
    return table.column("value_bytes")[0].as_py()


# --- reading ---------------------------------------------------------------------------------
def _checkpoint_of(rel_path: str) -> str:
    cid = checkpoint_of_path(rel_path)
    return "?" if cid is None else str(cid)


def _open_dataset(checkpoint_dir: str, files: list[str], operator_id: str) -> ds.Dataset:
    fs, root = resolve_filesystem(checkpoint_dir)
    paths = [_join(root, f) for f in files]
    infos = fs.get_file_info(paths)
    missing = [f for f, info in zip(files, infos) if info.type == pafs.FileType.NotFound]
    if missing:
        raise CorruptStateError(
            f"state file {missing[0]!r} of checkpoint {_checkpoint_of(missing[0])} is missing under {checkpoint_dir} "
            f"(needed by operator {operator_id!r}{f'; {len(missing) - 1} more missing' if len(missing) > 1 else ''}); "
            "the checkpoint is damaged: restore from another checkpoint or savepoint"
        )
    # low-cardinality strings stay dictionaries: filtering and grouping on them then costs nothing
    fmt = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(dictionary_columns=set(_DICT_COLUMNS)))
    return ds.dataset(paths, schema=_WRITE_SCHEMA, format=fmt, filesystem=fs)


def _runs(*keys: np.ndarray) -> Iterable[tuple[int, int]]:
    """[start, end) of runs of equal consecutive key tuples."""
    n = len(keys[0])
    if n == 0:
        return []
    change = np.zeros(n - 1, dtype=bool)
    for k in keys:
        change |= k[1:] != k[:-1]
    bounds = np.concatenate(([0], np.flatnonzero(change) + 1, [n])).tolist()
    return zip(bounds[:-1], bounds[1:])


def _names(prefix: str) -> list[str]:
    return [f.name for f in STATE_FILE_SCHEMA if f.name.rsplit("_", 1) in ([prefix, s] for s in columns.SUFFIXES)]


_VALUE_COLUMNS = _names("value")
_KEYED_COLUMNS = ["key_group", "state_name", "state_kind", *_names("key"), *_names("namespace"), *_VALUE_COLUMNS]
_LIST_COLUMNS = ["subtask", "parallelism", "kind", "state_name", "seq", *_VALUE_COLUMNS]




def _keyed_from(table: pa.Table) -> KeyedSnapshot:
    if table.num_rows == 0:
        return {}
    c = table.column
    n = table.num_rows
    keys = columns.decode(columns.columns_of(table, "key"), n)
    nss = columns.decode(columns.columns_of(table, "namespace"), n)
    vals = columns.decode(columns.columns_of(table, "value"), n)
    kg = c("key_group").to_numpy()
    name_chunks = table.select(["state_name"]).unify_dictionaries().column(0).chunks  # one dictionary for all chunks
    names = name_chunks[0].dictionary.to_pylist()
    name_idx = np.concatenate([ch.indices.to_numpy(zero_copy_only=False) for ch in name_chunks])
    kinds = c("state_kind")
    out: KeyedSnapshot = {}
    # files are written grouped by (key group, state) in entry order: each run is one state's entries
    with gc_paused():
        for s, e in _runs(kg, name_idx):
            group = out.setdefault(int(kg[s]), {})
            name = names[name_idx[s]]
            entries = StateEntries(list(zip(keys[s:e], nss[s:e])), vals[s:e])
            if name in group:  # the same state in two runs (two files): keep both, in file order
                cast(StateEntries, group[name][1]).extend(entries)  # every run of `out` is StateEntries
            else:
                group[name] = (kinds[s].as_py(), entries)
    return out


def _split_even(items: list[Any], parallelism: int, subtask_index: int) -> list[Any]:
    """Subtask i's contiguous share of `items`; the first (n % p) subtasks get one more (Flink: RoundRobinOperatorStateRepartitioner)."""
    base, extra = divmod(len(items), parallelism)
    start = subtask_index * base + min(subtask_index, extra)
    return items[start : start + base + (1 if subtask_index < extra else 0)]


def _lists_from(table: pa.Table, subtask_index: int, parallelism: int) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    operator_lists: dict[str, list[Any]] = {}
    union_lists: dict[str, list[Any]] = {}
    if table.num_rows == 0:
        return operator_lists, union_lists
    c = table.column
    vals = columns.decode(columns.columns_of(table, "value"), table.num_rows)
    kinds = c("kind").to_pylist()
    names = c("state_name").to_pylist()
    subtasks = c("subtask").to_numpy()
    seqs = c("seq").to_numpy()
    old_par = c("parallelism").to_numpy()
    # per (kind, state): rows in (old subtask, seq) order, whatever order the files came in
    order = np.lexsort((seqs, subtasks))
    by_state: dict[tuple[str, str], list[int]] = {}
    for i in order.tolist():
        by_state.setdefault((kinds[i], names[i]), []).append(i)
    for (kind, name), rows in by_state.items():
        if kind == KIND_UNION:
            union_lists[name] = [vals[i] for i in rows]
        elif int(old_par[rows].max()) == parallelism:
            # unchanged parallelism: every subtask gets back exactly what it wrote
            operator_lists[name] = [vals[i] for i in rows if subtasks[i] == subtask_index]
        else:
            operator_lists[name] = _split_even([vals[i] for i in rows], parallelism, subtask_index)
    return operator_lists, union_lists


def read_operator_state(
    checkpoint_dir: str,
    files: list[str],
    operator_id: str,
    key_group_range: KeyGroupRange,
    subtask_index: int,
    parallelism: int,
) -> StateInitializationContext:
    """The state one operator subtask restores from the checkpoint files of its operator.

    keyed: only the key groups in `key_group_range` (a pyarrow filter, so row groups of other key
    groups are skipped by their statistics and other rows are never decoded); operator lists:
    unchanged parallelism -> each subtask gets exactly what it wrote, else all items in (old
    subtask, seq) order dealt out in contiguous even ranges; union lists: every item of every old
    subtask. `restored_checkpoint_id` is left None for the caller to set.
    """
    if not 0 <= subtask_index < parallelism:
        raise StorageError(f"restoring operator {operator_id!r}: subtask index {subtask_index} is outside parallelism {parallelism}")
    ctx = StateInitializationContext()
    if not files:
        return ctx
    dataset = _open_dataset(checkpoint_dir, list(dict.fromkeys(files)), operator_id)
    f = pc.field
    mine = f("operator_id") == operator_id
    where = f"operator {operator_id!r} from checkpoint {_checkpoint_of(max(files, key=lambda p: checkpoint_of_path(p) or 0))} under {checkpoint_dir}"
    try:
        # two scans, each skipping row groups by statistics: this subtask's key groups, and all list state
        keyed = dataset.to_table(
            filter=mine & (f("kind") == KIND_KEYED) & (f("key_group") >= key_group_range.start) & (f("key_group") <= key_group_range.end),
            columns=_KEYED_COLUMNS,
        )
        lists = dataset.to_table(filter=mine & f("kind").isin([KIND_OPERATOR, KIND_UNION]), columns=_LIST_COLUMNS)
        native = dataset.to_table(filter=mine & (f("kind") == KIND_NATIVE), columns=NATIVE_COLUMNS)
        meta = dataset.to_table(filter=mine & (f("kind") == KIND_STATE_META), columns=["value_string"])
    except Exception as e:  # damaged or foreign files
        raise _unreadable(checkpoint_dir, list(dict.fromkeys(files)), operator_id, e) from e
    ctx.native = native_bundles(native) if native.num_rows else []
    ctx.keyed = _keyed_from(keyed)
    ctx.operator_lists, ctx.union_lists = _lists_from(lists, subtask_index, parallelism)
    ctx.state_meta = merge_state_meta(_json_rows(meta.column("value_string").to_pylist(), where))
    return ctx


def _unreadable(checkpoint_dir: str, files: list[str], operator_id: str, error: Exception) -> StorageError:
    """The error for state files that could not be read, naming the file at fault.

    A file that is damaged (truncated, not Parquet, not ours), or a local file that cannot be
    read, is a CorruptStateError: non-recoverable, since a restart would read the same bytes. An
    I/O error on a remote filesystem (an object store) may pass: a StorageError, restarted as
    the restart strategy says.
    """
    fs, root = resolve_filesystem(checkpoint_dir)
    remote = "://" in checkpoint_dir and not checkpoint_dir.startswith("file://")
    for rel in files:  # the error path only: find the file at fault by reading each one
        try:
            pq.read_table(_join(root, rel), filesystem=fs)
        except Exception as e:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError, ... for damaged files
            transient = remote and isinstance(e, OSError) and not isinstance(e, (FileNotFoundError, PermissionError))
            cls = StorageError if transient else CorruptStateError
            return cls(
                f"state file {_join(root, rel)} (checkpoint {_checkpoint_of(rel)}, state of operator {operator_id!r}) cannot be "
                f"read: {type(e).__name__}: {str(e).rstrip('.')}. "
                + ("It may be a passing I/O error." if transient else
                   "The savepoint or checkpoint is damaged (truncated or overwritten?): restore from another savepoint or checkpoint.")
            )
    return StorageError(f"reading the state of operator {operator_id!r} under {checkpoint_dir} failed: {type(error).__name__}: {error}")


def _json_rows(values: list[Any], where: str) -> list[dict[str, Any]]:
    out = []
    for v in values:
        try:
            out.append(json.loads(v))
        except (TypeError, ValueError) as e:
            raise CorruptStateError(f"the recorded state types of {where} are not valid JSON ({e}): the state file is damaged") from e
    return out


def merge_state_meta(records: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """One operator's 'state_meta' records of several old subtasks (or chained checkpoints) as
    one: the first known type of each state and of the declared key, the union of the key types
    seen. None when there is no record (files written before types were recorded)."""
    out: dict[str, Any] | None = None
    for r in records:
        if out is None:
            out = {"job": r.get("job"), "key": {"declared": None, "observed": None}, "states": {}}
        key = r.get("key") or {}
        if out["key"]["declared"] is None:
            out["key"]["declared"] = key.get("declared")
        if key.get("observed") is not None:
            out["key"]["observed"] = sorted(set(out["key"]["observed"] or ()) | set(key["observed"]))
        for name, info in (r.get("states") or {}).items():
            info = info or {}
            cur = out["states"].setdefault(name, {"kind": info.get("kind"), "type": None})
            if cur["type"] is None:
                cur["type"] = info.get("type")
    return out
