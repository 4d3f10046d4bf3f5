#!/usr/bin/env bash
# Load test: starts the mock upstream and the gateway on free loopback ports, runs bench/locustfile.py headless
# for a bounded time and prints one JSON summary on stdout (locust's own output goes to stderr).
#
# usage: bench/load.sh [--time 30s] [--users 16] [--spawn-rate 8] [--scenario MixedUser] [--workers 1]
#   --scenario  a user class of bench/locustfile.py: ShortChatUser, StreamChatUser, FallbackUser, CacheUser,
#               MixedUser (default)
#   --workers   gateway workers (GATEWAY_WORKERS); other GATEWAY_* variables in the environment reach the gateway
# Exit status: locust's (1 when any request failed), after the JSON is printed.
set -euo pipefail

TIME=30s
USERS=16
SPAWN_RATE=8
SCENARIO=MixedUser
WORKERS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --time) TIME=$2; shift 2 ;;
    --users) USERS=$2; shift 2 ;;
    --spawn-rate) SPAWN_RATE=$2; shift 2 ;;
    --scenario) SCENARIO=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "load.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gw-load.XXXXXX")
ADMIN_KEY="load-admin-$$"
MOCK_PID=""
GW_PID=""

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

stop() {  # $1: pid of a process this script started with setsid (its own process group)
  local pid=$1
  [ -n "$pid" ] || return 0
  kill -TERM -- "-$pid" 2>/dev/null || return 0
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
}

cleanup() {
  stop "$GW_PID"
  stop "$MOCK_PID"
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_ready() {  # url name pid log
  "$PY" - "$1" "$2" "$3" "$4" <<'EOF' >&2
import os, sys, time, urllib.request
url, name, pid, log = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        break
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            if resp.status in (200, 404, 405):
                sys.exit(0)
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 405):
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.1)
print(f"load.sh: {name} did not start:\n" + open(log, errors="replace").read()[-3000:], file=sys.stderr)
sys.exit(1)
EOF
}

MOCK_PORT=$(free_port)
cd "$ROOT"
setsid "$PY" -m gateway mock-upstream --host 127.0.0.1 --port "$MOCK_PORT" --workers 1 >"$TMP/mock.log" 2>&1 &
MOCK_PID=$!
wait_ready "http://127.0.0.1:$MOCK_PORT/_mock/scenarios/none" mock "$MOCK_PID" "$TMP/mock.log"

GW_PORT=$(free_port)
GATEWAY_ADMIN_KEY="$ADMIN_KEY" GATEWAY_DATA_DIR="$TMP/data" GATEWAY_ALLOW_PRIVATE_HOSTS=127.0.0.1 \
  GATEWAY_WORKERS="$WORKERS" GATEWAY_HOST=127.0.0.1 \
  setsid "$PY" -m gateway serve --port "$GW_PORT" >"$TMP/gateway.log" 2>&1 &
GW_PID=$!
wait_ready "http://127.0.0.1:$GW_PORT/ready" gateway "$GW_PID" "$TMP/gateway.log"

set +e
BENCH_GATEWAY_URL="http://127.0.0.1:$GW_PORT" BENCH_ADMIN_KEY="$ADMIN_KEY" \
  BENCH_MOCK_URL="http://127.0.0.1:$MOCK_PORT" BENCH_FINAL_CSV="$TMP/final_stats.csv" \
  "$PY" -m locust -f "$ROOT/bench/locustfile.py" --headless --only-summary -u "$USERS" -r "$SPAWN_RATE" \
  -t "$TIME" --stop-timeout 5 --host "http://127.0.0.1:$GW_PORT" --csv "$TMP/load" --loglevel WARNING \
  "$SCENARIO" 1>&2
RC=$?
set -e

STATS="$TMP/final_stats.csv"  # written by the locustfile after the users stop; --csv's copy lags up to 1 s
[ -s "$STATS" ] || STATS="$TMP/load_stats.csv"
"$PY" - "$STATS" "$SCENARIO" "$USERS" "$TIME" "$WORKERS" <<'EOF'
import csv, json, sys
path, scenario, users, run_time, workers = sys.argv[1:]
with open(path, newline="") as f:
    rows = list(csv.DictReader(f))

def num(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None

def summary(row):
    return {
        "requests": int(row["Request Count"]),
        "failures": int(row["Failure Count"]),
        "rps": round(num(row["Requests/s"]) or 0.0, 1),
        "latency_ms": {"p50": num(row["50%"]), "p90": num(row["90%"]), "p95": num(row["95%"]),
                       "p99": num(row["99%"]), "max": num(row["Max Response Time"]),
                       "avg": round(num(row["Average Response Time"]) or 0.0, 2)},
    }

total = next((r for r in rows if r["Name"] == "Aggregated"), None)
out = {"scenario": scenario, "users": int(users), "run_time": run_time, "gateway_workers": int(workers)}
out.update(summary(total) if total else {"requests": 0, "failures": 0, "rps": 0.0, "latency_ms": {}})
out["by_name"] = {r["Name"]: summary(r) for r in rows if r["Name"] != "Aggregated"}
print(json.dumps(out, indent=2))
EOF
exit "$RC"
