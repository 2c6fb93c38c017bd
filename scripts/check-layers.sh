#!/usr/bin/env bash
# The codemap (docs/ARCHITECTURE.md) kept true:
# - its layering rules, checked on the dependency tree: agentry-core has no web framework,
#   database driver or HTTP client; agentry-auth has no web framework, no database and does not
#   use agentry-core; agentry-app (the application layer) knows no HTTP framework, no SQL and no
#   MCP; the front ends (agentry-http, agentry-mcp, agentry-a2a) never reach the store: they go through
#   agentry-app; agentry-logs (the log capture) knows no HTTP framework, no SQL and no MCP
#   (dev-dependencies do not count);
# - the front ends only ask the application: no file of agentry-mcp, agentry-a2a, agentry-http
#   or agentry-console calls `.engine()` or `.agents()` (the engine and the agents under `App`);
# - every protocol's mapping of the error table is an exhaustive match on its codes: no `_` arm,
#   no catch-all binding or guard arm (a new row does not compile until each protocol maps it);
# - it names every source file: each crate's files by their path under the crate (`src/`
#   left out, a `mod.rs` by its folder, e.g. `wire/`), the test files of `tests/` and the scripts.
#
# `--prove`: shows that the rules bite. In a scratch copy of the workspace, agentry-app is given
# sqlx, agentry-http agentry-store and agentry-mcp actix-web, agentry-a2a a call of `.engine()`
# and its error mapping a `_` arm; the rules must refuse all five.
set -euo pipefail
cd "$(dirname "$0")/.."
failed=0
# forbid <crate> <extended regex of package names it must not depend on>
forbid() {
  local found
  found=$(cargo tree -p "$1" -e normal --prefix none --format '{p}' | awk '{print $1}' | sort -u \
    | grep -Ex "$2" || true)
  if [ -n "$found" ]; then
    echo "$1 must not depend on: $(echo $found)" >&2
    cargo tree -p "$1" -e normal -i "$(echo "$found" | head -n 1)" >&2 || true
    failed=1
  fi
}
layering_rules() {
  forbid agentry-core 'actix.*|sqlx.*|reqwest|hyper.*|async-openai'
  forbid agentry-auth 'actix.*|sqlx.*|agentry-core'
  forbid agentry-app 'actix.*|sqlx.*|rmcp|agentry-(store|http|mcp|a2a|server)'
  forbid agentry-http 'sqlx.*|agentry-store'
  forbid agentry-mcp 'actix.*|sqlx.*|agentry-(store|http)'
  forbid agentry-a2a 'actix.*|sqlx.*|rmcp|agentry-(store|http|mcp|server)'
  forbid agentry-console 'actix.*|sqlx.*|agentry-(core|store|auth|http|openai|server)'
  forbid agentry-metrics 'actix.*|sqlx.*'
  forbid agentry-otel 'actix.*|sqlx.*'
  forbid agentry-logs 'actix.*|sqlx.*|rmcp'
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
  add_dependency agentry-app 'sqlx.workspace = true'
  add_dependency agentry-http 'agentry-store.workspace = true'
  add_dependency agentry-mcp 'actix-web.workspace = true'
  printf '\nfn reach(app: &agentry_app::App) -> usize {\n    app.engine().workflows().len()\n}\n' \
    >>"$scratch/crates/agentry-a2a/src/card.rs"
  sed -i '/^pub fn rpc_code(/,/^}/s/^    match code {$/&\n        _ => RpcCode::InternalError,/' \
    "$scratch/crates/agentry-a2a/src/errors.rs"
  out=$(cd "$scratch" && CARGO_NET_OFFLINE=true bash scripts/check-layers.sh 2>&1) && {
    echo "check-layers.sh passed a workspace that breaks its rules:" >&2
    echo "$out" >&2
    exit 1
  }
  for refusal in 'agentry-app must not depend on: .*sqlx' \
    'agentry-http must not depend on: .*agentry-store' \
    'agentry-mcp must not depend on: .*actix-web' \
    'front ends that reach around the application' \
    'crates/agentry-a2a/src/card.rs:[0-9]+: +app.engine' \
    'crates/agentry-a2a/src/errors.rs:[0-9]+: +_ => RpcCode::InternalError'; do
    if ! grep -Eq "$refusal" <<<"$out"; then
      echo "check-layers.sh did not refuse /$refusal/; it said:" >&2
      echo "$out" >&2
      exit 1
    fi
  done
  echo "layers: the rules refuse agentry-app with sqlx, agentry-http with agentry-store, agentry-mcp with actix-web, a front end calling .engine() and an error mapping with a _ arm"
  exit 0
fi

layering_rules
if [ "$failed" = 0 ]; then
  echo "layers: agentry-core, agentry-auth, agentry-app, agentry-http, agentry-mcp, agentry-a2a, agentry-console, agentry-metrics, agentry-otel and agentry-logs keep to their dependencies"
fi

# The front ends only ask the application: none calls `.engine()` or `.agents()` of `App` (a
# front end that needs more gets a narrow `App` method). Exempt for now: agentry-http's host.rs
# and mcp.rs, where the composition root still is (it is leaving them for agentry-server).
reach=$(grep -rnE '\.(engine|agents)\(\)' crates/agentry-{mcp,a2a,http,console}/src \
  | grep -vE '^crates/agentry-http/src/(host|mcp)\.rs:' | grep -vE '^[^:]+:[0-9]+:\s*//' || true)
if [ -n "$reach" ]; then
  echo "front ends that reach around the application (ask App's use cases instead):" >&2
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

# The name the codemap must give a tracked file, in backticks.
codemap_name() {
  local f="$1" rel
  case "$f" in
    crates/*) rel="${f#crates/*/}"; rel="${rel#src/}" ;;
    tests/*) rel="${f#tests/}" ;;
    *) rel="$f" ;;
  esac
  case "$rel" in
    */mod.rs) rel="${rel%mod.rs}" ;;
  esac
  echo "$rel"
}
unnamed=0
while IFS= read -r f; do
  name=$(codemap_name "$f")
  if ! grep -qF "\`$name\`" docs/ARCHITECTURE.md; then
    echo "docs/ARCHITECTURE.md does not name $f (as \`$name\`)" >&2
    unnamed=1
  fi
done < <(git ls-files 'crates/*.rs' 'tests/*.rs' 'scripts/*' | grep -v '^tests/node/')
if [ "$unnamed" = 0 ]; then
  echo "codemap: docs/ARCHITECTURE.md names every source file"
else
  failed=1
fi
exit "$failed"
