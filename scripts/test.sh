#!/usr/bin/env bash
# The README's test command: type-check, lint, then the whole vitest suite (unit, API, workflow)
# against fresh servers started from .tools/ by test/support/global-setup.ts. Extra arguments go
# to vitest (e.g. scripts/test.sh test/api).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
ensure_bootstrap
if [ $# -eq 0 ]; then
  log "type-check (tsc --noEmit)"
  npx --no-install tsc -p tsconfig.json --noEmit
  log "lint (eslint, prettier --check: npm run format fixes the layout)"
  npx --no-install eslint --max-warnings=0 .
  npx --no-install prettier --check --log-level warn .
fi
log "vitest"
exec npx --no-install vitest run "$@"
