"""FileSource for record stream formats (Flink: FileSource.forRecordStreamFormat, TextLineInputFormat).

A split is one file with the byte offset of its next line: `(path, offset)`. File i of the sorted
listing belongs to subtask hash(path) % parallelism (no enumerator: every subtask lists the paths
itself and takes its share), so a split's owner never changes while the parallelism stays; on
restore at another parallelism the runtime deals the checkpointed splits out again. Bounded: the
files present when a subtask starts. `monitor_continuously(interval)`: unbounded, the paths are
listed again every interval and new files (by path) are read; the paths already taken are state
too (Flink: the enumerator's already-processed paths), kept as splits at offset -1.
Hidden files (names starting with '.' or '_', e.g. a sink's in-progress files) are skipped.
"""
from __future__ import annotations

import os
import time
import zlib
from typing import Any

from runtime.api.connectors.base import Source, SplitSourceOperator
from runtime.api.operators.base import InputStatus
from runtime.core.errors import InvalidProgramError
from runtime.core.records import MAX_TIMESTAMP, ObjectBatch, Watermark

DEFAULT_LINES_PER_BATCH = 4096
_DONE = -1  # a file read to its end (kept so that monitoring does not read it again)


def list_files(paths: list[str]) -> list[str]:
    """Every visible file under `paths` (files, or directories walked recursively), sorted."""
    out: list[str] = []
    for p in paths:
        if os.path.isfile(p):
            out.append(os.path.abspath(p))
            continue
        if not os.path.isdir(p):
            continue  # not there (yet): a monitored directory may appear later
        for root, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
            out.extend(os.path.abspath(os.path.join(root, f)) for f in files if not f.startswith((".", "_")))
    return sorted(set(out))


def owner_of(path: str, parallelism: int) -> int:
    return zlib.crc32(path.encode()) % parallelism  # stable across processes (unlike hash())


class StreamFormat:
    """Flink's StreamFormat; `text_line_format()` reads UTF-8 lines without their line breaks."""

    def __init__(self, charset: str = "utf-8") -> None:
        self.charset = charset

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8") -> StreamFormat:
        return StreamFormat(charset_name.lower())

    def decode(self, line: bytes) -> str:
        return line.rstrip(b"\r\n").decode(self.charset)


class FileSourceOperator(SplitSourceOperator):
    def __init__(self, paths: list[str], fmt: StreamFormat, monitor_interval_s: float | None, lines_per_batch: int) -> None:
        super().__init__()
        self.paths = paths
        self.fmt = fmt
        self.monitor_interval_s = monitor_interval_s
        self.lines_per_batch = lines_per_batch
        self._queue: list[list[Any]] = []  # [path, offset] to read, in path order
        self._done: set[str] = set()
        self._file: Any = None
        self._next_listing = 0.0

    def _mine(self, files: list[str]) -> list[str]:
        assert self.ctx is not None
        return [f for f in files if owner_of(f, self.ctx.parallelism) == self.ctx.subtask_index]

    def initial_splits(self) -> list[tuple[str, int]]:
        return [(f, 0) for f in self._mine(list_files(self.paths))]

    def add_splits(self, splits: list[Any]) -> None:
        for s in splits:
            if not (isinstance(s, (tuple, list)) and len(s) == 2 and isinstance(s[0], str) and isinstance(s[1], int)):
                raise InvalidProgramError(
                    f"{self.describe()}: restored split {s!r} is not a file split (path, offset); the checkpoint "
                    "belongs to another source under the same uid"
                )
            if s[1] == _DONE:
                self._done.add(s[0])
            elif s[0] not in self._done and all(q[0] != s[0] for q in self._queue):
                self._queue.append([s[0], s[1]])
        self._queue.sort()

    def snapshot_splits(self) -> list[tuple[str, int]]:
        return [(p, o) for p, o in self._queue] + [(p, _DONE) for p in sorted(self._done)]

    def _discover(self) -> None:
        known = self._done | {q[0] for q in self._queue}
        new = [f for f in self._mine(list_files(self.paths)) if f not in known]
        if new:
            self._queue.extend([f, 0] for f in new)
            self._queue.sort()

    def emit_next(self) -> InputStatus:
        assert self.output is not None
        if not self._queue:
            if self.monitor_interval_s is None:
                self.output.emit_watermark(Watermark(MAX_TIMESTAMP))
                return InputStatus.END_OF_INPUT
            now = time.monotonic()
            if now < self._next_listing:
                return InputStatus.NOTHING_AVAILABLE
            self._next_listing = now + self.monitor_interval_s
            self._discover()
            if not self._queue:
                return InputStatus.NOTHING_AVAILABLE
        split = self._queue[0]
        path, offset = split
        if self._file is None or self._file.name != path:
            self._close_file()
            try:
                self._file = open(path, "rb")
            except FileNotFoundError:
                raise InvalidProgramError(f"{self.describe()}: file {path} is gone (it was listed to be read)") from None
            self._file.seek(offset)
        lines: list[str] = []
        f = self._file
        for _ in range(self.lines_per_batch):
            raw = f.readline()
            if not raw:
                break
            lines.append(self.fmt.decode(raw))
        split[1] = f.tell()
        if len(lines) < self.lines_per_batch:  # end of this file
            self._close_file()
            self._queue.pop(0)
            self._done.add(path)
        if lines:
            self.output.emit(ObjectBatch(lines))
        return InputStatus.MORE_AVAILABLE

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def close(self) -> None:
        self._close_file()
        super().close()


