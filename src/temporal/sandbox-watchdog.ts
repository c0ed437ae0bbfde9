// The workflow sandbox's deadlock watchdog, one per worker process instead of one per call.
//
// The Temporal SDK runs workflow code in a `vm` context on its workflow thread and passes every
// call into it a `timeout` (its isolateExecutionTimeout, 5 s), so that a workflow that never yields
// fails its task instead of holding the thread. Node implements that timeout with a watchdog thread
// created and joined for each call: about 50 µs of CPU on an idle machine, more on a busy one, and
// a boundary of the billing day makes about 9 such calls. Without them the billing day bills about
// 9 % more invoices a second (docs/performance.md, "The workflow sandbox's watchdog").
//
// Installed by sandbox-watchdog-preload.ts, which the worker process loads with `node --require`
// (scripts/start.sh, docker-compose.yml) so that it runs in every thread of the process:
// - on a worker thread (the SDK's workflow thread), calls into a `vm` context run without Node's
//   timeout, and each one records in shared memory when it began;
// - on the main thread, a timer looks at those records every second. When one call has run for
//   STUCK_CALL_MS, the workflow thread is lost to a workflow that never yields (Node cannot stop
//   that call from outside it): the process logs it and exits, so that whatever supervises it
//   restarts it. Temporal then shows that workflow's task timing out in its history.
// A worker started without it keeps the SDK's own timeouts.
import { BroadcastChannel, isMainThread, threadId } from 'node:worker_threads';
import vm from 'node:vm';

/** A call into the sandbox that runs this long means a workflow that never yields. */
export const STUCK_CALL_MS = 10_000;
const CHANNEL = 'billing:workflow-sandbox-watchdog';
const CHECK_EVERY_MS = 1_000;

interface ThreadRecord {
  threadId: number;
  /** [0]: when the call running now began (ms since the epoch), 0 when none runs. */
  callStartedAt: Float64Array;
}

/** Milliseconds since the epoch, from a monotonic clock (every thread of the process agrees). */
const now = () => performance.timeOrigin + performance.now();

let installed = false;

/** On a worker thread: calls into vm contexts without Node's per-call timeout, each one recorded. */
function watchCalls(): void {
  const callStartedAt = new Float64Array(new SharedArrayBuffer(Float64Array.BYTES_PER_ELEMENT));
  const channel = new BroadcastChannel(CHANNEL);
  channel.postMessage({ threadId, callStartedAt } satisfies ThreadRecord);
  channel.close();
  const runInContext = vm.Script.prototype.runInContext;
  vm.Script.prototype.runInContext = function (this: vm.Script, context, options) {
    const untimed = options?.timeout === undefined ? options : { ...options, timeout: undefined };
    const outer = callStartedAt[0] ?? 0;
    // A nested call (none in the SDK today) keeps the outer call's start.
    if (outer === 0) callStartedAt[0] = now();
    try {
      return runInContext.call(this, context, untimed);
    } finally {
      if (outer === 0) callStartedAt[0] = 0;
    }
  };
}

/** On the main thread: exits the process when a thread's call into its sandbox has run too long. */
function watchThreads(stuckAfterMs: number, onStuck: (thread: number, ranMs: number) => void): void {
  const threads: ThreadRecord[] = [];
  const channel = new BroadcastChannel(CHANNEL);
  channel.unref();
  channel.onmessage = (event) => threads.push((event as { data: ThreadRecord }).data);
  let lastCheck = now();
  setInterval(() => {
    const at = now();
    // A late check (the process was paused, or the machine starved it) judges nothing: the next does.
    const late = at - lastCheck > 2 * CHECK_EVERY_MS;
    lastCheck = at;
    if (late) return;
    for (const thread of threads) {
      const startedAt = thread.callStartedAt[0] ?? 0;
      if (startedAt !== 0 && at - startedAt >= stuckAfterMs) onStuck(thread.threadId, at - startedAt);
    }
  }, CHECK_EVERY_MS).unref();
}

function exitStuck(thread: number, ranMs: number): never {
  console.error(
    `workflow sandbox: a call into it on thread ${thread} has run for ${Math.round(ranMs / 1000)} s without returning ` +
      '(a workflow that never yields holds the workflow thread); exiting so that the worker restarts. ' +
      "Temporal shows that workflow's task timing out in its history.",
  );
  process.exit(70);
}

/**
 * Idempotent; in each thread of the process (sandbox-watchdog-preload.ts calls it with the default;
 * tests pass a shorter limit).
 */
export function installSandboxWatchdog(stuckAfterMs = STUCK_CALL_MS): void {
  if (installed) return;
  installed = true;
  if (isMainThread) watchThreads(stuckAfterMs, exitStuck);
  else watchCalls();
}
