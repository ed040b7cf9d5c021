"""Writes docs/configuration.md, the reference of every configuration option, from the registry.

    python -m runtime.core.options.docs            # (re)write docs/configuration.md
    python -m runtime.core.options.docs --check    # exit 1 when the checked-in file is stale

A unit test (tests/unit/core/test_configuration_docs.py) fails when the checked-in file is not
what this produces, so the reference cannot drift from the declarations.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from runtime.core.config_options import ConfigOption
from runtime.core.options import families

DOCS_PATH = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"
REGENERATE = "python -m runtime.core.options.docs"

_HEADER = f"""# Configuration reference

<!-- Generated from the ConfigOption declarations in runtime/core/options by `{REGENERATE}`.
     Do not edit by hand: a unit test fails when this file is not what the generator writes. -->

Every key Millrace reads, declared once as a typed `ConfigOption` (runtime/core/config_options.py)
in the module of its family under runtime/core/options. Keys are Flink's where the concept is
Flink's. A job's configuration is a string map: pass it to
`StreamExecutionEnvironment.get_execution_environment(configuration)` or `configure(...)`, set it
on `env.get_configuration()`, or give it on the command line (`millrace run ... -p 2` sets
`parallelism.default`). A bad value fails with an error naming the key, the value and what is
allowed: checkpointing, state backend and restart options when the program is compiled, the
others where they are read.

- **Duration**: `500 ms`, `10 s`, `1 min`, `2 h`, `1 d`, or a bare number of milliseconds.
- **MemorySize**: `64 mb`, `512kb`, `1 gb`, or a bare number of bytes.
- **Boolean**: `true` or `false` (`1`/`0`, `yes`/`no`, `on`/`off` are read too).
- **Enum**: one of the values listed, compared without case (`-` and `_` alike).
- A deprecated key is read when the key itself is not set.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(option: ConfigOption[Any]) -> str:
    default = option.default_string()
    kind = option.type.name + (f": {option.type.allowed}" if option.type.name in ("Enum", "Boolean") or option.type.name.startswith("List") else "")
    description = option.description
    if option.checks:
        description += " Must be " + " and ".join(must_be for _, must_be in option.checks) + "."
    if option.deprecated_keys:
        description += " Deprecated keys: " + ", ".join(f"`{k}`" for k in option.deprecated_keys) + "."
    return f"| `{option.key}` | {_cell(kind)} | {'`' + _cell(default) + '`' if default is not None else '(none)'} | {_cell(description)} |"


def render() -> str:
    """The reference as docs/configuration.md holds it."""
    parts = [_HEADER]
    for family in families():
        parts.append(f"\n## {family.title}\n\n{family.description}\n")
        parts.append(f"\nDeclared in `runtime/core/options/{family.name}.py`.\n")
        parts.append("\n| Key | Type | Default | Description |\n|---|---|---|---|\n")
        parts.extend(_row(o) + "\n" for o in family.options)
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="write the configuration reference (docs/configuration.md)")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when the file is stale")
    parser.add_argument("--output", type=Path, default=DOCS_PATH)
    args = parser.parse_args(argv)
    text = render()
    current = args.output.read_text(encoding="utf-8") if args.output.exists() else None
    if args.check:
        if current != text:
            print(f"{args.output} is not current: run `{REGENERATE}`", file=sys.stderr)
            return 1
        return 0
    if current != text:
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
