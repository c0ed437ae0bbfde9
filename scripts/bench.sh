#!/usr/bin/env bash
# Benchmarks (never timed tests): each prints its numbers and asserts nothing about speed.
#   1. The pure domain, always and first: bench/*.bench.ts in vitest's bench mode
#      (vitest.bench.config.mts), no stack needed. Ends with a compact summary table.
#   2. The MongoDB stand-in's query curve (bench/stand-in/queries.mjs), on a stand-in of its own.
#   3. The HTTP benches, bench/*.mjs, against a running stack (`npm start` in another terminal, or
#      BENCH_URL=http://host:port). Skipped, with a note, when no API answers. The billing day runs
#      at 10,000 subscriptions with 1,000,000 stored events on the stack's worker, then measures its
#      Temporal floor (3,000 boundaries of the same shape without database or billing) as the
#      ceiling of its invoices a second, then runs at 1,000 on a worker of its own to count the
#      database commands per boundary (30 to 50 minutes on 2 cores).
#      bench/entitlements.mjs: p99 of GET /v1/subscriptions/{external_id}/entitlements with one
#      client (goal < 5 ms) and with 8 connections, against GET /health, an authenticated GET and
#      the raw driver findOne, all in the same run.
#   4. One table of every figure with the ceiling measured in the same run, the ratio and the goal.
# Extra arguments go to the HTTP benches (e.g. scripts/bench.sh --duration 30).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

log "domain benchmarks (vitest bench, no stack needed)"
npx --no-install vitest bench --run --config vitest.bench.config.mts

# Each benchmark that can writes its rows for the final table (bench/table.mjs) here.
summaries="$(mktemp -d)"
trap 'rm -rf "$summaries"' EXIT
table() {
  log "summary: figure, ceiling measured in the same run, ratio, goal"
  node bench/table.mjs "$summaries"/*.json
}

log "MongoDB stand-in query curve (its own stand-in, no stack needed)"
node bench/stand-in/queries.mjs --summary-json "$summaries/0-stand-in.json"

url="${BENCH_URL:-http://127.0.0.1:3000}"
if ! curl -sf --max-time 5 "$url/health" >/dev/null; then
  log "no API answers at $url/health: HTTP benchmarks (bench/*.mjs) skipped."
  log "to run them, start the stack (npm start) in another terminal, or set BENCH_URL=http://host:port"
  table
  exit 0
fi
for bench in bench/*.mjs; do
  [ "$bench" = bench/table.mjs ] && continue
  log "$bench"
  extra=()
  grep -q "'summary-json'" "$bench" && extra+=(--summary-json "$summaries/$(basename "$bench" .mjs).json")
  # The billing day of issue 17: 10,000 subscriptions over 1,000,000 stored events, billed by the
  # stack's own worker (its flags, cache and memory are the ones measured). BILLING_DAY_N and
  # BILLING_DAY_STORED_EVENTS make it smaller.
  # Then the day's Temporal floor (--floor): 3,000 boundaries of the same shape with no database and
  # no billing on the same dev server, the ceiling of the day's invoices a second (BILLING_DAY_FLOOR_N).
  [ "$bench" = bench/billing-day.mjs ] &&
    extra+=(--n "${BILLING_DAY_N:-10000}" --stored-events "${BILLING_DAY_STORED_EVENTS:-1000000}" --worker stack
      --floor "${BILLING_DAY_FLOOR_N:-3000}")
  node "$bench" --url "$url" "${extra[@]}" "$@"
  # The database commands per boundary are counted on a worker of the bench's own (its connection's
  # command monitoring): a small day of 1,000, its commands row only.
  if [ "$bench" = bench/billing-day.mjs ]; then
    log "$bench: database commands per boundary (1,000 subscriptions on the bench's own worker)"
    node "$bench" --url "$url" --n 1000 --stored-events 0 --periods 0 --only day --worker own \
      --summary-json "$summaries/billing-day-commands.json" --summary-rows commands "$@"
  fi
done
table
