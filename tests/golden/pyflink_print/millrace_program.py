"""The golden cases as a Millrace program: cases.build() with runtime.api instead of pyflink."""
import sys
from pathlib import Path

from runtime.api.common import Row, Types
from runtime.api.datastream import StreamExecutionEnvironment

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import build  # noqa: E402

if __name__ == '__main__':
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, Types, Row)
    env.execute("golden print")
