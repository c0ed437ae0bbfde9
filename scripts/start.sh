#!/usr/bin/env bash
# The README's start command: the whole dev stack on this machine.
#   MongoDB stand-in (H2 file under .data/)  unless MONGODB_URI is set
#   Temporal dev server + Web UI (SQLite under .data/)  unless TEMPORAL_ADDRESS is set
#   the worker and the API (port 3000)
# Ctrl-C stops every process it started.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
ensure_bootstrap

: "${HOST:=127.0.0.1}"
: "${PORT:=3000}"
: "${MONGO_PORT:=27017}"
: "${TEMPORAL_PORT:=7233}"
: "${TEMPORAL_UI_PORT:=8233}"
: "${TEMPORAL_NAMESPACE:=default}"
: "${TEMPORAL_TASK_QUEUE:=billing}"
mkdir -p "$DATA/logs"

pids=()
stop_all() {
  trap - INT TERM EXIT
  if [ ${#pids[@]} -gt 0 ]; then
    log "stopping ${#pids[@]} processes"
    # Reverse order: API and worker first, then the servers they use.
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  fi
}
trap 'stop_all; exit 130' INT TERM
trap stop_all EXIT

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

log "building (tsc)"
npm run --silent build

if [ -z "${MONGODB_URI:-}" ]; then
  port_busy "$MONGO_PORT" && die "port $MONGO_PORT is in use: stop what listens there, or set MONGO_PORT or MONGODB_URI"
  log "MongoDB stand-in on 127.0.0.1:$MONGO_PORT (data: .data/mongo.mv, log: .data/logs/mongo.log)"
  start_stand_in 127.0.0.1 "$MONGO_PORT" "$DATA/mongo.mv" "$DATA/logs/mongo.log"
  pids+=($!)
  wait_for_port 127.0.0.1 "$MONGO_PORT" 60 "MongoDB stand-in"
  export MONGODB_URI="mongodb://127.0.0.1:$MONGO_PORT/billing"
fi

ui_line="(Temporal UI: see your Temporal deployment)"
# The entity workflows' search attributes (src/temporal/search-attributes.ts), name=type.
SEARCH_ATTRIBUTES=(BillingOrganizationId=Keyword BillingCustomerId=Keyword BillingEntityType=Keyword BillingStatus=Keyword
  BillingCustomerExternalId=Keyword BillingSubscriptionExternalId=Keyword BillingPlanCode=Keyword BillingInvoiceNumber=Keyword
  BillingAmountDueCents=Int)
if [ -z "${TEMPORAL_ADDRESS:-}" ]; then
  port_busy "$TEMPORAL_PORT" && die "port $TEMPORAL_PORT is in use: stop what listens there, or set TEMPORAL_PORT or TEMPORAL_ADDRESS"
  log "Temporal dev server on 127.0.0.1:$TEMPORAL_PORT, UI on $TEMPORAL_UI_PORT (data: .data/temporal.sqlite, log: .data/logs/temporal.log)"
  sa_flags=()
  for attr in "${SEARCH_ATTRIBUTES[@]}"; do sa_flags+=(--search-attribute "$attr"); done
  # SQLite in WAL mode, synced at checkpoints (TEMPORAL_SQLITE_PRAGMAS, space-separated): a commit
  # survives a crash of any process; only a power cut can lose the last commits (docs/performance.md).
  # One partition per task queue (Temporal's default is 4, for many matching hosts): on this single
  # process a billing day ran at 37 to 38 invoices/s instead of 32, the server's CPU per invoice
  # 15 ms instead of 20 (docs/performance.md, "Time-ordered ids, one task queue partition").
  # The dev server turns on system.forceSearchAttributesCacheRefreshOnRead (Temporal: "should not be
  # turned on in production"): every search-attribute check read the cluster metadata from SQLite,
  # 15 reads and 5 namespace reads per invoice on a billing day. Off, the server keeps them for 60 s
  # (docs/performance.md, "The dev server's search-attribute cache").
  # CHASM (standalone activities and Nexus operations, the new scheduler) and the per-transition
  # history (for replication between clusters) are on in the dev server; the service uses neither,
  # and with both off a billing day took about 1.2 ms less CPU per invoice, 3 % more invoices a
  # second (docs/performance.md, "`npm run bench` on Node.js 24, and what does not cost the day").
  # The test suite's dev server (test/support/servers.ts) runs with the same two values.
  # TEMPORAL_DYNAMIC_CONFIG (space-separated KEY=JSON_VALUE) adds or overrides dynamic config values.
  extra_flags=()
  for kv in history.enableChasm=false history.enableTransitionHistory=false ${TEMPORAL_DYNAMIC_CONFIG:-}; do
    extra_flags+=(--dynamic-config-value "$kv")
  done
  pragma_flags=()
  for pragma in ${TEMPORAL_SQLITE_PRAGMAS:-journal_mode=wal synchronous=normal}; do pragma_flags+=(--sqlite-pragma "$pragma"); done
  "$TEMPORAL_CLI_PATH" server start-dev --ip 127.0.0.1 --port "$TEMPORAL_PORT" --ui-port "$TEMPORAL_UI_PORT" \
    --namespace "$TEMPORAL_NAMESPACE" --db-filename "$DATA/temporal.sqlite" --log-level warn "${pragma_flags[@]}" \
    --dynamic-config-value frontend.enableUpdateWorkflowExecution=true \
    --dynamic-config-value frontend.enableUpdateWorkflowExecutionAsyncAccepted=true \
    --dynamic-config-value frontend.enableExecuteMultiOperation=true \
    --dynamic-config-value matching.numTaskqueueReadPartitions=1 \
    --dynamic-config-value matching.numTaskqueueWritePartitions=1 \
    --dynamic-config-value system.forceSearchAttributesCacheRefreshOnRead=false \
    "${extra_flags[@]}" "${sa_flags[@]}" >"$DATA/logs/temporal.log" 2>&1 &
  pids+=($!)
  wait_for_port 127.0.0.1 "$TEMPORAL_PORT" 60 "Temporal dev server"
  export TEMPORAL_ADDRESS="127.0.0.1:$TEMPORAL_PORT"
  until "$TEMPORAL_CLI_PATH" operator cluster health --address "$TEMPORAL_ADDRESS" 2>/dev/null | grep -q SERVING; do sleep 0.3; done
  # With an existing SQLite file the flags above do not reach the namespace: register what it lacks.
  # The history service checks a workflow's search attributes against its own copy, refreshed every
  # 60 s: after adding one, wait that long before any workflow may set it.
  known="$("$TEMPORAL_CLI_PATH" operator search-attribute list --address "$TEMPORAL_ADDRESS" \
    --namespace "$TEMPORAL_NAMESPACE" -o json 2>/dev/null || true)"
  added=()
  for attr in "${SEARCH_ATTRIBUTES[@]}"; do
    grep -q "\"${attr%%=*}\"" <<<"$known" && continue
    "$TEMPORAL_CLI_PATH" operator search-attribute create --address "$TEMPORAL_ADDRESS" --namespace "$TEMPORAL_NAMESPACE" \
      --name "${attr%%=*}" --type "${attr#*=}" >/dev/null 2>&1 || true
    added+=("${attr%%=*}")
  done
  if [ "${#added[@]}" -gt 0 ]; then
    log "search attributes added to the existing Temporal data (${added[*]}): waiting 60 s for the server's cache"
    sleep 61
  fi
  ui_line="Temporal UI:  http://127.0.0.1:$TEMPORAL_UI_PORT"
fi

# Integration secrets are sealed with SECRETS_KEY: generated once into .data/ when unset, so the
# same key opens them after a restart. Integrations may point at sandboxes and local fakes here.
if [ -z "${SECRETS_KEY:-}" ]; then
  if [ ! -s "$DATA/secrets.key" ]; then
    (umask 077 && node -e "process.stdout.write(require('crypto').randomBytes(32).toString('hex'))" >"$DATA/secrets.key")
    log "generated SECRETS_KEY into .data/secrets.key"
  fi
  SECRETS_KEY="$(cat "$DATA/secrets.key")"
fi
: "${PAYMENT_PROVIDER_BASE_URL_OVERRIDE:=true}"
export SECRETS_KEY PAYMENT_PROVIDER_BASE_URL_OVERRIDE

# One API process per core on this machine (each shares the listening socket).
: "${API_WORKERS:=$(nproc 2>/dev/null || echo 1)}"
export HOST PORT TEMPORAL_NAMESPACE TEMPORAL_TASK_QUEUE API_WORKERS
if [ "${METRICS_ENABLED:-true}" != "false" ]; then
  port_busy "${WORKER_METRICS_PORT:-9465}" &&
    die "port ${WORKER_METRICS_PORT:-9465} (the worker's metrics) is in use: stop what listens there, or set WORKER_METRICS_PORT (or METRICS_ENABLED=false)"
fi
log "worker (log: .data/logs/worker.log)"
# The worker's memory (docs/performance.md, "Worker memory"): a bounded V8 heap for each of its
# isolates (the activities' and the workflow sandbox's), and glibc malloc returning freed memory.
# Node.js 24 lets each isolate's young generation grow to 192 MiB: 96 (semi-spaces of 32 MiB) keeps
# its CPU gain and the worker under 512 MiB (docs/performance.md, "Node.js 24").
: "${WORKER_NODE_FLAGS:=--max-old-space-size=256 --max-semi-space-size=32}"
# shellcheck disable=SC2086 # WORKER_NODE_FLAGS holds several flags
MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}" MALLOC_TRIM_THRESHOLD_="${MALLOC_TRIM_THRESHOLD_:-131072}" \
  MALLOC_MMAP_THRESHOLD_="${MALLOC_MMAP_THRESHOLD_:-131072}" \
  node $WORKER_NODE_FLAGS dist/src/worker.js >"$DATA/logs/worker.log" 2>&1 &
pids+=($!)
log "API (log: .data/logs/api.log)"
# The API's young generation as on Node.js 20 (48 MiB), and a bounded old generation: without the
# bound V8 let an API process under single-event load grow past 450 MiB of garbage it had not yet
# collected (docs/performance.md, "The API's heap bound").
: "${API_NODE_FLAGS:=--max-old-space-size=256 --max-semi-space-size=16}"
# shellcheck disable=SC2086 # API_NODE_FLAGS holds several flags
node $API_NODE_FLAGS dist/src/server.js >"$DATA/logs/api.log" 2>&1 &
pids+=($!)
wait_for_port "$HOST" "$PORT" 60 "API" || { tail -20 "$DATA/logs/api.log" >&2; exit 1; }

metrics_line="Metrics:      off (METRICS_ENABLED=false)"
if [ "${METRICS_ENABLED:-true}" != "false" ]; then
  metrics_line="Metrics:      http://$HOST:$PORT/metrics (API), http://$HOST:${WORKER_METRICS_PORT:-9465}/metrics (worker)"
fi

cat <<INFO

  Billing service is up.
  API:          http://$HOST:$PORT/v1
  API docs:     http://$HOST:$PORT/docs   (OpenAPI: http://$HOST:$PORT/docs/openapi.json)
  $ui_line
  MongoDB:      $MONGODB_URI
  Temporal:     $TEMPORAL_ADDRESS (namespace $TEMPORAL_NAMESPACE, task queue $TEMPORAL_TASK_QUEUE)
  $metrics_line
  Logs:         .data/logs/

  Create an organization:  curl -s -X POST http://$HOST:$PORT/v1/organizations -H 'content-type: application/json' -d '{"name":"Acme"}'
  Press Ctrl-C to stop everything.

INFO

# Run until Ctrl-C, or until one of the processes dies (then stop the rest and fail).
set +e
wait -n "${pids[@]}"
status=$?
log "a process exited (status $status); see .data/logs/"
exit "$status"
