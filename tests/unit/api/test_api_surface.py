"""Every public name of PyFlink 2.3.0's DataStream modules is at the same path under runtime.api, or on
LEFT_OUT with the reason (issue 24). The names: tests/golden/pyflink_api/names.json, generated from
the apache-flink 2.3.0 wheel by tests/golden/pyflink_api/generate.py."""
from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

NAMES = json.loads((Path(__file__).resolve().parents[2] / "golden" / "pyflink_api" / "names.json").read_text())["modules"]

_JAVA = "wraps a Java object (PyFlink calls into the JVM); Millrace has no JVM in the job"
_ASYNC = "the async I/O operator (AsyncDataStream) is not implemented"
_SERIALIZER = "Millrace serializes Python values itself (pickle, Arrow): there are no pluggable TypeSerializers"
_SCHEMA = "a raw-bytes schema of Java connectors; SimpleStringSchema and the JSON row schemas are what the Kafka connectors take"
_FUTURE = "Millrace's JobClient answers synchronously: there is no Java future to wrap"

# (PyFlink module, name) -> why Millrace leaves it out
LEFT_OUT: dict[tuple[str, str], str] = {
    ("pyflink.common", "AssignerWithPeriodicWatermarksWrapper"): _JAVA + " (a legacy watermark assigner)",
    ("pyflink.common", "ByteArraySchema"): _SCHEMA,
    ("pyflink.common", "CompletableFuture"): _FUTURE,
    ("pyflink.common", "ConfigOption"): "typed options wrapping Java's ConfigOption; Millrace's Configuration takes Flink's string keys",
    ("pyflink.common", "ConfigOptions"): "typed options wrapping Java's ConfigOption; Millrace's Configuration takes Flink's string keys",
    ("pyflink.common", "InputDependencyConstraint"): "deprecated in Flink, without effect: batch regions are scheduled as their inputs finish",
    ("pyflink.common", "Instant"): "PyFlink's value class for Types.INSTANT; Millrace's INSTANT values are Python datetimes",
    ("pyflink.common", "JobID"): "job ids are hex strings in Millrace (JobClient.job_id)",
    ("pyflink.common", "RowKind"): "changelog row kinds belong to the Table API; every Millrace Row is an insert (+I)",
    ("pyflink.common", "TypeSerializer"): _SERIALIZER,
    ("pyflink.datastream", "AsyncDataStream"): _ASYNC,
    ("pyflink.datastream", "AsyncFunction"): _ASYNC,
    ("pyflink.datastream", "AsyncRetryPredicate"): _ASYNC,
    ("pyflink.datastream", "AsyncRetryStrategy"): _ASYNC,
    ("pyflink.datastream.functions", "AsyncFunction"): _ASYNC,
    ("pyflink.datastream.functions", "AsyncFunctionDescriptor"): _ASYNC,
    ("pyflink.datastream.functions", "AsyncRetryPredicate"): _ASYNC,
    ("pyflink.datastream.functions", "AsyncRetryStrategy"): _ASYNC,
    ("pyflink.datastream", "CustomCheckpointStorage"): _JAVA + " (a CheckpointStorage class by name)",
    ("pyflink.datastream", "CustomStateBackend"): _JAVA + " (a StateBackend class by name)",
    ("pyflink.datastream", "JobManagerCheckpointStorage"): (
        "checkpoints always go to Delta tables (FileSystemCheckpointStorage, state.checkpoints.dir), never the JobManager's heap"
    ),
    ("pyflink.datastream", "MemorySize"): "no Millrace API takes a memory size (it sizes RocksDB and network buffers in Flink)",
    ("pyflink.datastream", "PredefinedOptions"): "Java RocksDB tuning presets; the RocksDB backend here is rocksdict with its own settings",
    ("pyflink.datastream", "Partitioner"): "DataStream.partition_custom is not implemented",
    ("pyflink.datastream.functions", "Partitioner"): "DataStream.partition_custom is not implemented",
    ("pyflink.datastream", "SourceFunction"): _JAVA + " (a legacy SourceFunction); use from_source with a FLIP-27 source",
    ("pyflink.datastream.functions", "SourceFunction"): _JAVA + " (a legacy SourceFunction); use from_source with a FLIP-27 source",
    ("pyflink.datastream.window", "ContinuousEventTimeTrigger"): (
        "not ported yet (custom triggers work: Trigger, EventTimeTrigger, CountTrigger, PurgingTrigger)"
    ),
    ("pyflink.datastream.window", "ContinuousProcessingTimeTrigger"): "not ported yet (custom triggers work: Trigger, ProcessingTimeTrigger, CountTrigger)",
    ("pyflink.datastream.window", "CountWindowSerializer"): _SERIALIZER,
    ("pyflink.datastream.window", "GlobalWindowSerializer"): _SERIALIZER,
    ("pyflink.datastream.window", "TimeWindowSerializer"): _SERIALIZER,
    ("pyflink.datastream.state", "OperatorStateStore"): (
        "operator state for user functions (CheckpointedFunction) is not offered; broadcast state is (BroadcastState)"
    ),
    ("pyflink.datastream.connectors.file_system", "BulkFormat"): _JAVA + " (bulk readers: Parquet, ORC, ...); FileSource reads text lines",
    ("pyflink.datastream.connectors.file_system", "FileCompactStrategy"): "FileSink compaction is not implemented",
    ("pyflink.datastream.connectors.file_system", "FileCompactor"): "FileSink compaction is not implemented",
    ("pyflink.datastream.connectors.file_system", "FileEnumeratorProvider"): _JAVA + "; files are listed by the source itself",
    ("pyflink.datastream.connectors.file_system", "FileSplitAssignerProvider"): _JAVA + "; files are dealt to subtasks by a hash of their path",
    ("pyflink.datastream.connectors.file_system", "StreamingFileSink"): (
        "the legacy SinkFunction file sink, deprecated in Flink; FileSink writes the same formats"
    ),
}

ALL_NAMES = [(module, name) for module, names in NAMES.items() for name in names]


def _runtime_module(pyflink_module: str):
    return importlib.import_module("runtime.api." + pyflink_module.removeprefix("pyflink."))


@pytest.mark.parametrize("module", sorted(NAMES))
def test_each_public_pyflink_name_is_at_its_path_or_left_out_with_a_reason(module: str) -> None:
    runtime_module = _runtime_module(module)
    missing = [name for name in NAMES[module] if not hasattr(runtime_module, name) and (module, name) not in LEFT_OUT]
    assert not missing, f"runtime.api{module.removeprefix('pyflink')} lacks PyFlink's {missing}: add them or list them in LEFT_OUT with why"


def test_the_left_out_list_holds_only_pyflink_names_that_are_really_absent() -> None:
    known = set(ALL_NAMES)
    assert not [key for key in LEFT_OUT if key not in known], "LEFT_OUT names a name PyFlink 2.3.0 does not have"
    present = [key for key in LEFT_OUT if hasattr(_runtime_module(key[0]), key[1])]
    assert not present, f"now present, take them off LEFT_OUT: {present}"
    assert all(reason.strip() for reason in LEFT_OUT.values())
