#!/usr/bin/env bash
# The static checks, run by infra/test.sh before the tests (so by .ci/run): the import contracts
# (.importlinter: which room may import which), ruff (pyproject.toml [tool.ruff]) and mypy
# ([tool.mypy]). Any violation fails the run. Needs the set-up done (infra/setup.sh).
set -euo pipefail
cd "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
echo "lint: import contracts" >&2
.venv/bin/lint-imports --no-cache .importlinter
echo "lint: ruff" >&2
.venv/bin/ruff check --no-cache .
echo "lint: mypy" >&2
.venv/bin/mypy
