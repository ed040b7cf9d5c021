"""Incremental RocksDB checkpoints (a changelog over periodic materialization): a checkpoint that
builds on earlier ones restores exactly the state at its barrier, at any parallelism, through the
state files of its whole chain; retention keeps the checkpoints a retained one builds on."""
from __future__ import annotations

from typing import Any

import pytest

from runtime.api.datastream.state import ListStateDescriptor, MapStateDescriptor, ReducingStateDescriptor, ValueStateDescriptor
from runtime.core.checkpoint import OperatorSnapshot
from runtime.core.errors import ConfigurationError, SharedStateMissingError
from runtime.core.keygroups import KeyGroupRange, compute_key_group_range_for_operator_index
from runtime.rpc.messages import StateFileHandle
from runtime.state.changelog import ChangelogOptions, StateChangelog, decode_log, encode_log
from runtime.state.rocksdb import RocksDBKeyedStateBackend, native_to_keyed
from runtime.storage.checkpoint_store import CheckpointMetadata, CheckpointStore
from runtime.storage.state_files import read_operator_state, write_state_file
from runtime.storage.state_reader import read_keyed_state

pytestmark = pytest.mark.unit
MAX_P = 16
NEVER = ChangelogOptions(enabled=True, materialize_interval_ms=10**9, max_log_bytes=1 << 40)


class Job:
    """One RocksDB backend with four kinds of state, checkpointed into state files like a task does."""

    def __init__(self, root: str, options: ChangelogOptions = NEVER) -> None:
        self.root = root
        self.b = RocksDBKeyedStateBackend(KeyGroupRange(0, MAX_P - 1), MAX_P, "op", changelog=options)
        self.total = self.b.get_partitioned_state(ReducingStateDescriptor("total", lambda a, c: (a[0], a[1] + c[1])))
        self.name = self.b.get_partitioned_state(ValueStateDescriptor("name"))
        self.seen = self.b.get_partitioned_state(ListStateDescriptor("seen"))
        self.tags = self.b.get_partitioned_state(MapStateDescriptor("tags"))
        self.paths: dict[int, str] = {}

    def write(self, keys: range, round_: int) -> None:
        for k in keys:
            self.b.set_current_key(k)
            self.total.add((k, round_))
            self.name.update(f"user-{k}-{round_}")
            self.seen.add(round_)
            self.tags.put(f"r{round_}", k % 2 == 0)
            if k % 5 == 0:
                self.tags.remove(f"r{round_ - 1}")
            if k % 7 == 0:
                self.seen.clear()
            if k % 11 == 0:
                self.name.clear()
            if k % 13 == 0:
                self.seen.update([k, -k])  # a replace: range delete + puts

    def checkpoint(self, cid: int) -> tuple[list[str], dict]:
        """Snapshot + write like a task; returns the files a restore reads and the state at the barrier."""
        expected = _canonical(self.b.snapshot_sync()())
        supplier = self.b.snapshot_native_sync(cid)
        shared = self.b.shared_checkpoints(cid)
        handle = write_state_file(self.root, cid, 0, 0, 1, {"op": OperatorSnapshot(native=supplier, shared_checkpoints=shared)})
        assert handle is not None
        self.paths[cid] = handle.path
        return [self.paths[c] for c in shared] + [handle.path], expected


def _canonical(keyed: dict[int, dict[str, Any]]) -> dict[tuple[int, str], list[tuple[Any, Any, Any]]]:
    out = {}
    for kg, states in keyed.items():
        for name, (_kind, entries) in states.items():
            pairs = list(zip(entries.pairs, entries.values)) if hasattr(entries, "pairs") else [((k, ns), v) for k, ns, v in entries]
            if pairs:
                out[(kg, name)] = sorted(((k, ns, sorted(v.items()) if isinstance(v, dict) else v) for (k, ns), v in pairs), key=repr)
    return out


