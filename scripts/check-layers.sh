#!/usr/bin/env bash
# The codemap's layering rules (docs/ARCHITECTURE.md), checked on the dependency tree:
# agentry-core has no web framework, database driver or HTTP client; agentry-auth has no web
# framework, no database and does not use agentry-core. Dev-dependencies do not count.
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
if [ "$failed" = 0 ]; then
  echo "layers: agentry-core and agentry-auth keep to their dependencies"
fi
exit "$failed"
