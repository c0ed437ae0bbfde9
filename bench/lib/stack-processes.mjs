// The stack's processes as /proc shows them: which belong to this checkout's `npm start` (by their
// command lines and working directory), their resident memory and their CPU ticks. Shared by the
// benches that report the stack's memory and CPU (billing-day.mjs, events.mjs).
import { readFileSync, readdirSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** This checkout (bench/lib/..): its stack's processes run from here. */
const root = realpathSync(join(dirname(fileURLToPath(import.meta.url)), '..', '..'));

function procText(pid, file) {
  try {
    return readFileSync(`/proc/${pid}/${file}`, 'utf8');
  } catch {
    return null;
  }
}

/** Resident memory of a process in MiB (0 when it is gone). */
export function rssMiB(pid) {
  return Number(/VmRSS:\s+(\d+)/.exec(procText(pid, 'status') ?? '')?.[1] ?? 0) / 1024;
}

/** utime + stime of a process in clock ticks (null when it is gone). */
export function cpuTicks(pid) {
  // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
  const stat = procText(pid, 'stat');
  const fields = stat?.slice(stat.lastIndexOf(')') + 2).split(' ');
  return fields ? Number(fields[11]) + Number(fields[12]) : null;
}

function cwdOf(pid) {
  try {
    return realpathSync(`/proc/${pid}/cwd`);
  } catch {
    return null;
  }
}

function roleOf(cmd) {
  if (cmd.includes('dist/src/worker.js')) return 'worker';
  if (cmd.includes('dist/src/server.js')) return 'api';
  if (cmd.includes(' server start-dev ')) return 'temporal_dev_server';
  if (cmd.includes(' Launcher ') && cmd.includes('mongo-java-server')) return 'stand_in'; // scripts/lib.sh start_stand_in
  return null;
}

/** The stack's processes started from this checkout: [{ pid, role }] (the API may be several). */
export function stackProcesses() {
  const found = [];
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    const cmd = procText(pid, 'cmdline')?.replaceAll('\0', ' ');
    const role = cmd ? roleOf(cmd) : null;
    if (role && cwdOf(pid) === root) found.push({ pid, role });
  }
  return found;
}
