"""The row layout of the checkpoint Delta table, and the Parquet files tasks write into it.

One Parquet file per task per checkpoint, under `<checkpoint_dir>/checkpoint_id=<id>/`. The Delta
table is partitioned by `checkpoint_id`, so the files do not contain that column (Delta supplies it
from the partition value); everything else is plain columns, so Spark SQL can read state:

    operator_id, subtask, parallelism, kind ('keyed' | 'operator' | 'union' | 'meta'),
    key_group (null unless keyed), state_name, state_kind, seq (order of list items),
    key_{long,string,bytes}, namespace_{long,string,bytes}, value_{long,double,string,bytes}

Each of key / namespace / value goes to exactly one column: an `int` within int64 to *_long, a
`str` to *_string, a value `float` to value_double, None to none (all null), anything else pickled
(protocol 5) to *_bytes. The test is `type(x) is ...`, so subclasses (bool, IntEnum, numpy scalars)
are pickled and come back with their type.

pyarrow and numpy only: TaskManagers import this module, and only storage/'s Delta code imports
deltalake (runtime.storage.checkpoint_store commits these files).
"""
from __future__ import annotations

import logging
import operator
import os
import pickle
import re
import uuid
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from runtime.core.gc_pause import gc_paused
from runtime.core.checkpoint import KeyedSnapshot, OperatorSnapshot, StateInitializationContext
from runtime.core.errors import StorageError
from runtime.core.keygroups import KeyGroupRange
from runtime.rpc.messages import StateFileHandle

log = logging.getLogger(__name__)

PARTITION_COLUMN = "checkpoint_id"
KIND_KEYED = "keyed"
KIND_OPERATOR = "operator"
KIND_UNION = "union"
KIND_META = "meta"
META_OPERATOR_ID = "__checkpoint__"  # reserved: the operator id of the one 'meta' row per checkpoint
META_STATE_NAME = "metadata"
LIST_STATE_KIND = "list"  # state_kind of operator and union list rows
STATE_FILE_PREFIX = "state-"
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
        ("key_long", pa.int64()),
        ("key_string", pa.string()),
        ("key_bytes", pa.binary()),
        ("namespace_long", pa.int64()),
        ("namespace_string", pa.string()),
        ("namespace_bytes", pa.binary()),
        ("value_long", pa.int64()),
        ("value_double", pa.float64()),
        ("value_string", pa.string()),
        ("value_bytes", pa.binary()),
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
_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1
_NONE_TYPE = type(None)
_PARTITION_RE = re.compile(r"(?:^|/)checkpoint_id=(-?\d+)/")


def partition_dir(checkpoint_id: int) -> str:
    """The table-relative directory of a checkpoint's files (its Delta partition)."""
    return f"{PARTITION_COLUMN}={int(checkpoint_id)}"


def is_metadata_file(path: str) -> bool:
    return os.path.basename(path).startswith(METADATA_FILE_PREFIX)


