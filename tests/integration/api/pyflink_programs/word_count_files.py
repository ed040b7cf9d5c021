"""A PyFlink-style program (only the imports say runtime.api instead of pyflink): word count from text
files with FileSource, written with FileSink (PyFlink's word_count example, with files both ways)."""
import argparse

from runtime.api.common import Encoder, Types, WatermarkStrategy
from runtime.api.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from runtime.api.datastream.connectors.file_system import FileSink, FileSource, OutputFileConfig, RollingPolicy, StreamFormat


def split(line):
    yield from line.split()


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--input', required=True)
    parser.add_argument('--output', required=True)
    known_args, _ = parser.parse_known_args()

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_parallelism(2)
    ds = env.from_source(
        source=FileSource.for_record_stream_format(StreamFormat.text_line_format(), known_args.input)
                         .process_static_file_set().build(),
        watermark_strategy=WatermarkStrategy.for_monotonous_timestamps(),
        source_name="file_source")
    ds = ds.flat_map(split) \
        .map(lambda i: (i, 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()])) \
        .key_by(lambda i: i[0]) \
        .reduce(lambda i, j: (i[0], i[1] + j[1]))
    ds.sink_to(
        sink=FileSink.for_row_format(base_path=known_args.output, encoder=Encoder.simple_string_encoder())
        .with_output_file_config(OutputFileConfig.builder().with_part_prefix("prefix").with_part_suffix(".txt").build())
        .with_rolling_policy(RollingPolicy.default_rolling_policy())
        .build()
    )
    env.execute("word count")
