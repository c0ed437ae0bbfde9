// The npm registry mirror of the build machines lacks some platform builds of optional native
// packages (e.g. @swc/core-darwin-arm64), so `npm install` leaves them out of package-lock.json and
// `npm ci` then refuses the lock as out of sync. This adds an entry for each missing optional
// platform package with its os/cpu guard, so npm skips it on other platforms without fetching it.
// Run it after `npm install` whenever the lock changes: node scripts/fix-lock-optional.mjs
import { readFileSync, writeFileSync } from 'node:fs';

const lockPath = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(readFileSync(lockPath, 'utf8'));
const platform = (name) => {
  const os = ['darwin', 'linux', 'win32', 'freebsd', 'android'].find((o) => name.includes(o));
  const cpu = ['arm64', 'x64', 'ia32', 'arm', 'ppc64', 's390x', 'riscv64'].find((c) => name.includes(`-${c}`));
  return os && cpu ? { os: [os], cpu: [cpu] } : null;
};
let added = 0;
for (const [path, entry] of Object.entries(lock.packages)) {
  for (const [dep, version] of Object.entries(entry.optionalDependencies ?? {})) {
    const key = `node_modules/${dep}`;
    const guard = platform(dep);
    if (lock.packages[key] || !guard) continue;
    lock.packages[key] = { version, ...guard, optional: true, license: entry.license };
    added++;
    void path;
  }
}
const sorted = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b))));
lock.packages = sorted;
writeFileSync(lockPath, JSON.stringify(lock, null, 2) + '\n');
console.log(`fix-lock-optional: added ${added} platform-guarded optional entries`);