class FileSource(Source):
    """PyFlink's FileSource: `FileSource.for_record_stream_format(StreamFormat.text_line_format(), path).build()`."""

    def __init__(self, fmt: StreamFormat, paths: list[str], monitor_interval_s: float | None, lines_per_batch: int) -> None:
        self.fmt, self.paths, self.monitor_interval_s, self.lines_per_batch = fmt, paths, monitor_interval_s, lines_per_batch

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> FileSourceBuilder:
        return FileSourceBuilder(stream_format, list(paths))

    def create_operator(self) -> FileSourceOperator:
        return FileSourceOperator(self.paths, self.fmt, self.monitor_interval_s, self.lines_per_batch)

    def is_bounded(self) -> bool:
        return self.monitor_interval_s is None

    def get_type_info(self) -> Any:
        from runtime.api.common import Types

        return Types.STRING()


class FileSourceBuilder:
    def __init__(self, fmt: StreamFormat, paths: list[str]) -> None:
        if not isinstance(fmt, StreamFormat):
            raise InvalidProgramError(f"FileSource: expected a StreamFormat (StreamFormat.text_line_format()), got {type(fmt).__name__}")
        if not paths or not all(isinstance(p, str) and p for p in paths):
            raise InvalidProgramError(f"FileSource: give one or more file or directory paths, got {paths!r}")
        self._fmt = fmt
        self._paths = [os.path.abspath(p) for p in paths]
        self._monitor_s: float | None = None
        self._lines = DEFAULT_LINES_PER_BATCH

    def monitor_continuously(self, discovery_interval: Any) -> FileSourceBuilder:
        from runtime.api.common.time import to_millis

        ms = to_millis(discovery_interval)
        if ms <= 0:
            raise InvalidProgramError(f"FileSource.monitor_continuously(): the interval must be positive, got {discovery_interval!r}")
        self._monitor_s = ms / 1000.0
        return self

    def process_static_file_set(self) -> FileSourceBuilder:
        self._monitor_s = None
        return self

    def build(self) -> FileSource:
        if self._monitor_s is None:
            missing = [p for p in self._paths if not os.path.exists(p)]
            if missing:
                raise InvalidProgramError(f"FileSource: {missing[0]} does not exist (a bounded FileSource reads what is there)")
        return FileSource(self._fmt, self._paths, self._monitor_s, self._lines)
