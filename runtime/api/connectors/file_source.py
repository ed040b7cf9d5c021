"""FileSource for record stream formats (Flink: FileSource.forRecordStreamFormat, TextLineInputFormat), on FLIP-27.

A split is one file with the byte offset of its next line (`FileSplit`). The enumerator (on the
JobMaster) lists the paths when the job starts and hands a file to each reader that asks; bounded,
that is the whole input. `monitor_continuously(interval)`: unbounded, the enumerator lists the
paths again every interval and new files (by path) go out as they are found; the paths already
found are its state (Flink's ContinuousFileSplitEnumerator: alreadyDiscoveredPaths). A reader's
state is its unfinished files with their offsets. Hidden files (names starting with '.' or '_',
e.g. a sink's in-progress files) are skipped.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from runtime.api.connectors.base import Source
from runtime.api.connectors.source.api import Boundedness, SourceReaderBase, SourceReaderContext, SplitEnumerator, SplitEnumeratorContext
from runtime.core.errors import InvalidProgramError
from runtime.core.records import ObjectBatch

DEFAULT_LINES_PER_BATCH = 4096


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


class StreamFormat:
    """Flink's StreamFormat; `text_line_format()` reads UTF-8 lines without their line breaks."""

    def __init__(self, charset: str = "utf-8") -> None:
        self.charset = charset

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8") -> StreamFormat:
        return StreamFormat(charset_name.lower())

    def decode(self, line: bytes) -> str:
        return line.rstrip(b"\r\n").decode(self.charset)


@dataclass(frozen=True)
class FileSplit:
    """A file and the byte offset of its next line."""

    path: str
    offset: int = 0

    @property
    def split_id(self) -> str:
        return self.path


@dataclass
class FileEnumeratorState:
    pending: list[FileSplit]
    discovered: set[str]  # every path handed out or pending (a continuous source reads a path once)


class FileSplitEnumerator(SplitEnumerator[FileSplit, FileEnumeratorState]):
    """Static (bounded) or continuous (monitor_continuously): files in path order, one per request."""

    def __init__(self, context: SplitEnumeratorContext[FileSplit], source: FileSource, state: FileEnumeratorState | None) -> None:
        self.context, self.source = context, source
        if state is None:
            files = list_files(source.paths)
            state = FileEnumeratorState([FileSplit(f) for f in files], set(files))
        self.pending = sorted(state.pending, key=lambda s: s.path)
        self.discovered = set(state.discovered)
        self.awaiting: list[int] = []

    def start(self) -> None:
        if self.source.monitor_interval_s is not None:
            s = self.source.monitor_interval_s
            self.context.call_async(lambda: list_files(self.source.paths), self._on_listed, s, s)

    def _on_listed(self, files: list[str] | None, error: BaseException | None) -> None:
        if error is not None:
            raise error
        new = [f for f in files or [] if f not in self.discovered]
        self.discovered.update(new)
        self.pending = sorted(self.pending + [FileSplit(f) for f in new], key=lambda s: s.path)
        readers = self.context.registered_readers()
        while self.pending and self.awaiting:
            subtask = self.awaiting.pop(0)
            if subtask in readers:
                self.context.assign_split(self.pending.pop(0), subtask)

    def handle_split_request(self, subtask: int, requester_hostname: str | None) -> None:
        if subtask not in self.context.registered_readers():
            return
        if self.pending:
            self.context.assign_split(self.pending.pop(0), subtask)
        elif self.source.monitor_interval_s is None:
            self.context.signal_no_more_splits(subtask)
        elif subtask not in self.awaiting:
            self.awaiting.append(subtask)

    def add_splits_back(self, splits: list[FileSplit], subtask: int) -> None:
        self.pending = sorted(self.pending + list(splits), key=lambda s: s.path)
        self._on_listed([], None)  # hand them to readers waiting

    def add_reader(self, subtask: int) -> None:
        pass

    def snapshot_state(self, checkpoint_id: int) -> FileEnumeratorState:
        return FileEnumeratorState(list(self.pending), set(self.discovered))


class FileSourceReader(SourceReaderBase[FileSplit]):
    def __init__(self, context: SourceReaderContext, source: FileSource) -> None:
        super().__init__(context)
        self.source = source
        self._file: Any = None

    def add_splits(self, splits: list[FileSplit]) -> None:
        for s in splits:
            if not isinstance(s, FileSplit):
                raise InvalidProgramError(
                    f"FileSource: restored split {s!r} is not a file split; the checkpoint belongs to another source under the same uid"
                )
        super().add_splits(splits)

    def read_next(self, split: FileSplit) -> tuple[ObjectBatch, FileSplit] | None:
        if self._file is None or self._file.name != split.path:
            self._close_file()
            try:
                self._file = open(split.path, "rb")  # kept open across polls, closed when the split ends
            except FileNotFoundError:
                raise InvalidProgramError(f"FileSource: file {split.path} is gone (it was listed to be read)") from None
            self._file.seek(split.offset)
        f, fmt = self._file, self.source.fmt
        lines: list[str] = []
        for _ in range(self.source.lines_per_batch):
            raw = f.readline()
            if not raw:
                break
            lines.append(fmt.decode(raw))
        if not lines:
            return None
        return ObjectBatch(lines), dataclasses.replace(split, offset=f.tell())

    def finish_split(self, split: FileSplit) -> None:
        self._close_file()

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def close(self) -> None:
        self._close_file()


class FileSource(Source):
    """PyFlink's FileSource: `FileSource.for_record_stream_format(StreamFormat.text_line_format(), path).build()`."""

    def __init__(self, fmt: StreamFormat, paths: list[str], monitor_interval_s: float | None, lines_per_batch: int) -> None:
        self.fmt, self.paths, self.monitor_interval_s, self.lines_per_batch = fmt, paths, monitor_interval_s, lines_per_batch

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> FileSourceBuilder:
        return FileSourceBuilder(stream_format, list(paths))

    def get_boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED if self.monitor_interval_s is None else Boundedness.CONTINUOUS_UNBOUNDED

    def create_enumerator(self, context: SplitEnumeratorContext[FileSplit]) -> FileSplitEnumerator:
        return FileSplitEnumerator(context, self, None)

    def restore_enumerator(self, context: SplitEnumeratorContext[FileSplit], checkpoint: Any) -> FileSplitEnumerator:
        if not isinstance(checkpoint, FileEnumeratorState):
            raise InvalidProgramError(
                f"FileSource: the checkpoint's enumerator state is a {type(checkpoint).__name__}; it belongs to another source under the same uid"
            )
        return FileSplitEnumerator(context, self, checkpoint)

    def create_reader(self, context: SourceReaderContext) -> FileSourceReader:
        return FileSourceReader(context, self)

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
