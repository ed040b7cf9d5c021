"""PyFlink's pyflink.datastream.connectors.file_system; the implementations live in runtime.api.connectors."""
from runtime.api.connectors.file_sink import BucketAssigner, FileSink, OutputFileConfig, RollingPolicy
from runtime.api.connectors.file_source import FileSource, FileSourceBuilder, StreamFormat

__all__ = ["BucketAssigner", "FileSink", "FileSource", "FileSourceBuilder", "OutputFileConfig", "RollingPolicy", "StreamFormat"]
