#!/usr/bin/env bash
# The codemap (docs/ARCHITECTURE.md) kept true:
# - its layering rules, checked on the dependency tree: agentry-core has no web framework,
#   database driver or HTTP client; agentry-auth has no web framework, no database and does not
#   use agentry-core; agentry-app has no web framework, database driver or MCP SDK
#   (dev-dependencies do not count);
# - it names every source file: each crate's files by their path under the crate (`src/`
#   left out, a `mod.rs` by its folder, e.g. `wire/`), the test files of `tests/` and the scripts.
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
forbid agentry-core 'actix.*|sqlx.*|reqwest|hyper.*|async-openai'
forbid agentry-auth 'actix.*|sqlx.*|agentry-core'
forbid agentry-app 'actix.*|sqlx.*|rmcp.*'
forbid agentry-console 'actix.*|sqlx.*|agentry-(core|store|auth|http|openai|server)'
forbid agentry-mcp 'actix.*|sqlx.*'
forbid agentry-metrics 'actix.*|sqlx.*'
forbid agentry-otel 'actix.*|sqlx.*'
if [ "$failed" = 0 ]; then
  echo "layers: agentry-core, agentry-auth, agentry-app, agentry-console, agentry-mcp, agentry-metrics and agentry-otel keep to their dependencies"
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
