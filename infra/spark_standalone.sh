#!/usr/bin/env bash
# A standalone Spark cluster on this machine (a master and N workers on 127.0.0.1), started from
# the pip-installed pyspark. The pip package has no sbin/start-*.sh scripts, so each daemon is run
# with `spark-class`, in its own session (setsid) so that `stop` can reach all it started: the
# worker's executor JVMs and their pyspark daemons share the worker's session.
#
#   infra/spark_standalone.sh start  [--workers N] [--cores-per-worker C] [--memory-per-worker M]
#                                    [--master-port P] [--webui-port P] [--work-dir DIR] [--timeout S]
#   infra/spark_standalone.sh status [--work-dir DIR]
#   infra/spark_standalone.sh stop   [--work-dir DIR]
#
# `start` prints the master URL (spark://127.0.0.1:P) on its last line once every worker has
# registered. Everything binds to 127.0.0.1: the RPC ports, the web UIs and the executors.
# State (pids, ports) and logs live in the work dir (default: $MILLRACE_SPARK_WORK_DIR or
# ${TMPDIR:-/tmp}/millrace-spark-standalone); executors' stdout/stderr are under workers/N/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() { sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
die() { echo "spark_standalone: $*" >&2; exit 1; }

[ $# -ge 1 ] || usage
cmd="$1"; shift
workers=2
cores=1
memory=2g
master_port=7077
webui_port=""
work_dir="${MILLRACE_SPARK_WORK_DIR:-${TMPDIR:-/tmp}/millrace-spark-standalone}"
timeout_s=120
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers="$2"; shift 2 ;;
    --cores-per-worker) cores="$2"; shift 2 ;;
    --memory-per-worker) memory="$2"; shift 2 ;;
    --master-port) master_port="$2"; shift 2 ;;
    --webui-port) webui_port="$2"; shift 2 ;;
    --work-dir) work_dir="$2"; shift 2 ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "spark_standalone: unknown option $1" >&2; usage ;;
  esac
done
for n in "$workers" "$cores" "$master_port" "$timeout_s"; do
  [[ "$n" =~ ^[0-9]+$ ]] || die "expected a whole number, got '$n'"
done
[ "$workers" -ge 1 ] || die "--workers must be at least 1"

pid_dir="$work_dir/pids"
log_dir="$work_dir/logs"
state="$work_dir/cluster.env"

python="$root/.venv/bin/python"
[ -x "$python" ] || python="$(command -v python3)"

find_spark_class() {
  if [ -x "$root/.venv/bin/spark-class" ]; then echo "$root/.venv/bin/spark-class"; return; fi
  local home
  home="$("$python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' 2>/dev/null)" \
    || die "pyspark is not installed for $python: run infra/setup.sh first"
  echo "$home/bin/spark-class"
}

