"""FileSink for row formats (Flink: FileSink.forRowFormat with its bucket, rolling and commit protocol).

Each subtask writes rows into part files per bucket (a subdirectory: the processing-time hour by
default, Flink's DateTimeBucketAssigner; or none, BasePathBucketAssigner). A part file goes
in-progress -> pending -> finished, named as Flink names them:

    <bucket>/.<prefix>-<uid>-<subtask>-<n><suffix>.inprogress.<token>   in-progress, then pending
    <bucket>/<prefix>-<uid>-<subtask>-<n><suffix>                       finished

A part rolls (becomes pending) by the rolling policy: the default one at `part_size` bytes or
`rollover_interval` after it opened, and at every checkpoint (Millrace has no resumable
in-progress files, so a checkpoint always closes them, as Flink's OnCheckpointRollingPolicy); the
on-checkpoint policy only then. Pending files become finished when the checkpoint that holds them
completes: the sink's coordinator renames them (committables of the checkpoint; a restore renames
those of the restored checkpoint that are still pending and deletes in-progress files no checkpoint
holds). A bounded job's tail is finished when the job finishes. Without checkpoints, everything is
finished at the end. So with checkpoints the output is exactly once; readers skip hidden files.
Local file systems (paths or file:// URIs).
"""
from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from runtime.api.common.serialization import Encoder
from runtime.api.connectors.base import Sink
from runtime.api.connectors.sink import (
    Committer,
    CommitterContext,
    CommitterCoordinatorProvider,
    SinkWriter,
    SinkWriterContext,
    SinkWriterOperator,
    TwoPhaseCommittingSink,
)
from runtime.core.errors import InvalidProgramError, StorageError
from runtime.core.records import RecordBatch

log = logging.getLogger(__name__)

_INPROGRESS = ".inprogress."


def _local(path: str) -> str:
    if path.startswith("file://"):
        path = path[len("file://"):]
    if "://" in path:
        raise InvalidProgramError(f"FileSink: only local paths (or file:// URIs) are supported, got {path!r}")
    return os.path.abspath(path)


class OutputFileConfig:
    def __init__(self, part_prefix: str = "part", part_suffix: str = "") -> None:
        self.part_prefix, self.part_suffix = part_prefix, part_suffix

    @staticmethod
    def builder() -> OutputFileConfig.OutputFileConfigBuilder:
        return OutputFileConfig.OutputFileConfigBuilder()

    class OutputFileConfigBuilder:
        def __init__(self) -> None:
            self._prefix, self._suffix = "part", ""

        def with_part_prefix(self, prefix: str) -> OutputFileConfig.OutputFileConfigBuilder:
            self._prefix = prefix
            return self

        def with_part_suffix(self, suffix: str) -> OutputFileConfig.OutputFileConfigBuilder:
            self._suffix = suffix
            return self

        def build(self) -> OutputFileConfig:
            return OutputFileConfig(self._prefix, self._suffix)


class RollingPolicy:
    """Flink's row-format rolling policies (sizes in bytes, intervals in ms)."""

    def __init__(self, part_size: int | None, rollover_interval_ms: int | None, inactivity_interval_ms: int | None) -> None:
        self.part_size, self.rollover_interval_ms, self.inactivity_interval_ms = part_size, rollover_interval_ms, inactivity_interval_ms

    @staticmethod
    def default_rolling_policy(part_size: int = 128 * 1024 * 1024, rollover_interval: int = 60 * 1000,
                               inactivity_interval: int = 60 * 1000) -> RollingPolicy:
        return RollingPolicy(part_size, rollover_interval, inactivity_interval)

    @staticmethod
    def on_checkpoint_rolling_policy() -> RollingPolicy:
        return RollingPolicy(None, None, None)


class BucketAssigner:
    """Flink's bucket assigners: the processing-time hour (default) or the base path."""

    def __init__(self, time_format: str | None) -> None:
        self.time_format = time_format  # strftime; None: the base path

    @staticmethod
    def base_path_assigner() -> BucketAssigner:
        return BucketAssigner(None)

    @staticmethod
    def date_time_bucket_assigner(format_str: str = "yyyy-MM-dd--HH", timezone_id: str | None = None) -> BucketAssigner:
        fmt = format_str
        for java, py in (("yyyy", "%Y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"), ("mm", "%M"), ("ss", "%S")):
            fmt = fmt.replace(java, py)
        return BucketAssigner(fmt)

    def bucket_id(self, now_s: float) -> str:
        return "" if self.time_format is None else time.strftime(self.time_format, time.localtime(now_s))


