"""Regenerate the golden print() outputs from real PyFlink. Run by hand, not by the test suite:

    python3.11 -m venv /tmp/pyflink-venv && /tmp/pyflink-venv/bin/pip install apache-flink==2.3.0
    /tmp/pyflink-venv/bin/python tests/golden/pyflink_print/generate.py      # needs Java 17

It runs cases.build() as one PyFlink job in a child process, splits what the print sinks wrote by
sink identifier and writes `<case>.txt` beside this file (what each case printed, in order).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAM_FLAG = "--program"


def program() -> None:
    """The PyFlink job (child process): what it prints is the golden output."""
    from pyflink.common import Row, Types
    from pyflink.datastream import StreamExecutionEnvironment

    sys.path.insert(0, str(HERE))
    from cases import build

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_python_executable(sys.executable)  # the workers need this venv's pyflink
    build(env, Types, Row)
    env.execute("golden print")


def main() -> None:
    import pyflink  # noqa: F401 - fail early outside the apache-flink venv
    from importlib.metadata import version

    if version("apache-flink") != "2.3.0":
        sys.exit(f"the goldens are PyFlink 2.3.0's; this is apache-flink {version('apache-flink')}")
    proc = subprocess.run([sys.executable, __file__, PROGRAM_FLAG], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"the PyFlink job failed:\n{proc.stderr[-5000:]}")
    from pyflink.common import Row, Types

    sys.path.insert(0, str(HERE))
    from cases import case_names

    names = case_names(Types, Row)
    lines: dict[str, list[str]] = {name: [] for name in names}
    for line in proc.stdout.splitlines():
        name, sep, record = line.partition("> ")
        if sep and name in lines:
            lines[name].append(record)
    for name, records in lines.items():
        if not records:
            sys.exit(f"case {name!r} printed nothing; the job's stdout:\n{proc.stdout[-3000:]}")
        (HERE / f"{name}.txt").write_text("".join(r + "\n" for r in records), encoding="utf-8")
    print(f"wrote {len(lines)} golden files to {HERE}")


if __name__ == "__main__":
    program() if PROGRAM_FLAG in sys.argv else main()
