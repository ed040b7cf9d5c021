#!/usr/bin/env bash
# Idempotent set-up: creates .venv and installs Millrace with its dependencies.
# Needs only Python 3.11+ and Java 17 on the machine. Re-installs when pyproject.toml changes.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"
if ! "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "Millrace needs Python 3.11 or newer (found: $("$py" --version 2>&1))" >&2; exit 1
fi
if ! command -v java >/dev/null 2>&1; then
  echo "Millrace needs Java 17 for Spark: install a JDK 17 (e.g. apt-get install openjdk-17-jre-headless)" >&2; exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
fi
stamp=.venv/.millrace-installed
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[test]"
  echo "$want" > "$stamp"
fi
# Debian's chromium and its driver for the dashboard's browser test (tests/integration/rest/test_dashboard.py)
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing chromium and chromium-driver (apt) for the dashboard's browser test ..."
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "warning: chromium and chromedriver are missing and cannot be installed here (not root, or no apt-get):" \
         "the dashboard's browser test will fail" >&2
  fi
fi
# the Delta jars once, now (Maven Central), so that no Spark session runs Ivy and prints its resolution
.venv/bin/python -m runtime.deploy.spark_jars
# the ZooKeeper jars once (Maven Central), for the high-availability tests and infra/zookeeper.sh
.venv/bin/python -m runtime.deploy.zookeeper_server fetch
# the Kafka jars once (Maven Central), for the Kafka connectors' tests and infra/kafka.sh
.venv/bin/python -m runtime.deploy.kafka_server fetch
