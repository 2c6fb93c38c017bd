#!/usr/bin/env bash
# What `just bench` needs beside the release binaries: wrk (Debian's package), the load
# generator of the HTTP cases, and psql for the benchmark's PostgreSQL database.
set -euo pipefail
need=()
command -v wrk >/dev/null || need+=(wrk)
command -v psql >/dev/null || need+=(postgresql-client)
if [ "${#need[@]}" -gt 0 ]; then
  echo "installing ${need[*]}"
  apt-get install -y "${need[@]}" >/dev/null 2>&1 \
    || { apt-get update >/dev/null && apt-get install -y "${need[@]}" >/dev/null; }
fi
echo "wrk: $(command -v wrk)"
