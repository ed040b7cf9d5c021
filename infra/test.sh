#!/usr/bin/env bash
# Runs the whole test suite (unit, integration, e2e). Pass pytest arguments to narrow it,
# e.g. `bash infra/test.sh -m unit`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/infra/setup.sh"
cd "$root"
exec .venv/bin/python -m pytest "$@"
