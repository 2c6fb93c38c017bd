#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ for a bounded time and fails on any crash.
#
#   scripts/fuzz.sh                   # every target, 20 s each
#   scripts/fuzz.sh 30                # 30 s each (what CI runs)
#   scripts/fuzz.sh 60 calculator     # only the named targets
#
# Installs cargo-fuzz when it is missing. Builds on the machine's (stable) toolchain:
# RUSTC_BOOTSTRAP=1 lets it take the nightly-only flags cargo-fuzz passes (-Zsanitizer,
# sanitizer coverage). With AddressSanitizer by default; FUZZ_SANITIZER=none builds without it.
#
# Each target starts from its checked-in seeds (fuzz/seeds/<target>/), with the tokens of
# fuzz/dicts/<target>.dict as a libFuzzer dictionary, its seeds copied into a scratch
# corpus (fuzz/corpus/<target>/, ignored by git, kept between local runs so later runs start
# further). A crash, a timeout (> 10 s for one input) or an allocation over 2048 MB is written to
# fuzz/artifacts/<target>/; the script prints its path and the command that reproduces it, and
# exits non-zero. A crash found becomes a regression test in the crate that owns the code.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SECONDS_PER_TARGET=${1:-20}
shift || true
case "$SECONDS_PER_TARGET" in
  '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]" >&2; exit 2 ;;
esac

export RUSTC_BOOTSTRAP=1
SANITIZER=${FUZZ_SANITIZER:-address}
# cargo-fuzz builds with one codegen unit by default: 16 halves a cold build here (about 10 min
# instead of 20 on 2 cores, mostly actix-web, jsonschema and the JWT crypto) for slightly slower
# executions.
BUILD=(--sanitizer "$SANITIZER" --codegen-units 16)

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi

cd "$ROOT/fuzz"
if [ "$#" -gt 0 ]; then
  TARGETS=("$@")
else
  mapfile -t TARGETS < <(cargo fuzz list)
fi

echo "== building ${#TARGETS[@]} fuzz targets (sanitizer: $SANITIZER)"
build_started=$(date +%s)
if [ "$#" -gt 0 ]; then
  for t in "${TARGETS[@]}"; do
    cargo fuzz build "${BUILD[@]}" "$t"
  done
else
  cargo fuzz build "${BUILD[@]}"
fi
echo "built in $(($(date +%s) - build_started)) s"

LOGS=$ROOT/fuzz/target/logs
mkdir -p "$LOGS"
failed=()
for t in "${TARGETS[@]}"; do
  corpus=$ROOT/fuzz/corpus/$t
  mkdir -p "$corpus"
  if [ -d "$ROOT/fuzz/seeds/$t" ]; then
    cp -n "$ROOT/fuzz/seeds/$t"/* "$corpus"/ 2>/dev/null || true
  fi
  log=$LOGS/$t.log
  dict=()
  if [ -f "$ROOT/fuzz/dicts/$t.dict" ]; then
    dict=(-dict="$ROOT/fuzz/dicts/$t.dict")
  fi
  started=$(date +%s)
  if cargo fuzz run "${BUILD[@]}" "$t" "$corpus" -- \
    -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 "${dict[@]}" >"$log" 2>&1; then
    runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 runs in \2 s/p' "$log" | tail -n 1)
    corp=$(sed -n 's/^#[0-9]*[[:space:]]*DONE .*corp: \([0-9]*\)\/.*/\1/p' "$log" | tail -n 1)
    echo "$t: ok, ${runs:-? runs}, corpus ${corp:-?} inputs"
  else
    failed+=("$t")
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    echo "$t: FAILED after $(($(date +%s) - started)) s"
    # The panic and its message, or libFuzzer's or AddressSanitizer's verdict (timeout, OOM).
    grep -m 1 -A 1 -E "panicked at|ERROR: (libFuzzer|AddressSanitizer)" "$log" | sed 's/^/  /' || true
    echo "  log: $log"
    if [ -n "$artifact" ]; then
      echo "  input: $artifact"
      echo "  reproduce: (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run ${BUILD[*]} $t $artifact)"
    else
      tail -n 20 "$log" | sed 's/^/  | /'
    fi
  fi
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzzing found a problem in: ${failed[*]}"
  exit 1
fi
echo "fuzzing: ${#TARGETS[@]} targets, no crash"
