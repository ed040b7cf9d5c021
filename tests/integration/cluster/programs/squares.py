"""Test program: squares of 0..N-1 keyed by n % 4, summed per key, written to a Delta table.

`--sleep-ms` slows each record (jobs that stay RUNNING long enough to inspect, cancel or kill),
`--fail-at` raises on that record, `--pid-file` records the process whose main() ran this program.
"""
import argparse
import os
import time

from runtime.api.common import Row
from runtime.api.common.restart_strategy import RestartStrategies
from runtime.api.common.typeinfo import Types
from runtime.api.connectors.delta import DeltaSink
from runtime.api.datastream import StreamExecutionEnvironment


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100)
    parser.add_argument("--sleep-ms", type=float, default=0.0)
    parser.add_argument("--fail-at", type=int, default=-1)
    parser.add_argument("--output", required=True)
    parser.add_argument("--pid-file", default=None)
    parser.add_argument("--name", default="squares")
    parser.add_argument("--restart-attempts", type=int, default=0, help="fixed-delay restarts (100 ms apart) before the job fails")
    args = parser.parse_args()
    if args.pid_file:
        with open(args.pid_file, "w") as f:
            f.write(str(os.getpid()))
    sleep_s, fail_at = args.sleep_ms / 1000, args.fail_at

    def square(n):
        if sleep_s:
            time.sleep(sleep_s)
        if n == fail_at:
            raise ValueError(f"record {n} is poisoned")
        return (n % 4, n * n)

    env = StreamExecutionEnvironment.get_execution_environment()
    if args.restart_attempts:
        env.set_restart_strategy(RestartStrategies.fixed_delay_restart(args.restart_attempts, 100))
    out_type = Types.ROW_NAMED(["key", "total"], [Types.LONG(), Types.LONG()])
    (
        env.from_collection(list(range(args.records)), type_info=Types.LONG())
        .map(square, output_type=Types.TUPLE([Types.LONG(), Types.LONG()]))
        .key_by(lambda kv: kv[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .map(lambda kv: Row(key=kv[0], total=kv[1]), output_type=out_type)
        .sink_to(DeltaSink.for_path(args.output, mode="append"))
    )
    env.execute(args.name)


def reference(records: int) -> dict[int, int]:
    """Final total per key (the reduce emits running totals; the largest per key is the final one)."""
    totals: dict[int, int] = {}
    for n in range(records):
        totals[n % 4] = totals.get(n % 4, 0) + n * n
    return totals


if __name__ == "__main__":
    main()
