#!/usr/bin/env bash
# The architecture invariants of docs/ARCHITECTURE.md that a script can check:
# - the crate graph points down (checked on the dependency tree; dev-dependencies do not count):
#   agentry-engine depends on no other agentry crate; agentry-agents and agentry-schedules on
#   agentry-engine only (not on each other); agentry-store implements the domain's traits and
#   knows nothing above it; no domain crate has a web framework, a database driver or an HTTP
#   client; agentry-auth and agentry-console know no other agentry crate; agentry-app (the
#   application layer) knows no HTTP framework, no SQL, no MCP and no front end; the front ends
#   (agentry-http, agentry-mcp, agentry-a2a) never reach the store and are peers, none depends on
#   another; agentry-server, the composition root, depends on agentry-app and mounts them;
#   agentry-metrics, agentry-otel and agentry-logs have no web framework and no database;
#   agentry-definitions (Serverless Workflow documents on the engine, with their outbound HTTP
#   client) depends on agentry-engine only, and only the composition root depends on it;
# - the front ends only ask the application: no file of a front end calls `.engine()` or
#   `.agents()` (agentry-app keeps them to itself besides);
# - every protocol's mapping of the error table is an exhaustive match on its codes: no `_` arm,
#   no catch-all binding or guard arm (a new row does not compile until each protocol maps it);
# - whoever writes a format reads it: a durable run's journal keys (`model-<k>`, `tool-<k>-<i>`,
#   `approval-<k>-<i>`) and the agents' internal workflow prefix (`agent:`) appear in the source
#   of agentry-agents only;
# - every transaction of the store begins inside `to_the_end`.
#
# `--prove`: shows that the rules bite. In a scratch copy of the workspace agentry-engine is given
# agentry-auth, agentry-agents agentry-schedules, agentry-app sqlx, agentry-http agentry-store and agentry-mcp, agentry-mcp
# actix-web, agentry-a2a a call of `.engine()` and its error mapping a `_` arm, and agentry-app a
# parse of a journal key; the rules must refuse them all.
set -euo pipefail
cd "$(dirname "$0")/.."
failed=0
# forbid <crate> <extended regex of package names it must not depend on>
forbid() {
  local found
  found=$(cargo tree -p "$1" -e normal --prefix none --format '{p}' | awk '{print $1}' | sort -u \
    | grep -v -x "$1" | grep -Ex "$2" || true)
  if [ -n "$found" ]; then
    echo "$1 must not depend on: $(echo $found)" >&2
    cargo tree -p "$1" -e normal -i "$(echo "$found" | head -n 1)" >&2 || true
    failed=1
  fi
}
# require <crate> <package it must depend on directly>
require() {
  if ! cargo tree -p "$1" -e normal --depth 1 --prefix none --format '{p}' | awk '{print $1}' \
    | grep -qx "$2"; then
    echo "$1 must depend on: $2" >&2
    failed=1
  fi
}
no_io='actix.*|sqlx.*|reqwest|hyper.*|async-openai|rmcp'
layering_rules() {
  forbid agentry-engine "$no_io|agentry-.*"
  forbid agentry-agents "$no_io|agentry-(schedules|store|app|auth|http|mcp|a2a|console|openai|metrics|otel|logs|server)"
  forbid agentry-schedules "$no_io|agentry-(agents|store|app|auth|http|mcp|a2a|console|openai|metrics|otel|logs|server)"
  forbid agentry-definitions 'actix.*|sqlx.*|rmcp|agentry-(agents|schedules|store|app|auth|http|mcp|a2a|console|openai|metrics|otel|logs|server)'
  forbid agentry-store 'actix.*|reqwest|hyper.*|async-openai|rmcp|agentry-(app|auth|http|mcp|a2a|console|openai|server)'
  forbid agentry-auth 'actix.*|sqlx.*|agentry-.*'
  forbid agentry-app 'actix.*|sqlx.*|rmcp|agentry-(store|http|mcp|a2a|console|server|definitions)'
  forbid agentry-http 'sqlx.*|agentry-(store|mcp|a2a|console|server|definitions)'
  forbid agentry-mcp 'actix.*|sqlx.*|agentry-(store|http|a2a|console|server|definitions)'
  forbid agentry-a2a 'actix.*|sqlx.*|rmcp|agentry-(store|http|mcp|console|server|definitions)'
  forbid agentry-console 'actix.*|sqlx.*|agentry-.*'
  forbid agentry-metrics 'actix.*|sqlx.*'
  forbid agentry-otel 'actix.*|sqlx.*'
  forbid agentry-logs 'actix.*|sqlx.*|rmcp'
  require agentry-server agentry-app
}

