#!/usr/bin/env bash
# How fast an interrupted execution continues after kill -9 (a benchmark, not a test):
#   1. SQLite: kill -9 the only process mid-step, restart it (same node id): time from the new
#      process listening to the interrupted step's second attempt being recorded;
#   2. PostgreSQL: three replicas with AGENTRY_LEASE_TTL=3s, kill -9 the owner mid-step: time
#      from the kill to a survivor recording the second attempt.
# Usage: scripts/recovery-time.sh [path/to/agentry] [postgres admin URL]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${1:-target/release/agentry}"
ADMIN="${2:-postgres://postgres@127.0.0.1:5432/postgres}"
[ -x "$BIN" ] || cargo build --release -p agentry-server
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

now_ms() { date +%s%3N; }

# start <database-url> <node> <ttl>: starts a process; prints "<pid> <addr>".
start() {
  local out="$WORK/$2.$RANDOM.out"
  AGENTRY_NODE_ID="$2" AGENTRY_LEASE_TTL="$3" RUST_LOG=warn \
    "$BIN" serve --bind 127.0.0.1:0 --database-url "$1" >"$out" 2>"$out.err" &
  local pid=$!
  for _ in $(seq 1 500); do
    if grep -q "listening on" "$out" 2>/dev/null; then
      echo "$pid $(sed -n 's/.*http:\/\///p' "$out" | head -1)"
      return
    fi
    sleep 0.01
  done
  echo "the server did not start: $(cat "$out.err")" >&2
  exit 1
}

attempt_of() { # <addr> <execution id> <step>
  curl -s "http://$1/workflows/countdown/executions/$2/state" | jq -r ".data.steps[\"$3\"].attempt // 0"
}

wait_attempt() { # <addr> <id> <step> <attempt>
  until [ "$(attempt_of "$1" "$2" "$3")" = "$4" ]; do sleep 0.01; done
}

execute_countdown() { # <addr> <id>: in the background, 2 s per step
  curl -s -o /dev/null "http://$1/workflows/countdown/execute" -H 'content-type: application/json' \
    -d "{\"input\":{\"stepDelayMs\":2000},\"options\":{\"executionId\":\"$2\"}}" &
}

echo "== SQLite: kill -9, restart with the same node id"
DB="sqlite://$WORK/agentry.db"
read -r PID ADDR < <(start "$DB" n1 10s)
PIDS+=("$PID")
ID="rt-$RANDOM$RANDOM"
execute_countdown "$ADDR" "$ID"
wait_attempt "$ADDR" "$ID" tick-5 1
sleep 0.5
kill -9 "$PID"
T0=$(now_ms)
read -r PID ADDR < <(start "$DB" n1 10s)
PIDS+=("$PID")
T1=$(now_ms)
wait_attempt "$ADDR" "$ID" tick-5 2
T2=$(now_ms)
echo "restart to listening: $((T1 - T0)) ms; listening to the step's second attempt: $((T2 - T1)) ms"
kill -9 "$PID"

echo "== PostgreSQL: three replicas, AGENTRY_LEASE_TTL=3s, kill -9 the owner"
NAME="agentry_rt_$RANDOM$RANDOM"
psql "$ADMIN" -qc "CREATE DATABASE $NAME"
trap 'cleanup; psql "$ADMIN" -qc "DROP DATABASE IF EXISTS $NAME WITH (FORCE)"' EXIT
PG="${ADMIN%/*}/$NAME"
read -r P1 A1 < <(start "$PG" r1 3s)
read -r P2 A2 < <(start "$PG" r2 3s)
read -r P3 A3 < <(start "$PG" r3 3s)
PIDS+=("$P1" "$P2" "$P3")
ID="rt-$RANDOM$RANDOM"
execute_countdown "$A1" "$ID"
wait_attempt "$A2" "$ID" tick-5 1
sleep 0.5
kill -9 "$P1"
T0=$(now_ms)
wait_attempt "$A2" "$ID" tick-5 2
T1=$(now_ms)
echo "kill to a survivor's second attempt: $((T1 - T0)) ms (lease ttl 3 s)"