class _Part:
    __slots__ = ("rel_pending", "rel_final", "fh", "size", "opened_s", "last_write_s")

    def __init__(self, rel_pending: str, rel_final: str, fh: Any, now_s: float) -> None:
        self.rel_pending, self.rel_final, self.fh = rel_pending, rel_final, fh
        self.size, self.opened_s, self.last_write_s = 0, now_s, now_s


class FileWriter(SinkWriter[dict[str, str]]):
    """One subtask's part files; a committable is one pending part: {"pending": path, "final": path}."""

    def __init__(self, sink: FileSink, context: SinkWriterContext) -> None:
        self.sink = sink
        self.context = context
        self._open: dict[str, _Part] = {}  # bucket -> in-progress part
        self._pending: list[dict[str, str]] = []  # rolled since the last pre-commit
        self._counter = max([int(c) for c in context.restored_state] + [0])
        self._token = uuid.uuid4().hex[:8]
        self.clock: Callable[[], float] = time.time

    def write(self, batch: RecordBatch) -> None:
        now = self.clock()
        encode = self.sink.encoder.encode
        bucket = self.sink.bucket_assigner.bucket_id(now)
        part = self._open.get(bucket)
        for v in batch.rows():
            if part is None:
                part = self._new_part(bucket, now)
            data = encode(v)
            part.fh.write(data)
            part.size += len(data)
            part.last_write_s = now
            policy = self.sink.rolling_policy
            if policy.part_size is not None and part.size >= policy.part_size:
                self._roll(bucket)
                part = None
        if part is not None:
            self._roll_if_due(now)

    def _new_part(self, bucket: str, now: float) -> _Part:
        cfg = self.sink.output_file_config
        name = f"{cfg.part_prefix}-{self.sink.uid}-{self.context.subtask_index}-{self._counter}{cfg.part_suffix}"
        self._counter += 1
        rel_final = os.path.join(bucket, name) if bucket else name
        rel_pending = os.path.join(bucket, f".{name}{_INPROGRESS}{self._token}") if bucket else f".{name}{_INPROGRESS}{self._token}"
        full = os.path.join(self.sink.base, rel_pending)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        part = self._open[bucket] = _Part(rel_pending, rel_final, open(full, "wb"), now)  # closed when the part rolls
        return part

    def _roll_if_due(self, now: float) -> None:
        policy = self.sink.rolling_policy
        for bucket, part in list(self._open.items()):
            if (policy.rollover_interval_ms is not None and (now - part.opened_s) * 1000 >= policy.rollover_interval_ms) or (
                policy.inactivity_interval_ms is not None and (now - part.last_write_s) * 1000 >= policy.inactivity_interval_ms
            ):
                self._roll(bucket)

    def _roll(self, bucket: str) -> None:
        part = self._open.pop(bucket)
        part.fh.close()  # in-progress -> pending
        self._pending.append({"pending": part.rel_pending, "final": part.rel_final})

    def prepare_commit(self) -> list[dict[str, str]]:
        for bucket in list(self._open):
            self._roll(bucket)
        committables, self._pending = self._pending, []
        return committables

    def snapshot_state(self, checkpoint_id: int) -> list[Any]:
        return [self._counter]

    def abort(self) -> None:
        # failed or cancelled: nobody commits these (parts handed over are the committer's)
        doomed = [p.rel_pending for p in self._open.values()] + [c["pending"] for c in self._pending]
        self.close()
        for rel in doomed:
            try:
                os.remove(os.path.join(self.sink.base, rel))
            except OSError:
                pass

    def close(self) -> None:
        for part in self._open.values():
            try:
                part.fh.close()
            except Exception:  # clean-up after a failure goes on
                log.debug("closing %s failed", part.rel_pending, exc_info=True)
        self._open.clear()


