"""Read operator state from a checkpoint or savepoint table (Flink's State Processor API, over Delta).

`path` is a checkpoint table (`<state.checkpoints.dir>/<job id>`) or a savepoint location; the
checkpoint read is the newest committed one unless `checkpoint_id` says otherwise. Only the files
of that checkpoint that hold the operator are read (from the Delta log and the metadata row), with
pyarrow filters, while the job may be running.

Keyed state comes back one row per (key group, state, key, namespace) with columns
`key_group, state_name, state_kind, key, namespace, value`. Each of key / namespace / value is the
typed column the state file used when all its rows used the same one (int64, double, string, or
the tuple column: list<struct<long, double, string, bytes>>); a column of pickled or mixed values
is decoded and shown as `repr()` strings. Namespaces that are time windows add `window_start` and
`window_end`. The columnar window aggregate (the vectorized path) stores a pane per (key, window
start): namespace = window start, value = (partial, ..., fired 0/1).

pyarrow and deltalake only; `runtime.deploy.state_reader_spark` gives the same as a Spark DataFrame.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from runtime.core.errors import StorageError
from runtime.storage import state_columns as columns
from runtime.storage.checkpoint_store import CheckpointMetadata, CheckpointStore
from runtime.storage.state_files import KIND_KEYED, KIND_NATIVE, KIND_STATE_META, NATIVE_CATALOG, NATIVE_COLUMNS, _build_table, _open_dataset, native_bundles

PHYSICAL = {prefix: [f"{prefix}_{s}" for s in columns.SUFFIXES] for prefix in ("key", "namespace", "value")}


@dataclass
class OperatorStateInfo:
    operator_id: str
    parallelism: int | None
    max_parallelism: int | None
    # state name -> (kind, rows); keyed states and operator/union list states alike (rows None:
    # native state, counted on reading)
    states: dict[str, tuple[str, int | None]] = field(default_factory=dict)

    @property
    def rows(self) -> int | None:
        """Rows over every state; None when a state's count is unknown (native state, counted on reading)."""
        counts = [n for _, n in self.states.values() if n is not None]
        return None if len(counts) < len(self.states) else sum(counts)


def resolve_checkpoint(path: str, checkpoint_id: int | None = None) -> CheckpointMetadata:
    """The metadata of checkpoint `checkpoint_id` (default: the newest) in the table at `path`."""
    store = CheckpointStore(path, "state-reader")
    meta = store.latest() if checkpoint_id is None else store.get(checkpoint_id)
    if meta is None:
        ids = store.completed_ids()
        if not ids:
            raise StorageError(f"{path} holds no checkpoint or savepoint (no committed Delta table of state there)")
        raise StorageError(f"{path} has no checkpoint {checkpoint_id}; it has {', '.join(map(str, ids))}")
    return meta


def _all_files(meta: CheckpointMetadata) -> list[str]:
    return sorted({p for paths in meta.operator_files.values() for p in paths})


def list_operators(path: str, checkpoint_id: int | None = None) -> list[OperatorStateInfo]:
    """Every operator with state in the checkpoint: its states, their kinds and row counts."""
    meta = resolve_checkpoint(path, checkpoint_id)
    files = _all_files(meta)
    if not files:
        return []
    dataset = _open_dataset(path, files, "*")
    f = pc.field
    # entries only: native files are counted below, the recorded types are not state
    t = dataset.to_table(columns=["operator_id", "state_name", "state_kind"], filter=~f("kind").isin([KIND_NATIVE, KIND_STATE_META]))
    t = pa.table({c: t.column(c).cast(pa.string()) for c in t.column_names})
    grouped = t.group_by(["operator_id", "state_name", "state_kind"]).aggregate([([], "count_all")]).to_pylist()
    out: dict[str, OperatorStateInfo] = {}
    for g in sorted(grouped, key=lambda r: (r["operator_id"], r["state_name"])):
        op = g["operator_id"]
        info = out.setdefault(op, OperatorStateInfo(op, meta.parallelism.get(op), meta.max_parallelism.get(op)))
        info.states[g["state_name"]] = (g["state_kind"], g["count_all"])
    # native checkpoints (RocksDB): their catalogs name the states; entries are counted on reading
    catalogs = dataset.to_table(columns=["operator_id", "value_bytes"], filter=(f("kind") == KIND_NATIVE) & (f("state_name") == NATIVE_CATALOG))
    for op, blob in zip(catalogs.column("operator_id").cast(pa.string()).to_pylist(), catalogs.column("value_bytes").to_pylist()):
        info = out.setdefault(op, OperatorStateInfo(op, meta.parallelism.get(op), meta.max_parallelism.get(op)))
        for name, (kind, _sid) in json.loads(blob)["tables"].items():
            info.states.setdefault(name, (kind, None))
    return sorted(out.values(), key=lambda i: i.operator_id)


