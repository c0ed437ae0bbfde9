import { existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import type { Activities } from '../../activities';
import type { Tracing } from '../tracing';

/**
 * The workflows module: TypeScript source under vitest/tsx, the compiled file under dist/.
 * Temporal bundles it (and only it) into the workflow sandbox.
 */
export function workflowsPath(): string {
  const base = join(__dirname, '..', '..', 'workflows', 'index');
  for (const ext of ['.ts', '.js']) if (existsSync(base + ext)) return base + ext;
  throw new Error(`workflows module not found next to ${base}`);
}

/** The workflow sandbox's OpenTelemetry interceptors (workflows/interceptors.ts), bundled only when tracing is on. */
export function workflowInterceptorsPath(): string {
  return workflowsPath().replace(/index(\.[jt]s)$/, 'interceptors$1');
}

export interface WorkerSettings {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  activities: Activities;
  /**
   * A prebuilt bundle (tests bundle once per file); default: bundle workflowsPath() now. With
   * tracing, bundle it with `workflowInterceptorModules: [workflowInterceptorsPath()]`.
   */
  workflowBundle?: WorkerOptions['workflowBundle'];
  maxConcurrentActivityTaskExecutions?: number;
  /**
   * Workflows kept in memory between their tasks (default 100). An evicted one is replayed from
   * its history at its next task; unbounded, a billing day's 10,000 subscriptions held 2.4 GiB,
   * and 1 GiB at 1000. On a billing day every boundary is a different workflow, so 50 bill as fast
   * as 250 (docs/performance.md, "Worker memory").
   */
  maxCachedWorkflows?: number;
  /** Workflow tasks run at once (the SDK's default, 40, when unset); Temporal refuses more than maxCachedWorkflows. */
  maxConcurrentWorkflowTaskExecutions?: number;
  /** Tracing is on: RunActivity spans, and the workflow interceptors with their span sink. */
  tracing?: Tracing;
}

export async function createWorker(settings: WorkerSettings): Promise<Worker> {
  const maxCachedWorkflows = settings.maxCachedWorkflows ?? 100;
  const tasks = settings.maxConcurrentWorkflowTaskExecutions;
  return Worker.create({
    connection: settings.connection,
    namespace: settings.namespace,
    taskQueue: settings.taskQueue,
    activities: settings.activities,
    ...(settings.workflowBundle ? { workflowBundle: settings.workflowBundle } : { workflowsPath: workflowsPath() }),
    maxConcurrentActivityTaskExecutions: settings.maxConcurrentActivityTaskExecutions ?? 50,
    maxCachedWorkflows,
    ...(tasks !== undefined
      ? { maxConcurrentWorkflowTaskExecutions: maxCachedWorkflows > 0 ? Math.min(tasks, maxCachedWorkflows) : tasks }
      : {}),
    shutdownGraceTime: '10s',
    ...(settings.tracing ? tracingOptions(settings.tracing, settings.workflowBundle === undefined) : {}),
  });
}

/**
 * Each activity runs in a RunActivity span, child of the workflow's StartActivity span (from the
 * activity's headers); spans made in the sandbox come out through the `exporter` sink into the
 * process's span processor. (The interceptors use the tracer provider startTracing registered.)
 */
function tracingOptions(tracing: Tracing, bundleInterceptors: boolean): Pick<WorkerOptions, 'interceptors' | 'sinks'> {
  return {
    interceptors: {
      activity: [
        (ctx) => ({
          inbound: new OpenTelemetryActivityInboundInterceptor(ctx),
          outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
        }),
      ],
      // A prebuilt bundle already holds them (Temporal ignores this list, with a warning, then).
      ...(bundleInterceptors ? { workflowModules: [workflowInterceptorsPath()] } : {}),
    },
    sinks: { exporter: makeWorkflowExporter(tracing.spanProcessor, tracing.resource) },
  };
}

export { NativeConnection };
