#!/usr/bin/env bash
# Property-based API tests: schemathesis reads GET /doc and sends generated requests to every
# documented operation, failing on any 5xx and on any response (JSON body or SSE event) that the
# document does not describe.
#
#   scripts/schemathesis.sh                      # 20 examples per operation, random seed
#   scripts/schemathesis.sh --seed 1 -n 50       # extra arguments go to `st run`
#   SCHEMATHESIS_DATABASE=postgres scripts/schemathesis.sh   # against PostgreSQL
#
# Starts the debug `agentry` binary on a free port with the examples on an in-memory SQLite
# database (or, with SCHEMATHESIS_DATABASE=postgres, a fresh database on the PostgreSQL server
# of $AGENTRY_TEST_POSTGRES_URL, dropped at the end), the offline model and no authentication;
# stops it at the end. Installs schemathesis (scripts/install-test-deps.sh) when it is missing.
# Bounded: `st run` gets 600 s.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

ST=$ROOT/.venv-tools/bin/st
if [ ! -x "$ST" ]; then
  bash scripts/install-test-deps.sh
fi

echo "== building agentry"
cargo build -q -p agentry-server
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug/agentry

WORK=$ROOT/target/schemathesis
mkdir -p "$WORK"
LOG=$WORK/server.log
: >"$LOG"

DATABASE_URL=sqlite::memory:
DROP_DB=
case "${SCHEMATHESIS_DATABASE:-sqlite}" in
  sqlite) ;;
  postgres)
    ADMIN_URL=${AGENTRY_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}
    DROP_DB=agentry_st_$$_$RANDOM
    psql "$ADMIN_URL" -qc "CREATE DATABASE $DROP_DB" >/dev/null
    DATABASE_URL=${ADMIN_URL%/*}/$DROP_DB
    ;;
  *) echo "SCHEMATHESIS_DATABASE must be sqlite or postgres" >&2; exit 2 ;;
esac

# The offline model and no authentication, whatever this shell has set.
env -u OPENAI_API_KEY -u OPENAI_BASE_URL -u AGENTRY_JWT_SECRET -u AGENTRY_JWT_PUBLIC_KEY_FILE \
  RUST_LOG=warn "$BIN" serve --bind 127.0.0.1:0 --database-url "$DATABASE_URL" >"$LOG" 2>&1 &
SERVER=$!
stop() {
  kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null || true
  if [ -n "$DROP_DB" ]; then
    psql "$ADMIN_URL" -qc "DROP DATABASE IF EXISTS $DROP_DB WITH (FORCE)" >/dev/null || true
  fi
}
trap stop EXIT

ADDR=
for _ in $(seq 1 300); do
  ADDR=$(sed -n 's#^agentry listening on http://\(.*\)$#\1#p' "$LOG" | head -n 1)
  [ -n "$ADDR" ] && break
  if ! kill -0 "$SERVER" 2>/dev/null; then
    echo "agentry exited before listening:" >&2
    cat "$LOG" >&2
    exit 1
  fi
  sleep 0.1
done
if [ -z "$ADDR" ]; then
  echo "agentry did not print 'agentry listening' within 30 s:" >&2
  cat "$LOG" >&2
  exit 1
fi
echo "== schemathesis against http://$ADDR/doc (${SCHEMATHESIS_DATABASE:-sqlite})"

# From target/schemathesis, so that hypothesis keeps its example database there.
cd "$WORK"
set +e
timeout 600 "$ST" run "http://$ADDR/doc" \
  --checks not_a_server_error,response_schema_conformance \
  --max-examples 20 \
  --request-timeout 60 \
  "$@" 2>&1 | tee "$WORK/schemathesis.log"
status=${PIPESTATUS[0]}
set -e

if [ "$status" -ne 0 ]; then
  echo "== schemathesis failed (exit $status); the server's log:" >&2
  tail -n 50 "$LOG" >&2
  echo "schemathesis: failed (exit $status)"
  exit "$status"
fi
# A plain closing line with the count of test cases (schemathesis closes like pytest, without it).
passed=$(sed -n 's/^ *\([0-9][0-9]*\) generated, \([0-9][0-9]*\) passed.*/\2/p' "$WORK/schemathesis.log" | tail -n 1)
echo "schemathesis: ${passed:-0} passed, 0 failed"