free_port() {
  "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != "Z" ]; }

# pids of every process in session $1 (the daemon, its executors, their pyspark daemons and workers)
session_pids() {
  local sid="$1" stat rest f
  for f in /proc/[0-9]*/stat; do
    stat="$(cat "$f" 2>/dev/null)" || continue
    rest="${stat##*) }"           # fields after "pid (comm) "
    set -- $rest                  # $1 state, $2 ppid, $3 pgrp, $4 session
    [ "${4:-}" = "$sid" ] && { f="${f#/proc/}"; echo "${f%/stat}"; }
  done
  return 0
}

recorded_pids() { cat "$pid_dir"/*.pid 2>/dev/null || true; }

# JSON of the master's web UI (loopback only); empty when it does not answer
master_json() {
  local port="$1"
  curl --silent --max-time 2 --noproxy '*' "http://127.0.0.1:$port/json/" 2>/dev/null || true
}

alive_workers() {
  printf '%s' "$1" | "$python" -c '
import json, sys
try:
    d = json.load(sys.stdin)
except ValueError:
    print(0); sys.exit(0)
print(sum(1 for w in d.get("workers", []) if w.get("state") == "ALIVE"))'
}

cmd_stop() {
  local pids sid left deadline
  pids="$(recorded_pids)"
  if [ -z "$pids" ]; then
    echo "no standalone Spark cluster recorded in $work_dir"
    return 0
  fi
  # workers first (they stop their executors), then the master
  for sid in $pids; do
    alive "$sid" && kill -TERM -- "-$sid" 2>/dev/null || true
  done
  deadline=$((SECONDS + 20))
  while :; do
    left=""
    for sid in $pids; do left="$left $(session_pids "$sid")"; done
    left="$(echo $left)"
    [ -z "$left" ] && break
    if [ $SECONDS -ge $deadline ]; then
      echo "spark_standalone: killing what did not stop in 20 s: $left" >&2
      kill -KILL $left 2>/dev/null || true
      sleep 0.5
      # a second round catches what was forked meanwhile
      for sid in $pids; do left="$(session_pids "$sid")"; [ -z "$left" ] || kill -KILL $left 2>/dev/null || true; done
      break
    fi
    # processes outside the leader's process group (a pyspark daemon makes its own) get TERM too
    kill -TERM $left 2>/dev/null || true
    sleep 0.3
  done
  rm -f "$pid_dir"/*.pid "$state"
  echo "standalone Spark cluster stopped (work dir $work_dir)"
}

cmd_status() {
  local running=0 n=0 pid
  for pid in $(recorded_pids); do
    n=$((n + 1)); alive "$pid" && running=$((running + 1))
  done
  if [ "$n" -eq 0 ] || [ ! -f "$state" ]; then
    echo "not running (nothing recorded in $work_dir)"; return 1
  fi
  # shellcheck disable=SC1090
  . "$state"
  echo "master $MASTER_URL (web UI http://127.0.0.1:$MASTER_WEBUI_PORT), $running of $n daemons running," \
       "$(alive_workers "$(master_json "$MASTER_WEBUI_PORT")") workers ALIVE"
  [ "$running" -eq "$n" ]
}

start_daemon() {
  # $1 name, rest: spark-class arguments. setsid: own session and process group; pid = $! because
  # spark-class exec's java (setsid does not fork when it is not a process group leader).
  local name="$1"; shift
  setsid "$spark_class" "$@" >"$log_dir/$name.log" 2>&1 </dev/null &
  echo $! >"$pid_dir/$name.pid"
}

cmd_start() {
  local pid i json n deadline started
  for pid in $(recorded_pids); do
    alive "$pid" && die "a cluster is already running from $work_dir (pid $pid): run '$0 stop --work-dir $work_dir' first"
  done
  command -v java >/dev/null 2>&1 || die "Spark needs Java 17: install a JDK 17 (e.g. apt-get install openjdk-17-jre-headless)"
  spark_class="$(find_spark_class)"
  [ -x "$spark_class" ] || die "spark-class not found at $spark_class"
  if ! "$python" -c "import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', $master_port))" 2>/dev/null; then
    die "port $master_port on 127.0.0.1 is in use: pass --master-port with a free port"
  fi
  mkdir -p "$pid_dir" "$log_dir" "$work_dir/local"
  rm -f "$pid_dir"/*.pid
  webui_port="${webui_port:-$(free_port)}"
  started=$SECONDS

  # loopback only: daemons, web UIs (Jetty binds SPARK_LOCAL_IP) and the executors they launch
  export SPARK_LOCAL_IP=127.0.0.1 SPARK_LOCAL_HOSTNAME=127.0.0.1 SPARK_MASTER_HOST=127.0.0.1 SPARK_PUBLIC_DNS=127.0.0.1
  # scratch space of workers and executors (shuffle files, fetched jars) stays in the work dir
  export SPARK_LOCAL_DIRS="$work_dir/local"
  # the master's REST submission server is not needed (clients use the RPC port)
  export SPARK_MASTER_OPTS="${SPARK_MASTER_OPTS:-} -Dspark.master.rest.enabled=false"
  # executors' Python is the venv's (the driver also sends PYSPARK_PYTHON; this covers other clients)
  export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$python}"

  start_daemon master org.apache.spark.deploy.master.Master \
    --host 127.0.0.1 --port "$master_port" --webui-port "$webui_port"
  master_url="spark://127.0.0.1:$master_port"
  deadline=$((SECONDS + timeout_s))
  until [ -n "$(master_json "$webui_port")" ]; do
    alive "$(cat "$pid_dir/master.pid")" || { tail -n 30 "$log_dir/master.log" >&2; cmd_stop >/dev/null; die "the master exited; its log is above"; }
    [ $SECONDS -lt $deadline ] || { cmd_stop >/dev/null; die "the master did not come up in ${timeout_s}s (log $log_dir/master.log)"; }
    sleep 0.3
  done
  for i in $(seq 1 "$workers"); do
    mkdir -p "$work_dir/workers/$i"
    start_daemon "worker-$i" org.apache.spark.deploy.worker.Worker "$master_url" \
      --host 127.0.0.1 --cores "$cores" --memory "$memory" --webui-port 0 --work-dir "$work_dir/workers/$i"
  done
  while :; do
    json="$(master_json "$webui_port")"
    n="$(alive_workers "$json")"
    [ "$n" -ge "$workers" ] && break
    for i in $(seq 1 "$workers"); do
      alive "$(cat "$pid_dir/worker-$i.pid")" || { tail -n 30 "$log_dir/worker-$i.log" >&2; cmd_stop >/dev/null; die "worker $i exited; its log is above"; }
    done
    [ $SECONDS -lt $deadline ] || { cmd_stop >/dev/null; die "only $n of $workers workers registered in ${timeout_s}s (logs in $log_dir)"; }
    sleep 0.3
  done
  cat >"$state" <<EOF
MASTER_URL=$master_url
MASTER_WEBUI_PORT=$webui_port
WORKERS=$workers
CORES_PER_WORKER=$cores
MEMORY_PER_WORKER=$memory
EOF
  echo "standalone Spark cluster up in $((SECONDS - started))s: $workers worker(s) x $cores core(s), $memory;" \
       "web UI http://127.0.0.1:$webui_port; logs $log_dir"
  echo "$master_url"
}

case "$cmd" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) usage ;;
esac
