"""The static checks infra/lint.sh runs before the tests (import contracts, ruff, mypy) catch what
they are there for: each is shown a planted violation, with the project's own configuration, and
must fail naming it. And every suppression that remains in the code says why it is there."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PACKAGES = ("runtime", "resources", "pipelines")


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300, env={**os.environ, **env})


def _copy_packages(dest: Path) -> None:
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, dest / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def test_import_contracts_catch_a_state_backend_importing_the_api(tmp_path: Path) -> None:
    _copy_packages(tmp_path)
    lint = [str(BIN / "lint-imports"), "--no-cache", str(ROOT / ".importlinter")]
    clean = _run(lint, tmp_path, PYTHONPATH=str(tmp_path))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    # the seam issue 25 closed: a state backend reaching up into the DataStream API
    heap = tmp_path / "runtime" / "state" / "heap.py"
    heap.write_text(heap.read_text() + "\nimport runtime.api.datastream.data_stream  # planted\n")
    broken = _run(lint, tmp_path, PYTHONPATH=str(tmp_path))
    assert broken.returncode != 0
    assert "BROKEN" in broken.stdout and "runtime.state.heap -> runtime.api.datastream.data_stream" in broken.stdout, broken.stdout


def test_import_contracts_catch_the_runtime_importing_dagster_resources(tmp_path: Path) -> None:
    _copy_packages(tmp_path)
    core = tmp_path / "runtime" / "core" / "records.py"
    core.write_text(core.read_text() + "\nimport resources.millrace  # planted\n")
    broken = _run([str(BIN / "lint-imports"), "--no-cache", str(ROOT / ".importlinter")], tmp_path, PYTHONPATH=str(tmp_path))
    assert broken.returncode != 0
    assert "runtime.core.records -> resources.millrace" in broken.stdout, broken.stdout


def test_ruff_catches_an_unused_import_and_a_silent_broad_except(tmp_path: Path) -> None:
    planted = "import os\n\n\ndef f() -> None:\n    try:\n        pass\n    except Exception:\n        pass\n"
    result = subprocess.run(
        [str(BIN / "ruff"), "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), "--stdin-filename", "runtime/planted.py", "-"],
        input=planted, capture_output=True, text=True, timeout=60, cwd=ROOT,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "F401" in result.stdout and "BLE001" in result.stdout, result.stdout


def test_mypy_catches_a_type_error_and_an_ignore_without_its_code(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "def name(x: int) -> str:\n    return x\n\n\n"
        "def other() -> int:\n    return 'a'  # type: ignore\n"
    )
    result = _run([str(BIN / "mypy"), "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"), str(planted)], ROOT)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "[return-value]" in result.stdout and "[ignore-without-code]" in result.stdout, result.stdout


# The accepted forms: "noqa: CODE - reason", "noqa: CODE  # reason", "type: ignore[code]  # reason".
_SUPPRESSION = re.compile(r"#\s*(noqa|type:\s*ignore)\b(.*)$")
_WITH_REASON = re.compile(r"^(?::\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*|\[[a-z-]+(?:\s*,\s*[a-z-]+)*\])\s*(?:#|-+|—)\s*\S")


def suppressions_without_reason(paths: list[Path]) -> list[tuple[Path, int, str]]:
    """(file, line number, line) of each `noqa` / `type: ignore` that names no code, or no reason after it."""
    bad = []
    for path in paths:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if any(not _WITH_REASON.match(m.group(2)) for m in _SUPPRESSION.finditer(line)):
                bad.append((path, number, line.strip()))
    return bad


def test_every_suppression_names_its_code_and_reason() -> None:
    files = [p for d in (*PACKAGES, "tests", "benchmarks", "infra") for p in sorted((ROOT / d).rglob("*.py")) if "golden" not in p.parts]
    files.remove(Path(__file__).resolve())  # this file plants bare suppressions in its strings
    bad = [f"{path.relative_to(ROOT)}:{number}: {line}" for path, number, line in suppressions_without_reason(files)]
    assert not bad, "suppressions without a code and a reason:\n" + "\n".join(bad)


def test_the_reason_check_catches_a_bare_suppression(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "a = 1  # noqa: F401\n"
        "b = 2  # type: ignore[assignment]\n"
        "c = 3  # noqa\n"
        "d = 4  # type: ignore  # a reason but no code\n"
        "e = 5  # noqa: BLE001 - the reason\n"
        "f = 6  # type: ignore[attr-defined]  # the reason\n"
    )
    assert [number for _, number, _ in suppressions_without_reason([planted])] == [1, 2, 3, 4]
