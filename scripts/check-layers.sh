#!/usr/bin/env bash
# The codemap (docs/ARCHITECTURE.md) kept true:
# - its layering rules, checked on the dependency tree: agentry-core has no web framework,
#   database driver or HTTP client; agentry-auth has no web framework, no database and does not
#   use agentry-core; agentry-app (the application layer) knows no HTTP framework, no SQL and no
#   MCP; the front ends (agentry-http, agentry-mcp, agentry-a2a) never reach the store: they go through
#   agentry-app; they are peers: agentry-http depends on neither agentry-mcp nor agentry-a2a (nor
#   the console), agentry-server, the composition root, mounts them side by side and depends on
#   agentry-app; agentry-logs (the log capture) knows no HTTP framework, no SQL and no MCP
#   (dev-dependencies do not count);
# - it names every source file: each crate's files by their path under the crate (`src/`
#   left out, a `mod.rs` by its folder, e.g. `wire/`), the test files of `tests/` and the scripts.
#
# `--prove`: shows that the rules bite. In a scratch copy of the workspace, agentry-app is given
# sqlx, agentry-http agentry-store and agentry-mcp, and agentry-mcp actix-web; the rules must
# refuse all four.
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
# require <crate> <package it must depend on directly>
require() {
  if ! cargo tree -p "$1" -e normal --depth 1 --prefix none --format '{p}' | awk '{print $1}' \
    | grep -qx "$2"; then
    echo "$1 must depend on: $2" >&2
    failed=1
  fi
}
layering_rules() {
  forbid agentry-core 'actix.*|sqlx.*|reqwest|hyper.*|async-openai'
  forbid agentry-auth 'actix.*|sqlx.*|agentry-core'
  forbid agentry-app 'actix.*|sqlx.*|rmcp|agentry-(store|http|mcp|a2a|server)'
  forbid agentry-http 'sqlx.*|agentry-(store|mcp|a2a|console|server)'
  forbid agentry-mcp 'actix.*|sqlx.*|agentry-(store|http)'
  forbid agentry-a2a 'actix.*|sqlx.*|rmcp|agentry-(store|http|mcp|server)'
  forbid agentry-console 'actix.*|sqlx.*|agentry-(core|store|auth|http|openai|server)'
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
  add_dependency agentry-app 'sqlx.workspace = true'
  add_dependency agentry-http 'agentry-store.workspace = true'
  add_dependency agentry-http 'agentry-mcp.workspace = true'
  add_dependency agentry-mcp 'actix-web.workspace = true'
  out=$(cd "$scratch" && CARGO_NET_OFFLINE=true bash scripts/check-layers.sh 2>&1) && {
    echo "check-layers.sh passed a workspace that breaks its rules:" >&2
    echo "$out" >&2
    exit 1
  }
  for refusal in 'agentry-app must not depend on: .*sqlx' \
    'agentry-http must not depend on: .*agentry-store' \
    'agentry-http must not depend on: .*agentry-mcp' \
    'agentry-mcp must not depend on: .*actix-web'; do
    if ! grep -Eq "$refusal" <<<"$out"; then
      echo "check-layers.sh did not refuse /$refusal/; it said:" >&2
      echo "$out" >&2
      exit 1
    fi
  done
  echo "layers: the rules refuse agentry-app with sqlx, agentry-http with agentry-store and agentry-mcp, and agentry-mcp with actix-web"
  exit 0
fi

layering_rules
if [ "$failed" = 0 ]; then
  echo "layers: agentry-core, agentry-auth, agentry-app, agentry-http, agentry-mcp, agentry-a2a, agentry-console, agentry-metrics, agentry-otel and agentry-logs keep to their dependencies; agentry-server depends on agentry-app"
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
