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
//   timeout, and each one records in shared memory when it began (and, when the call names it,
//   for which workflow);
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
  /** The workflow of the last call that named one: its length in [0], then UTF-8 bytes. */
  workflowLength: Int32Array;
  workflow: Uint8Array;
}

/** Milliseconds since the epoch, from a monotonic clock (every thread of the process agrees). */
const now = () => performance.timeOrigin + performance.now();

let installed = false;

/**
 * The workflow a call into the SDK's sandbox is for, when the call names it: the SDK (1.24) puts
 * `[holder, function name, arguments]` in the context's `__temporal_args` before each call; the
 * first argument of `initRuntime` carries `info` (workflow and run ids), of `activate` the run id.
 * Best effort, for the log line only: nothing when the shape differs.
 */
function idsOf(context: vm.Context): { workflowId?: string; runId?: string } {
  const args: unknown = (context as { __temporal_args?: unknown }).__temporal_args;
  if (!Array.isArray(args) || !Array.isArray(args[2])) return {};
  const first = (args[2] as unknown[])[0] as { info?: { workflowId?: unknown; runId?: unknown }; runId?: unknown } | null | undefined;
  if (typeof first !== 'object' || first === null) return {};
  const workflowId = first.info?.workflowId;
  const runId = first.info?.runId ?? first.runId;
  return {
    ...(typeof workflowId === 'string' ? { workflowId } : {}),
    ...(typeof runId === 'string' && runId ? { runId } : {}),
  };
}

/** Workflow ids by run id, for the runs the thread created lately (their activations name the run only). */
const KNOWN_RUNS = 2_000;

/** On a worker thread: calls into vm contexts without Node's per-call timeout, each one recorded. */
function watchCalls(): void {
  const record: ThreadRecord = {
    threadId,
    callStartedAt: new Float64Array(new SharedArrayBuffer(Float64Array.BYTES_PER_ELEMENT)),
    workflowLength: new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT)),
    workflow: new Uint8Array(new SharedArrayBuffer(512)),
  };
  const channel = new BroadcastChannel(CHANNEL);
  channel.postMessage(record);
  channel.close();
  const encoder = new TextEncoder();
  const workflowIds = new Map<string, string>();
  let lastWorkflow: string | undefined;
  const label = (context: vm.Context): string | undefined => {
    const { workflowId, runId } = idsOf(context);
    if (runId === undefined) return workflowId;
    if (workflowId !== undefined && !workflowIds.has(runId)) {
      workflowIds.set(runId, workflowId);
      if (workflowIds.size > KNOWN_RUNS) workflowIds.delete(workflowIds.keys().next().value as string);
    }
    const known = workflowId ?? workflowIds.get(runId);
    return known === undefined ? `run ${runId}` : `${known} (run ${runId})`;
  };
  const runInContext = vm.Script.prototype.runInContext;
  vm.Script.prototype.runInContext = function (this: vm.Script, context, options) {
    const untimed = options?.timeout === undefined ? options : { ...options, timeout: undefined };
    const outer = record.callStartedAt[0] ?? 0;
    // A nested call (none in the SDK today) keeps the outer call's start.
    if (outer === 0) {
      const workflow = label(context);
      if (workflow !== undefined && workflow !== lastWorkflow) {
        lastWorkflow = workflow;
        record.workflowLength[0] = encoder.encodeInto(workflow, record.workflow).written;
      }
      record.callStartedAt[0] = now();
    }
    try {
      return runInContext.call(this, context, untimed);
    } finally {
      if (outer === 0) record.callStartedAt[0] = 0;
    }
  };
}

/** On the main thread: exits the process when a thread's call into its sandbox has run too long. */
function watchThreads(stuckAfterMs: number, onStuck: (thread: number, ranMs: number, workflow: string) => void): void {
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
      if (startedAt === 0 || at - startedAt < stuckAfterMs) continue;
      // A copy: TextDecoder reads no shared memory.
      const workflow = new TextDecoder().decode(thread.workflow.slice(0, thread.workflowLength[0] ?? 0));
      onStuck(thread.threadId, at - startedAt, workflow || 'not known');
    }
  }, CHECK_EVERY_MS).unref();
}

function exitStuck(thread: number, ranMs: number, workflow: string): never {
  console.error(
    `workflow sandbox: a call into it on thread ${thread} has run for ${Math.round(ranMs / 1000)} s without returning ` +
      `(a workflow that never yields holds the workflow thread; its last call was for workflow ${workflow}); ` +
      "exiting so that the worker restarts. Temporal shows that workflow's task timing out in its history.",
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
