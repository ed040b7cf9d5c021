#!/usr/bin/env bash
# Runs the main job (windowed_sum) on the embedded default: this process is the JobManager and the
# Spark driver (local Spark), TaskManagers run on Spark executors, output goes to a local Delta table.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/infra/setup.sh"
cd "$root"
exec .venv/bin/millrace run pipelines/jobs/windowed_sum.py --parallelism "${PARALLELISM:-2}" \
  --events "${EVENTS:-2000000}" --output "${OUTPUT:-$root/warehouse/windowed_sum}" "$@"
