"""Test program: the ids 0..N-1, each with the job's `--tag`, appended to a Delta table with
exactly-once checkpoints; `--rate` ids per second keeps it running a while. `--concurrent` lets
other jobs (also with it) append to the same table at the same time (allow_concurrent_writers).
"""
import argparse

import numpy as np

from runtime.api.common import WatermarkStrategy
from runtime.api.connectors.delta import DeltaSink
from runtime.api.connectors.generator import DataGeneratorSource, RateLimiterStrategy
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.checkpoint import CheckpointingMode


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=5_000)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--concurrent", action="store_true", help="allow_concurrent_writers=True (appends side by side)")
    parser.add_argument("--checkpoint-interval-ms", type=int, default=300)
    args = parser.parse_args()
    tag = args.tag

    def tagged(i: np.ndarray) -> dict:
        return {"tag": np.full(len(i), tag, dtype=object), "id": i}

    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(args.checkpoint_interval_ms, CheckpointingMode.EXACTLY_ONCE)
    source = DataGeneratorSource(None, args.records, batch_generator=tagged, rate_limiter_strategy=RateLimiterStrategy.per_second(args.rate))
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "ids")
        .sink_to(DeltaSink.for_path(args.output, mode="append", allow_concurrent_writers=args.concurrent))
        .name("delta: tagged ids")
    )
    env.execute(f"tagged_ids-{tag}")


if __name__ == "__main__":
    main()
