#!/usr/bin/env bash
# Benchmarks (never timed tests): each prints its numbers and asserts nothing about speed.
#   1. The pure domain, always and first: bench/*.bench.ts in vitest's bench mode
#      (vitest.bench.config.mts), no stack needed. Ends with a compact summary table.
#   2. The MongoDB stand-in's query curve (bench/stand-in/queries.mjs), on a stand-in of its own.
#   3. The HTTP benches, bench/*.mjs, against a running stack (`npm start` in another terminal, or
#      BENCH_URL=http://host:port). Skipped, with a note, when no API answers.
# Extra arguments go to the HTTP benches (e.g. scripts/bench.sh --duration 30).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

log "domain benchmarks (vitest bench, no stack needed)"
npx --no-install vitest bench --run --config vitest.bench.config.mts

log "MongoDB stand-in query curve (its own stand-in, no stack needed)"
node bench/stand-in/queries.mjs

url="${BENCH_URL:-http://127.0.0.1:3000}"
if ! curl -sf --max-time 5 "$url/health" >/dev/null; then
  log "no API answers at $url/health: HTTP benchmarks (bench/*.mjs) skipped."
  log "to run them, start the stack (npm start) in another terminal, or set BENCH_URL=http://host:port"
  exit 0
fi
for bench in bench/*.mjs; do
  log "$bench"
  node "$bench" --url "$url" "$@"
done
