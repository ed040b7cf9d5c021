"""print() writes what PyFlink 2.3.0 writes, stream type by stream type (issue 24).

tests/golden/pyflink_print/cases.py is run as one program on Millrace (`millrace run`, local
TaskManagers); each case's printed lines must equal `<case>.txt`, written by generate.py from a run of
the same cases on apache-flink 2.3.0."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "golden" / "pyflink_print"
CASES = sorted(p.stem for p in GOLDEN.glob("*.txt"))


@pytest.fixture(scope="module")
def printed() -> dict[str, list[str]]:
    """Each case's printed records (sink identifier stripped), in order."""
    proc = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "run", str(GOLDEN / "millrace_program.py"), "--provider", "local"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines: dict[str, list[str]] = {}
    for line in proc.stdout.splitlines():
        name, sep, record = line.partition("> ")
        if sep and name in CASES:
            lines.setdefault(name, []).append(record)
    return lines


def test_every_case_has_a_golden_file() -> None:
    sys.path.insert(0, str(GOLDEN))
    try:
        from cases import case_names
    finally:
        sys.path.pop(0)
    from runtime.api.common import Row, Types

    assert sorted(case_names(Types, Row)) == CASES


@pytest.mark.parametrize("case", CASES)
def test_print_matches_pyflink(printed: dict[str, list[str]], case: str) -> None:
    expected = (GOLDEN / f"{case}.txt").read_text(encoding="utf-8").splitlines()
    assert printed.get(case) == expected
