#!/usr/bin/env bash
# A real Apache Kafka broker (KRaft, one node, no ZooKeeper) for the Kafka connectors' tests and local
# use, from jars fetched once from Maven Central (runtime/deploy/kafka_server.py). The broker runs
# detached; <home>/kafka.json records it.
#   infra/kafka.sh start [PORT] [--home DIR]   prints the bootstrap servers (port default 9092)
#   infra/kafka.sh status [--home DIR]         exit 1 if the broker does not serve
#   infra/kafka.sh stop [--home DIR]
#   infra/kafka.sh fetch                       the jars only
# The default home is .millrace/kafka in the repository.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ ! -x .venv/bin/python ]; then
  bash "$root/infra/setup.sh"
fi
# `start 9093` is `start --port 9093`
if [ "${1:-}" = start ] && [[ "${2:-}" =~ ^[0-9]+$ ]]; then
  set -- start --port "$2" "${@:3}"
fi
exec .venv/bin/python -m runtime.deploy.kafka_server "$@"
