#!/usr/bin/env bash
# Installs what the tests need beyond the Rust toolchain, each only if missing (the README's
# set-up and CI run it; `cargo test` itself never installs anything):
#   - Debian's `chromium` (tests/openapi.rs loads /ui in headless Chromium; docs/ui-screenshot.md)
#   - Node.js, the `ai` and `@a2a-js/sdk` npm packages in tests/node (tests/chat_ai_sdk.rs,
#     tests/a2a.rs), and there too the official MCP conformance suite
#     (`@modelcontextprotocol/conformance`, tests/mcp_conformance.rs) with the Node.js 22 it
#     needs (npm's `node` package: its own binary, in tests/node/node_modules/.bin/node), and
#     the Serverless Workflow SDK (`@serverlessworkflow/sdk`: the DSL's official validator,
#     crates/agentry-definitions/tests/shape_against_sdk.rs)
#   - schemathesis in a virtualenv at .venv-tools/ (scripts/schemathesis.sh)
#   - Debian's `prometheus` (crates/agentry-server/tests/prometheus.rs: promtool, a real scrape)
#   - Playwright for Python and pytest in the same virtualenv (tests/console.rs drives Debian's
#     chromium with them; Playwright's own browser download is never used), and the official
#     MCP Python SDK (tests/mcp.rs: its client against /mcp, its FastMCP as a server for agents),
#     the A2A Python SDK (tests/a2a.rs: its client against /a2a/{agentId}),
#     and opentelemetry-proto with grpcio (crates/agentry-server/tests/otel.rs: a real OTLP
#     receiver, over HTTP and over gRPC)
# Safe to run again: a second run installs nothing. Needs root for apt-get (CI and the dev machines
# run as root).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -x /usr/bin/chromium ]; then
  echo "chromium: present ($(/usr/bin/chromium --version 2>/dev/null || echo unknown version))"
else
  echo "chromium: installing Debian's package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  /usr/bin/chromium --version
fi

if [ -x /usr/bin/prometheus ] && [ -x /usr/bin/promtool ]; then
  echo "prometheus: present"
else
  echo "prometheus: installing Debian's package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

if command -v node >/dev/null && command -v npm >/dev/null; then
  echo "node: present ($(node --version))"
else
  echo "node: installing Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  node --version
fi
NODE_PACKAGES="ai @a2a-js/sdk @modelcontextprotocol/conformance node @serverlessworkflow/sdk"
present=1
for package in $NODE_PACKAGES; do
  [ -f "tests/node/node_modules/$package/package.json" ] || present=0
done
if [ "$present" = 1 ] && tests/node/node_modules/.bin/node --version >/dev/null 2>&1; then
  echo "$NODE_PACKAGES (npm): present"
else
  echo "$NODE_PACKAGES (npm): installing into tests/node"
  (cd tests/node && npm install --no-audit --no-fund --loglevel=error)
  tests/node/node_modules/.bin/node --version
fi

VENV=.venv-tools
if [ -x "$VENV/bin/st" ] || [ -x "$VENV/bin/schemathesis" ]; then
  echo "schemathesis: present ($("$VENV/bin/st" --version 2>/dev/null || "$VENV/bin/schemathesis" --version))"
else
  echo "schemathesis: installing into $VENV"
  if ! python3 -m venv "$VENV"; then
    # Debian's python3 keeps venv in a package of its own.
    rm -rf "$VENV"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$VENV"
  fi
  # The version scripts/schemathesis.sh was written against (its flags, its SSE event checks).
  "$VENV/bin/pip" install --quiet --disable-pip-version-check 'schemathesis==4.32.5'
  "$VENV/bin/st" --version
fi

if "$VENV/bin/python" -c 'import playwright, pytest, mcp, opentelemetry.proto, grpc, a2a.client' 2>/dev/null; then
  echo "playwright, pytest, mcp, opentelemetry-proto, grpcio, a2a-sdk: present"
else
  echo "playwright, pytest, mcp, opentelemetry-proto, grpcio, a2a-sdk: installing into $VENV"
  # The versions tests/console and tests/mcp were written against. Playwright drives
  # /usr/bin/chromium (executable_path): `playwright install` is never run.
  "$VENV/bin/pip" install --quiet --disable-pip-version-check 'playwright==1.65.2' 'pytest==9.2.0' 'mcp==2.3.0' 'opentelemetry-proto==1.45.2' 'grpcio==1.76.0' 'a2a-sdk==1.3.0'
fi