class FileCommitter(Committer[dict[str, str]]):
    """Finishes pending part files (an atomic rename): those of completed checkpoints, then the tail at the job's end."""

    def __init__(self, sink: FileSink, context: CommitterContext) -> None:
        self.sink = sink
        self.context = context
        self.finished_files = 0
        self._retained: set[str] = set()  # pending parts of checkpoints a later run may restore

    def start(self) -> None:
        os.makedirs(self.sink.base, exist_ok=True)

    def _finish(self, files: list[dict[str, str]]) -> int:
        done = 0
        for f in files:
            pending, final = os.path.join(self.sink.base, f["pending"]), os.path.join(self.sink.base, f["final"])
            if os.path.exists(pending):
                os.replace(pending, final)  # atomic: the file appears finished or not at all
                done += 1
            elif not os.path.exists(final):
                raise StorageError(f"FileSink {self.sink.base}: pending part file {f['pending']} is gone; it cannot be finished")
        self.finished_files += done
        return done

    def commit(self, checkpoint_id: int, by_subtask: list[list[dict[str, str]]]) -> None:
        self._finish([f for per in by_subtask for f in per])

    def clean_up(self, subtasks: set[int]) -> None:
        """In-progress and pending parts of these subtasks' earlier attempts that no commit finished
        (a restored checkpoint's were finished just before, by `restore`)."""
        prefix = f".{self.sink.output_file_config.part_prefix}-{self.sink.uid}-"
        for root, _dirs, files in os.walk(self.sink.base):
            for name in files:
                if not name.startswith(prefix) or _INPROGRESS not in name:
                    continue
                subtask = name[len(prefix):].split("-", 1)[0]
                rel = os.path.relpath(os.path.join(root, name), self.sink.base)
                if subtask.isdigit() and int(subtask) in subtasks and rel not in self._retained:
                    try:
                        os.remove(os.path.join(root, name))
                    except OSError:
                        pass

    def commit_end(self, last_checkpoint: int | None, by_subtask: list[list[dict[str, str]]]) -> dict[str, Any]:
        self._finish([f for per in by_subtask for f in per])
        return {"file_sink_path": self.sink.base, "file_sink_files": self.finished_files}

    def discard(self, committables: list[dict[str, str]]) -> None:
        for f in committables:
            try:
                os.remove(os.path.join(self.sink.base, f["pending"]))
            except OSError:
                pass

    def retain(self, committables: list[dict[str, str]]) -> None:
        self._retained |= {f["pending"] for f in committables}

    def close(self, finished: bool, uncommitted: list[dict[str, str]]) -> None:
        if not finished:  # the job did not finish: its tails, and parts no checkpoint a later run restores, go
            self.discard([f for f in uncommitted if f["pending"] not in self._retained])
            self.clean_up(set(range(self.context.current_parallelism())))




class FileSink(Sink, TwoPhaseCommittingSink[dict[str, str]]):
    """PyFlink's FileSink: `FileSink.for_row_format(path, Encoder.simple_string_encoder()).build()`."""

    def __init__(self, base: str, encoder: Encoder, output_file_config: OutputFileConfig, rolling_policy: RollingPolicy,
                 bucket_assigner: BucketAssigner) -> None:
        self.base = _local(base)
        if os.path.exists(self.base) and not os.path.isdir(self.base):
            raise InvalidProgramError(f"FileSink: {self.base} is a file, not a directory")
        self.encoder, self.output_file_config, self.rolling_policy, self.bucket_assigner = encoder, output_file_config, rolling_policy, bucket_assigner
        self.uid = uuid.uuid4().hex  # fixed in the JobGraph: every attempt of this job names its parts with it

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> FileSinkBuilder:
        return FileSinkBuilder(base_path, encoder)

    def create_writer(self) -> SinkWriterOperator:
        return SinkWriterOperator(self)

    def coordinator_provider(self) -> CommitterCoordinatorProvider:
        return CommitterCoordinatorProvider(self)

    def create_sink_writer(self, context: SinkWriterContext) -> FileWriter:
        return FileWriter(self, context)

    def create_committer(self, context: CommitterContext) -> FileCommitter:
        return FileCommitter(self, context)

    def default_name(self) -> str:
        return f"FileSink({self.base})"


class FileSinkBuilder:
    def __init__(self, base_path: str, encoder: Encoder) -> None:
        if not isinstance(encoder, Encoder):
            raise InvalidProgramError(f"FileSink.for_row_format(): expected an Encoder (Encoder.simple_string_encoder()), got {type(encoder).__name__}")
        self._base, self._encoder = base_path, encoder
        self._config = OutputFileConfig()
        self._policy = RollingPolicy.default_rolling_policy()
        self._buckets = BucketAssigner.date_time_bucket_assigner()

    def with_output_file_config(self, config: OutputFileConfig) -> FileSinkBuilder:
        self._config = config
        return self

    def with_rolling_policy(self, policy: RollingPolicy) -> FileSinkBuilder:
        self._policy = policy
        return self

    def with_bucket_assigner(self, assigner: BucketAssigner) -> FileSinkBuilder:
        self._buckets = assigner
        return self

    def build(self) -> FileSink:
        return FileSink(self._base, self._encoder, self._config, self._policy, self._buckets)
