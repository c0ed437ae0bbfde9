#!/usr/bin/env bash
# Benchmarks (never timed tests): run against a running stack (`npm start` in another terminal, or
# BENCH_URL=http://host:port). Each prints its numbers as JSON.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
url="${BENCH_URL:-http://127.0.0.1:3000}"
curl -sf "$url/health" >/dev/null || die "no API answers at $url: start the stack first (npm start) or set BENCH_URL"
for bench in bench/*.mjs; do
  log "$bench"
  node "$bench" --url "$url" "$@"
done