if [ "${1:-}" = "--prove" ]; then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  git ls-files -z | grep -zv '^tests/node/' | xargs -0 cp --parents -t "$scratch"
  cp Cargo.lock "$scratch/"
  # add_dependency <crate dir> <dependency line>: appended to its [dependencies] table.
  add_dependency() {
    sed -i "0,/^\[dependencies\]/s//[dependencies]\n$2/" "$scratch/crates/$1/Cargo.toml"
  }
  add_dependency agentry-engine 'agentry-auth.workspace = true'
  add_dependency agentry-agents 'agentry-schedules.workspace = true'
  add_dependency agentry-app 'sqlx.workspace = true'
  add_dependency agentry-http 'agentry-store.workspace = true'
  add_dependency agentry-http 'agentry-mcp.workspace = true'
  add_dependency agentry-mcp 'actix-web.workspace = true'
  printf '\nfn reach(app: &agentry_app::App) -> usize {\n    app.engine().workflows().len()\n}\n' \
    >>"$scratch/crates/agentry-a2a/src/card.rs"
  sed -i '/^pub fn rpc_code(/,/^}/s/^    match code {$/&\n        _ => RpcCode::InternalError,/' \
    "$scratch/crates/agentry-a2a/src/errors.rs"
  printf '\nfn is_model_call(key: &str) -> bool {\n    key.starts_with("model-")\n}\n' \
    >>"$scratch/crates/agentry-app/src/runs.rs"
  out=$(cd "$scratch" && CARGO_NET_OFFLINE=true bash scripts/check-layers.sh 2>&1) && {
    echo "check-layers.sh passed a workspace that breaks its rules:" >&2
    echo "$out" >&2
    exit 1
  }
  for refusal in 'agentry-engine must not depend on: .*agentry-auth' \
    'agentry-agents must not depend on: .*agentry-schedules' \
    'agentry-app must not depend on: .*sqlx' \
    'agentry-http must not depend on: .*agentry-store' \
    'agentry-http must not depend on: .*agentry-mcp' \
    'agentry-mcp must not depend on: .*actix-web' \
    'crates/agentry-a2a/src/card.rs:[0-9]+: +app.engine' \
    'crates/agentry-a2a/src/errors.rs:[0-9]+: +_ => RpcCode::InternalError' \
    'crates/agentry-app/src/runs.rs:[0-9]+: .*"model-'; do
    if ! grep -Eq "$refusal" <<<"$out"; then
      echo "check-layers.sh did not refuse /$refusal/; it said:" >&2
      echo "$out" >&2
      exit 1
    fi
  done
  echo "layers: the rules refuse the engine depending on another agentry crate, the agents on the schedules, agentry-app with sqlx, agentry-http with agentry-store or agentry-mcp, agentry-mcp with actix-web, a front end calling .engine(), an error mapping with a _ arm and a journal key parsed outside agentry-agents"
  exit 0
fi

layering_rules
if [ "$failed" = 0 ]; then
  echo "layers: the crate graph points down (engine; agents and schedules on it; store; app; the front ends as peers; the server composing them)"
fi