def read_keyed_state(path: str, operator_id: str, state_name: str | None = None, checkpoint_id: int | None = None) -> pa.Table:
    """One operator's keyed state (optionally one state) from a checkpoint or savepoint; see the module doc."""
    meta = resolve_checkpoint(path, checkpoint_id)
    files = meta.operator_files.get(operator_id)
    if not files:
        have = ", ".join(sorted(meta.operator_files)) or "none"
        raise StorageError(f"checkpoint {meta.checkpoint_id} at {path} has no state of operator {operator_id!r}; operators with state: {have}")
    f = pc.field
    where = (f("operator_id") == operator_id) & (f("kind") == KIND_KEYED)
    if state_name is not None:
        where = where & (f("state_name") == state_name)
    wanted = ["key_group", "state_name", "state_kind", *PHYSICAL["key"], *PHYSICAL["namespace"], *PHYSICAL["value"]]
    dataset = _open_dataset(path, list(files), operator_id)
    names = set(dataset.schema.names)
    table = dataset.to_table(filter=where, columns=[c for c in wanted if c in names])
    native = dataset.to_table(filter=(f("operator_id") == operator_id) & (f("kind") == KIND_NATIVE), columns=NATIVE_COLUMNS)
    if native.num_rows:  # a native RocksDB checkpoint: decoded into the canonical rows
        decoded = _canonical_rows(native, operator_id, meta.max_parallelism.get(operator_id), state_name).select(table.column_names)
        table = pa.concat_tables([table, decoded.cast(table.schema)])
    if state_name is not None and table.num_rows == 0:
        states = [s for info in list_operators(path, meta.checkpoint_id) if info.operator_id == operator_id for s in info.states]
        raise StorageError(
            f"operator {operator_id!r} has no keyed state {state_name!r} in checkpoint {meta.checkpoint_id}; its states: {', '.join(states) or 'none'}"
        )
    out: dict[str, Any] = {
        "key_group": table.column("key_group"),
        "state_name": table.column("state_name").cast(pa.string()),
        "state_kind": table.column("state_kind").cast(pa.string()),
    }
    for prefix in ("key", "namespace", "value"):
        out[prefix], decoded = _logical(table, prefix)
        if prefix == "namespace" and decoded is not None and decoded and all(_is_window(w) for w in decoded if w is not None):
            out["window_start"] = pa.array([None if w is None else w.start for w in decoded], type=pa.int64())
            out["window_end"] = pa.array([None if w is None else w.end for w in decoded], type=pa.int64())
    return pa.table(out)


def _canonical_rows(native: pa.Table, operator_id: str, max_parallelism: int | None, state_name: str | None) -> pa.Table:
    """The canonical state rows of native bundles (as the state file writer would write them)."""
    from runtime.core.checkpoint import OperatorSnapshot
    from runtime.core.keygroups import KeyGroupRange
    from runtime.state.rocksdb import native_to_keyed  # needs rocksdict, as the TaskManagers have

    bundles = native_bundles(native)
    hi = (max_parallelism or 1 + max(int(b.catalog["key_group_end"]) for b in bundles)) - 1
    keyed = native_to_keyed(bundles, KeyGroupRange(0, hi))
    if state_name is not None:
        keyed = {kg: {n: v for n, v in states.items() if n == state_name} for kg, states in keyed.items()}
    table, _ = _build_table(0, 1, {operator_id: OperatorSnapshot(keyed=keyed)})
    return table


def _is_window(x: Any) -> bool:
    return isinstance(getattr(x, "start", None), int) and isinstance(getattr(x, "end", None), int)


def _logical(table: pa.Table, prefix: str) -> tuple[Any, list[Any] | None]:
    """The one typed column holding `prefix`, or its decoded values as repr strings (and the values)."""
    n = table.num_rows
    cols = columns.columns_of(table, prefix)
    present = {s: c for s, c in cols.items() if c.null_count < n}
    if not present:
        return pa.nulls(n, pa.null()), None
    if len(present) == 1:
        (suffix, col), = present.items()
        if suffix != columns.BYTES:
            return col, None
    decoded = columns.decode(cols, n)
    return pa.array([None if v is None else repr(v) for v in decoded], type=pa.string()), decoded
