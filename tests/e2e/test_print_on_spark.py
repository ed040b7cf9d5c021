"""print() of a program run embedded, TaskManagers on Spark executors: the records reach the client's stdout."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "tests" / "integration" / "api" / "pyflink_programs" / "print_rows.py"


def test_printed_records_land_in_the_file_stdout_is_redirected_to(tmp_path: Path) -> None:
    out_path = tmp_path / "out.txt"
    with open(out_path, "w") as out:
        # `millrace run job.py > out.txt`: the default provider, TaskManagers inside Spark executors
        proc = subprocess.run([sys.executable, "-m", "runtime.cli", "run", str(PROGRAM)], cwd=tmp_path,
                              stdout=out, stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = out_path.read_text().splitlines()
    records = [line for line in lines if re.match(r"^[12]> \+I\[", line)]
    expected = {
        # a ROW_NAMED stream: PyFlink prints each field with Python's str()
        f"+I[{i},name-{i},{i % 2 == 0},{i / 4 if i % 3 else None}]" for i in range(1000)
    }
    assert sorted(r.split("> ", 1)[1] for r in records) == sorted(expected)
    # every record before the job's end line: the output reached the client before the job ended
    finished = next(i for i, line in enumerate(lines) if re.search(r"-> FINISHED", line))
    assert all(lines.index(r) < finished for r in records[-5:])
    assert "+I[" not in proc.stderr


def test_the_main_job_prints_no_spark_lines_on_a_warm_machine(tmp_path: Path) -> None:
    """Set-up resolved the Delta jars: no Ivy report, no log4j notice, no JVM notice, no warnings at the end."""
    from runtime.deploy.spark_jars import resolved_jars
    from runtime.deploy.spark_session import delta_maven_coordinates

    assert resolved_jars(delta_maven_coordinates()), "infra/setup.sh resolves the Delta jars (python -m runtime.deploy.spark_jars)"
    proc = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "run", str(ROOT / "pipelines" / "jobs" / "windowed_sum.py"),
         "--parallelism", "2", "--events", "50000", "--output", str(tmp_path / "out")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr == "", proc.stderr[-3000:]
    assert "-> FINISHED" in proc.stdout and "WARN" not in proc.stdout and ":: " not in proc.stdout, proc.stdout