def _restored(root: str, files: list[str], parallelism: int = 1) -> dict:
    out: dict = {}
    for i in range(parallelism):
        rng = compute_key_group_range_for_operator_index(MAX_P, parallelism, i)
        ctx = read_operator_state(root, files, "op", rng, i, parallelism)
        out.update(native_to_keyed(ctx.native, rng))
    return _canonical(out)


def test_a_chain_of_logs_restores_the_state_at_each_barrier_at_any_parallelism(tmp_path: Any) -> None:
    job, root = Job(str(tmp_path)), str(tmp_path)
    job.write(range(300), 1)
    files1, state1 = job.checkpoint(1)  # the first checkpoint materializes
    assert job.b.shared_checkpoints(1) == [] and len(files1) == 1
    job.b.notify_checkpoint_complete(1)
    job.write(range(0, 300, 3), 2)
    files2, state2 = job.checkpoint(2)
    assert job.b.shared_checkpoints(2) == [1]
    job.b.notify_checkpoint_complete(2)
    job.write(range(100, 400), 3)
    files3, state3 = job.checkpoint(3)
    assert job.b.shared_checkpoints(3) == [1, 2]
    assert state1 != state2 != state3
    for files, state in ((files1, state1), (files2, state2), (files3, state3)):
        for parallelism in (1, 3):
            assert _restored(root, files, parallelism) == state
    # a log holds only what changed: far smaller than the materialized base
    sizes = {p: (tmp_path / p).stat().st_size for p in files3}
    assert sizes[job.paths[2]] < sizes[job.paths[1]]


def test_an_unconfirmed_or_aborted_checkpoint_is_written_again_by_the_next(tmp_path: Any) -> None:
    job, root = Job(str(tmp_path)), str(tmp_path)
    job.write(range(200), 1)
    job.checkpoint(1)
    job.b.notify_checkpoint_complete(1)
    job.write(range(50), 2)
    job.checkpoint(2)  # never heard of again (a lost notification)
    job.write(range(50, 120), 3)
    files3, state3 = job.checkpoint(3)
    assert job.b.shared_checkpoints(3) == [1]  # builds on the last completed one and logs 2's writes too
    assert _restored(root, files3) == state3
    job.b.notify_checkpoint_complete(3)
    job.write(range(10), 4)
    job.checkpoint(4)
    job.b.notify_checkpoint_aborted(4)
    job.write(range(10, 20), 5)
    files5, state5 = job.checkpoint(5)  # after an abort: a full checkpoint (its chain may be gone)
    assert job.b.shared_checkpoints(5) == [] and len(files5) == 1
    assert _restored(root, files5) == state5
    job.b.notify_checkpoint_complete(99)  # a savepoint's id: not ours, changes nothing
    job.b.notify_checkpoint_complete(5)
    job.write(range(5), 6)
    files6, state6 = job.checkpoint(6)
    assert job.b.shared_checkpoints(6) == [5]
    assert _restored(root, files6) == state6


def test_materialization_by_interval_and_by_log_size() -> None:
    now = [0.0]
    c = StateChangelog(ChangelogOptions(enabled=True, materialize_interval_ms=60_000, max_log_bytes=1000), clock=lambda: now[0])
    assert c.plan(1).materialize
    c.notify_complete(1)
    c.keys.append(b"k")
    c.values.append(b"v")
    assert not c.plan(2).materialize
    c.notify_complete(2)
    now[0] = 61.0
    assert c.plan(3).materialize  # the interval since the base passed
    c.notify_complete(3)
    for i in range(100):
        c.keys.append(f"key-{i:04d}".encode())
        c.values.append(b"x" * 20)
    plan = c.plan(4)
    assert plan.materialize  # ~2.8 kB of log > max 1000 bytes


def test_a_log_round_trips_and_the_last_write_wins() -> None:
    blob = encode_log([([b"a", b"b", b"a"], [b"0", b"2", b"1"]), ([b"a", b"c"], [None, b"3"])])
    keys, values = decode_log(blob)
    assert dict(zip(keys, values)) == {b"a": None, b"b": b"2", b"c": b"3"}


