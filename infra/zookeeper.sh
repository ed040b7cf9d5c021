#!/usr/bin/env bash
# A real Apache ZooKeeper for JobManager high availability, from jars fetched once from Maven Central
# (runtime/deploy/zookeeper_server.py). The servers run detached; <home>/zookeeper.json records them.
#   infra/zookeeper.sh start [--home DIR] [--port 2181] [--ensemble 3]   prints the connect string
#   infra/zookeeper.sh status [--home DIR]                               exit 1 if no node serves
#   infra/zookeeper.sh stop [--home DIR]
#   infra/zookeeper.sh fetch                                             the jars only
# The default home is .millrace/zookeeper in the repository.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ ! -x .venv/bin/python ]; then
  bash "$root/infra/setup.sh"
fi
exec .venv/bin/python -m runtime.deploy.zookeeper_server "$@"
