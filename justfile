# agentry tasks. `just --list` shows them.

# Serve the examples on SQLite at 127.0.0.1:3141.
run:
    cargo run --release -p agentry-server

# The whole test suite (PostgreSQL tests use $AGENTRY_TEST_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/postgres; each test makes its own database).
test:
    bash scripts/install-test-deps.sh
    cargo test --workspace

# The benchmark suite (docs/PERFORMANCE.md): release build, each case against its limit, on a fresh
# SQLite database then PostgreSQL, then executions/s per core (a private PostgreSQL pinned to one
# core), step latency and its growth with steps and stored executions; prints the tables, writes
# bench-results/results.{json,md}.
# Extra arguments go to scripts/bench.py (--seconds, --connections, --backends, --million; --queues
# runs only the queue benchmark, scripts/queue-bench.py: three replicas on one PostgreSQL database).
bench *args:
    bash scripts/install-bench-deps.sh
    cargo build --release -p agentry-server -p agentry-bench
    python3 scripts/bench.py {{args}}

# Property-based tests of the HTTP API from its OpenAPI document (GET /doc): starts the server, runs
# schemathesis (installed into .venv-tools/ if missing), stops the server. Extra arguments go to `st run`.
schemathesis *args:
    bash scripts/schemathesis.sh {{args}}

# Every cargo-fuzz target of fuzz/ for the given seconds (installs cargo-fuzz if missing); fails on a crash.
fuzz seconds="20" *targets:
    bash scripts/fuzz.sh {{seconds}} {{targets}}

# Format the code.
fmt:
    cargo fmt --all

# Lints as CI runs them.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# What CI runs.
ci:
    bash .ci/run