def test_changelog_options_from_flink_keys() -> None:
    assert not ChangelogOptions.from_config({}).enabled
    assert ChangelogOptions.from_config({"state.backend.incremental": "true"}).enabled
    o = ChangelogOptions.from_config(
        {"state.changelog.enabled": "true", "state.changelog.periodic-materialize.interval": "2 min", "state.changelog.max-log-size": "16 mb"}
    )
    assert (o.enabled, o.materialize_interval_ms, o.max_log_bytes) == (True, 120_000, 16 << 20)
    with pytest.raises(ConfigurationError, match="state.changelog.max-log-size"):
        ChangelogOptions.from_config({"state.changelog.max-log-size": "lots"})
    with pytest.raises(ConfigurationError, match="periodic-materialize.interval"):
        ChangelogOptions.from_config({"state.changelog.periodic-materialize.interval": "soon"})


def _meta(cid: int, files: list[str], shared: list[str]) -> CheckpointMetadata:
    own = [StateFileHandle(path=p, size=1, rows=1, operator_ids=["op"]) for p in files]
    return CheckpointMetadata(
        job_id="job", checkpoint_id=cid, timestamp_ms=cid, files=own, shared_files=shared,
        operator_files={"op": sorted([*files, *shared])}, committables={}, parallelism={"op": 1}, max_parallelism={"op": MAX_P},
    )


def test_retention_keeps_what_a_retained_checkpoint_builds_on_and_refuses_a_removed_base(tmp_path: Any) -> None:
    job, root = Job(str(tmp_path)), str(tmp_path)
    store = CheckpointStore(root, "job", num_retained=1)
    job.write(range(100), 1)
    for cid in (1, 2, 3):
        files, state = job.checkpoint(cid)
        store.commit(_meta(cid, [files[-1]], files[:-1]))
        job.b.notify_checkpoint_complete(cid)
        job.write(range(cid * 10), cid + 1)
    assert store.completed_ids() == [1, 2, 3]  # 3 builds on 1 and 2: nothing could go
    assert read_keyed_state(root, "op").num_rows == sum(len(v) for v in state.values())
    job.checkpoint(4)
    job.b.notify_checkpoint_aborted(4)  # the next checkpoint is a full one: it builds on nothing
    files5, state5 = job.checkpoint(5)
    assert files5 == [job.paths[5]]
    store.commit(_meta(5, files5, []))
    assert store.completed_ids() == [5]
    assert not (tmp_path / job.paths[1]).exists()
    assert _restored(root, files5) == state5
    # a checkpoint that still names a removed file is refused, and retention is untouched
    with pytest.raises(SharedStateMissingError, match="no longer in"):
        store.commit(_meta(6, ["checkpoint_id=6/state-x.parquet"], [job.paths[2]]))
    assert store.completed_ids() == [5]


def test_pyflink_switches_reach_the_backend_options() -> None:
    from runtime.api.datastream import StreamExecutionEnvironment
    from runtime.api.datastream.checkpoint_config import EmbeddedRocksDBStateBackend

    for setup in (lambda env: env.set_state_backend(EmbeddedRocksDBStateBackend(True)), lambda env: env.enable_changelog_state_backend(True)):
        env = StreamExecutionEnvironment.get_execution_environment()
        setup(env)
        env.from_collection([1, 2]).key_by(lambda x: x).reduce(lambda a, b: a + b).print()
        assert ChangelogOptions.from_config(env.get_job_graph("job").config).enabled
    env = StreamExecutionEnvironment.get_execution_environment()
    assert env.is_changelog_state_backend_enabled() is None
    env.enable_changelog_state_backend(False)
    assert env.is_changelog_state_backend_enabled() is False
    env.from_collection([1, 2]).print()
    assert not ChangelogOptions.from_config(env.get_job_graph("job").config).enabled
