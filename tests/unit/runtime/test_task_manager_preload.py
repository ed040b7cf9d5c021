"""A TaskManager imports, before tasks arrive, every module that task code imports lazily.

Two task threads importing one module for the first time at once can fail (`_DeadlockError`, or
"partially initialized module 'pyarrow.lib'" seen with two Delta subtasks in one slot).
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TASK_CODE = ["runtime/api", "runtime/storage", "runtime/core"]


# lazy imports of code in those folders that never runs on a task thread, or is the user's choice
NOT_IN_TASK_THREADS = (
    "runtime.api.execution", "runtime.deploy", "runtime.graph",  # the client: execute() builds and submits the JobGraph
    "runtime.storage.delta_commit",  # the JobMaster's commit of a Delta sink
    "confluent_kafka.admin",  # the Kafka source's enumerator (partition discovery) runs on the JobMaster
    "pandas", "pyspark",  # a vectorized UDF's batch format "pandas" (opt-in); Spark is the driver's
)


def _lazy_imports() -> set[str]:
    """Modules imported inside functions of the code that runs in task threads."""
    found: set[str] = set()
    for folder in TASK_CODE:
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(), str(path))
            for fn in ast.walk(tree):
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for node in ast.walk(fn):
                    if isinstance(node, ast.Import):
                        found.update(a.name for a in node.names)
                    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                        found.add(node.module)
    return found


def test_every_lazy_import_of_task_code_is_preloaded() -> None:
    lazy = _lazy_imports()
    assert "pyarrow.fs" in lazy  # the scan sees the Delta sink's lazy import
    probe = (
        "import json, sys\n"
        "from runtime.taskmanager.runner import _preload_operator_modules\n"
        "_preload_operator_modules()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    missing = sorted(m for m in lazy - loaded if not m.startswith(NOT_IN_TASK_THREADS))
    assert not missing, f"imported lazily by task code but not preloaded by the TaskManager: {missing}"
