#!/usr/bin/env bash
# Runs the static checks (infra/lint.sh: import contracts, ruff, mypy), then the whole test suite
# (unit, integration, e2e). Pass pytest arguments to narrow it, e.g. `bash infra/test.sh -m unit`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/infra/setup.sh"
cd "$root"
# the static checks first (about 30 s cold); MILLRACE_SKIP_LINT=1 skips them while iterating on tests
if [ "${MILLRACE_SKIP_LINT:-0}" != "1" ]; then
  bash "$root/infra/lint.sh"
fi
exec .venv/bin/python -m pytest "$@"