# The front ends only ask the application: none calls `.engine()` or `.agents()` of `App` (a
# front end that needs more gets a narrow `App` method).
reach=$(grep -rnE '\.(engine|agents)\(\)' crates/agentry-{mcp,a2a,http,console}/src \
  | grep -vE '^[^:]+:[0-9]+:\s*//' || true)
if [ -n "$reach" ]; then
  echo "front ends that reach around the application (ask App instead):" >&2
  echo "$reach" >&2
  failed=1
else
  echo "front ends: none calls .engine() or .agents()"
fi

# Every protocol's mapping of the error table's codes is an exhaustive match: no `_` arm and no
# catch-all arm (a bare binding, with or without a guard). The mappings, by file and function:
# A2A's JSON-RPC code of each row, and HTTP's `Retry-After` of each row (HTTP's status is the
# table's own column; MCP's tool error carries the row itself, `ToolFailure::from`).
error_mappings=(
  "crates/agentry-a2a/src/errors.rs rpc_code"
  "crates/agentry-a2a/src/errors.rs from_app"
  "crates/agentry-app/src/error.rs retry_after"
)
# fn_body <file> <function>: its lines (`file:line: text`), from its signature to its closing
# brace.
fn_body() {
  awk -v name="$2" '
    !on && $0 ~ ("fn " name "\\(") { on = 1 }
    on {
      print FILENAME ":" FNR ": " $0
      opened += gsub(/\{/, "{"); closed += gsub(/\}/, "}")
      if (opened > 0 && opened == closed) exit
    }' "$1"
}
catch_all=0
for mapping in "${error_mappings[@]}"; do
  read -r file function <<<"$mapping"
  body=$(fn_body "$file" "$function")
  if [ -z "$body" ]; then
    echo "the error mapping $function is not in $file (scripts/check-layers.sh lists them)" >&2
    catch_all=1
    continue
  fi
  arms=$(grep -E '^[^:]+:[0-9]+: +(\| *)?(_|[a-z_][a-z0-9_]*)( +if .*)? *=>' <<<"$body" || true)
  if [ -n "$arms" ]; then
    echo "a catch-all arm in the error mapping $function (name every code):" >&2
    echo "$arms" >&2
    catch_all=1
  fi
done
if [ "$catch_all" = 0 ]; then
  echo "errors: every protocol's mapping names each code of the table"
else
  failed=1
fi

# Whoever writes a format reads it: a durable run's journal keys and the agents' internal
# workflow prefix are agentry-agents' own (crates/agentry-agents/src/run_log.rs, durable.rs); a
# test may name them, and /doc shows an approval id as its example.
formats=$(grep -rnE '"(model|tool|approval|ap)-("|\{|[0-9])|"agent:' crates/*/src \
  | grep -v '^crates/agentry-agents/' | grep -vE '^[^:]+:[0-9]+:\s*//|/tests\.rs:|example = ' \
  || true)
if [ -n "$formats" ]; then
  echo "a durable run's format read or written outside agentry-agents (ask its RunJournal):" >&2
  echo "$formats" >&2
  failed=1
else
  echo "formats: a run's journal keys and the agents' workflow prefix are agentry-agents' alone"
fi

# Every transaction of the store runs to its end whatever its caller does (sqlx 0.9 leaves a
# PostgreSQL session inside a transaction when a `begin` is dropped mid-flight): a line of
# agentry-store that begins one must carry the mark of `to_the_end` (crates/agentry-store/src/sql.rs).
unmarked=$(grep -nE '\.begin(_with)?\(|Connection::begin' crates/agentry-store/src/*.rs \
  | grep -v 'to_the_end' | grep -vE '^[^:]+:[0-9]+:\s*//' || true)
if [ -n "$unmarked" ]; then
  echo "a transaction begun outside to_the_end (crates/agentry-store/src/sql.rs):" >&2
  echo "$unmarked" >&2
  failed=1
else
  echo "store: every transaction begins inside to_the_end"
fi
exit "$failed"
