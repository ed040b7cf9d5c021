"""Run a user's job program (a PyFlink-style script calling env.execute()) as its __main__.

Used by the CLI on the client and by application clusters inside the JobManager process.
"""
from __future__ import annotations

import runpy
import sys
from pathlib import Path

from runtime.core.errors import MillraceError


def run_program(path: str, argv: list[str]) -> None:
    program = Path(path)
    if not program.is_file():
        raise MillraceError(f"no such job file: {path}")
    sys.argv = [str(program)] + list(argv)
    sys.path.insert(0, str(program.parent.resolve()))
    runpy.run_path(str(program), run_name="__main__")