def resolve_filesystem(checkpoint_dir: str) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and the root path inside it for a local path or a URI (file://, s3://, ...)."""
    if "://" in checkpoint_dir:
        try:
            fs, root = pafs.FileSystem.from_uri(checkpoint_dir)
        except Exception as e:  # noqa: BLE001 - pyarrow raises several types for bad URIs
            raise StorageError(f"checkpoint directory {checkpoint_dir!r} is not a usable filesystem URI: {e}") from e
        return fs, root.rstrip("/")
    return pafs.LocalFileSystem(), os.path.abspath(checkpoint_dir).rstrip("/") or "/"


def _join(root: str, rel: str) -> str:
    return f"{root}/{rel.lstrip('/')}"


# --- encoding --------------------------------------------------------------------------------
class _UnpicklableError(Exception):
    def __init__(self, index: int, value: Any, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.index, self.value, self.cause = index, value, cause


def _dumps_all(values: list[Any], simple: Any) -> list[bytes | None]:
    """Pickle every value `simple` does not cover (None for those it does); names the failing index."""
    try:
        return [None if simple(x) else pickle.dumps(x, protocol=5) for x in values]
    except Exception:  # noqa: BLE001 - find which one, slowly, only on failure
        for i, x in enumerate(values):
            if not simple(x):
                try:
                    pickle.dumps(x, protocol=5)
                except Exception as e:  # noqa: BLE001
                    raise _UnpicklableError(i, x, e) from e
        raise


def _utf8_ok(x: str) -> bool:
    try:
        x.encode("utf-8")
        return True
    except UnicodeEncodeError:  # lone surrogates: not valid in a Parquet string, pickled instead
        return False


def _encode(values: list[Any], with_double: bool) -> list[pa.Array]:
    """Encode one logical column into [long, (double,) string, bytes] arrays; exactly one is set per row."""
    n = len(values)
    if values.count(None) == n:  # e.g. the VOID namespace: cheaper than collecting types
        types: set[type] = set()
    else:
        types = set(map(type, values))
    L, D, S, B = pa.int64(), pa.float64(), pa.string(), pa.binary()

    def out(long: pa.Array | None = None, double: pa.Array | None = None, string: pa.Array | None = None, blob: pa.Array | None = None) -> list[pa.Array]:
        cols = [long if long is not None else pa.nulls(n, L)]
        if with_double:
            cols.append(double if double is not None else pa.nulls(n, D))
        cols.append(string if string is not None else pa.nulls(n, S))
        cols.append(blob if blob is not None else pa.nulls(n, B))
        return cols

    # fast paths: one simple type (plus None) covers the whole column, pyarrow converts in C
    if not types or types == {_NONE_TYPE}:
        return out()
    try:
        if types <= {int, _NONE_TYPE}:
            return out(long=pa.array(values, type=L))
        if types <= {str, _NONE_TYPE}:
            return out(string=pa.array(values, type=S))
        if with_double and types <= {float, _NONE_TYPE}:
            return out(double=pa.array(values, type=D))
    except (OverflowError, pa.ArrowInvalid, UnicodeEncodeError):
        pass  # an int beyond int64 or a string that is not UTF-8: those are pickled below
    try:
        return _encode_mixed(values, types, with_double, strict_str=False, out=out)
    except UnicodeEncodeError:
        return _encode_mixed(values, types, with_double, strict_str=True, out=out)


def _encode_mixed(values: list[Any], types: set[type], with_double: bool, strict_str: bool, out: Any) -> list[pa.Array]:
    L, D, S, B = pa.int64(), pa.float64(), pa.string(), pa.binary()

    def is_str(x: Any) -> bool:
        return type(x) is str and (not strict_str or _utf8_ok(x))

    def simple(x: Any) -> bool:
        t = type(x)
        return x is None or (t is int and _I64_MIN <= x <= _I64_MAX) or (with_double and t is float) or is_str(x)

    long = pa.array([x if type(x) is int and _I64_MIN <= x <= _I64_MAX else None for x in values], type=L) if int in types else None
    string = pa.array([x if is_str(x) else None for x in values], type=S) if str in types else None
    double = pa.array([x if type(x) is float else None for x in values], type=D) if with_double and float in types else None
    blob = pa.array(_dumps_all(values, simple), type=B)
    return out(long, double, string, blob)


def _decode(long: pa.ChunkedArray | pa.Array, double: pa.ChunkedArray | pa.Array | None, string: pa.ChunkedArray | pa.Array, blob: pa.ChunkedArray | pa.Array) -> list[Any]:
    """Invert `_encode`: the python objects of one logical column, types preserved."""
    n = len(long)
    others = [(c, kind) for c, kind in ((double, "d"), (string, "s"), (blob, "b")) if c is not None and c.null_count < n]
    values: list[Any] = long.to_pylist() if long.null_count < n else [None] * n
    for col, kind in others:
        if col.null_count == 0 and long.null_count == n and len(others) == 1:
            # the whole column is of this kind
            return [pickle.loads(b) for b in col.to_pylist()] if kind == "b" else col.to_pylist()
        idx = np.flatnonzero(np.asarray(col.is_valid()))
        items = col.drop_null().to_pylist()
        if kind == "b":
            for i, b in zip(idx.tolist(), items):
                values[i] = pickle.loads(b)
        else:
            for i, v in zip(idx.tolist(), items):
                values[i] = v
    return values


# --- writing ---------------------------------------------------------------------------------
@dataclass
class _Segment:
    """A run of rows that share operator, kind, key group and state (one list of entries or items)."""

    operator_id: str
    kind: str
    key_group: int | None
    state_name: str
    state_kind: str | None
    count: int


def _dict_strings(segments: list[_Segment], counts: np.ndarray, attr: str) -> pa.DictionaryArray:
    """A per-row string column from per-segment values, as dictionary indices (no per-row Python;
    Parquet stores it dictionary-encoded without hashing every row)."""
    uniques: dict[Any, int] = {}
    idx = np.fromiter((uniques.setdefault(getattr(s, attr), len(uniques)) for s in segments), dtype=np.int32, count=len(segments))
    return pa.DictionaryArray.from_arrays(pa.array(np.repeat(idx, counts)), pa.array(list(uniques), type=pa.string()))


def _build_table(subtask_index: int, parallelism: int, snapshots: dict[str, OperatorSnapshot]) -> tuple[pa.Table, list[str]]:
    segments: list[_Segment] = []
    keys: list[Any] = []
    namespaces: list[Any] = []
    values: list[Any] = []
    operator_ids: list[str] = []
    k0, k1, k2 = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(2)
    for op_id, snap in snapshots.items():
        if op_id == META_OPERATOR_ID:
            raise StorageError(f"operator id {META_OPERATOR_ID!r} is reserved for checkpoint metadata; give the operator another uid")
        before = len(values)
        keyed: KeyedSnapshot = snap.materialize_keyed() or {}
        for kg in sorted(keyed):  # sorted: row-group statistics on key_group then prune well
            for name, (state_kind, entries) in keyed[kg].items():
                if not entries:
                    continue
                segments.append(_Segment(op_id, KIND_KEYED, int(kg), name, state_kind, len(entries)))
                keys.extend(map(k0, entries))
                namespaces.extend(map(k1, entries))
                values.extend(map(k2, entries))
        for kind, lists in ((KIND_OPERATOR, snap.operator_lists), (KIND_UNION, snap.union_lists)):
            for name, items in lists.items():
                if not items:
                    continue
                segments.append(_Segment(op_id, kind, None, name, LIST_STATE_KIND, len(items)))
                values.extend(items)
        # per operator the keyed entries come first, then list items: pad key / namespace for the items
        added = len(values) - before
        if added:
            operator_ids.append(op_id)
            keys.extend([None] * (added - (len(keys) - before)))  # list items have no key / namespace
            namespaces.extend([None] * (added - (len(namespaces) - before)))
    n = len(values)
    counts = np.fromiter((s.count for s in segments), dtype=np.int64, count=len(segments))
    starts = np.cumsum(counts) - counts
    kg_seg = np.fromiter((-1 if s.key_group is None else s.key_group for s in segments), dtype=np.int32, count=len(segments))
    kg = np.repeat(kg_seg, counts)
    try:
        key_cols = _encode(keys, with_double=False)
        ns_cols = _encode(namespaces, with_double=False)
        value_cols = _encode(values, with_double=True)
    except _UnpicklableError as e:
        seg = segments[int(np.searchsorted(starts, e.index, side="right")) - 1]
        where = f"key group {seg.key_group}" if seg.key_group is not None else f"{seg.kind} list state"
        raise StorageError(
            f"cannot write state of operator {seg.operator_id!r}, state {seg.state_name!r} ({where}): a value of type "
            f"{type(e.value).__name__} cannot be pickled ({e.cause}); keep state values picklable"
        ) from e.cause
    columns = [
        _dict_strings(segments, counts, "operator_id"),
        pa.array(np.full(n, subtask_index, dtype=np.int32)),
        pa.array(np.full(n, parallelism, dtype=np.int32)),
        _dict_strings(segments, counts, "kind"),
        pa.array(kg, type=pa.int32(), mask=kg < 0),
        _dict_strings(segments, counts, "state_name"),
        _dict_strings(segments, counts, "state_kind"),
        pa.array(np.arange(n, dtype=np.int64) - np.repeat(starts, counts)),  # index within its list
        *key_cols,
        *ns_cols,
        *value_cols,
    ]
    return pa.Table.from_arrays(columns, schema=_WRITE_SCHEMA), operator_ids


def _write_atomically(checkpoint_dir: str, rel_path: str, table: pa.Table) -> int:
    """Write `table` to a hidden temp name, then rename: a crash never leaves a truncated file under the final name."""
    fs, root = resolve_filesystem(checkpoint_dir)
    final = _join(root, rel_path)
    tmp = _join(root, f"{os.path.dirname(rel_path)}/.{os.path.basename(rel_path)}.{uuid.uuid4().hex[:8]}.inprogress")
    try:
        fs.create_dir(os.path.dirname(final), recursive=True)
        pq.write_table(
            table, tmp, filesystem=fs, row_group_size=_ROW_GROUP_SIZE, compression="snappy",
            write_statistics=_STATS_COLUMNS, use_dictionary=list(_DICT_COLUMNS), store_schema=False,
        )
        fs.move(tmp, final)
        return fs.get_file_info(final).size
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
) -> StateFileHandle | None:
    """Write one task's state for a checkpoint as one Parquet file; None if there are no rows.

    The file is `<checkpoint_dir>/checkpoint_id=<id>/state-<subtask>-<attempt>-<uuid>.parquet`;
    the handle's path is relative to `checkpoint_dir`. `snapshots`: operator_state_id -> snapshot
    (keyed state may be a supplier; it is evaluated here). Committables are not written: they
    travel in the acknowledgement.
    """
    table, operator_ids = _build_table(subtask_index, parallelism, snapshots)
    if table.num_rows == 0:
        return None
    rel = f"{partition_dir(checkpoint_id)}/{STATE_FILE_PREFIX}{subtask_index}-{attempt_number}-{uuid.uuid4().hex}.parquet"
    size = _write_atomically(checkpoint_dir, rel, table)
    return StateFileHandle(path=rel, size=size, rows=table.num_rows, operator_ids=operator_ids)


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
        raise StorageError(f"checkpoint metadata file {path} is missing: {e}") from e
    except Exception as e:  # noqa: BLE001 - pyarrow raises OSError / ArrowInvalid for damaged files
        raise StorageError(f"checkpoint metadata file {path} cannot be read: {e}") from e
    if table.num_rows != 1:
        raise StorageError(f"checkpoint metadata file {path} has {table.num_rows} 'meta' rows, expected exactly 1")
    return table.column("value_bytes")[0].as_py()


# --- reading ---------------------------------------------------------------------------------
def _checkpoint_of(rel_path: str) -> str:
    m = _PARTITION_RE.search("/" + rel_path)
    return m.group(1) if m else "?"


def _open_dataset(checkpoint_dir: str, files: list[str], operator_id: str) -> ds.Dataset:
    fs, root = resolve_filesystem(checkpoint_dir)
    paths = [_join(root, f) for f in files]
    infos = fs.get_file_info(paths)
    missing = [f for f, info in zip(files, infos) if info.type == pafs.FileType.NotFound]
    if missing:
        raise StorageError(
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


_VALUE_COLUMNS = ["value_long", "value_double", "value_string", "value_bytes"]
_KEYED_COLUMNS = ["key_group", "state_name", "state_kind", "key_long", "key_string", "key_bytes",
                  "namespace_long", "namespace_string", "namespace_bytes", *_VALUE_COLUMNS]
_LIST_COLUMNS = ["subtask", "parallelism", "kind", "state_name", "seq", *_VALUE_COLUMNS]




def _keyed_from(table: pa.Table) -> KeyedSnapshot:
    if table.num_rows == 0:
        return {}
    c = table.column
    keys = _decode(c("key_long"), None, c("key_string"), c("key_bytes"))
    nss = _decode(c("namespace_long"), None, c("namespace_string"), c("namespace_bytes"))
    vals = _decode(c("value_long"), c("value_double"), c("value_string"), c("value_bytes"))
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
            entries = list(zip(keys[s:e], nss[s:e], vals[s:e]))
            if name in group:  # the same state in two runs (two files): keep both, in file order
                group[name][1].extend(entries)
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
    vals = _decode(c("value_long"), c("value_double"), c("value_string"), c("value_bytes"))
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
    where = f"operator {operator_id!r} from checkpoint {_checkpoint_of(files[0])} under {checkpoint_dir}"
    try:
        # two scans, each skipping row groups by statistics: this subtask's key groups, and all list state
        keyed = dataset.to_table(
            filter=mine & (f("kind") == KIND_KEYED) & (f("key_group") >= key_group_range.start) & (f("key_group") <= key_group_range.end),
            columns=_KEYED_COLUMNS,
        )
        lists = dataset.to_table(filter=mine & f("kind").isin([KIND_OPERATOR, KIND_UNION]), columns=_LIST_COLUMNS)
    except Exception as e:  # noqa: BLE001 - damaged or foreign files
        raise StorageError(f"reading state of {where} failed: {e}") from e
    ctx.keyed = _keyed_from(keyed)
    ctx.operator_lists, ctx.union_lists = _lists_from(lists, subtask_index, parallelism)
    return ctx
