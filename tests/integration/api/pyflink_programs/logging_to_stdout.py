"""A PyFlink-style program that logs to stdout, as several of PyFlink's own examples do
(`logging.basicConfig(stream=sys.stdout, level=logging.INFO)`), then prints its records.

Optional arguments `key=value` go into the environment's configuration (e.g.
`execution.taskmanager.provider=local`, `env.log.propagate=true`).
"""
import logging
import sys

from runtime.api.common import Configuration, Types
from runtime.api.datastream import StreamExecutionEnvironment

if __name__ == '__main__':
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
    config = Configuration()
    for arg in sys.argv[1:]:
        key, _, value = arg.partition("=")
        config.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(1)
    env.from_collection([("a", 1), ("b", 2), ("c", 3)], type_info=Types.TUPLE([Types.STRING(), Types.INT()])) \
        .map(lambda t: f"{t[0]}={t[1]}", output_type=Types.STRING()) \
        .print()
    env.execute("logging to stdout")
    logging.getLogger("logging_to_stdout").info("the program's own line")
