// Turning tracing on adds the OpenTelemetry interceptors to the workflow sandbox
// (workflows/interceptors.ts). Running workflows were started without them: every recorded history
// (test/workflows/histories) must replay through the traced bundle, and replaying exports nothing
// (Temporal calls no sink while replaying).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Resource } from '@opentelemetry/resources';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { makeWorkflowExporter } from '@temporalio/interceptors-opentelemetry';
import { temporal } from '@temporalio/proto';
import { bundleWorkflowCode, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { beforeAll, describe, expect, it } from 'vitest';
import { workflowInterceptorsPath, workflowsPath } from '../../src/temporal/worker';

const dir = join(__dirname, '..', 'workflows', 'histories');
const files = readdirSync(dir).filter((f) => f.endsWith('.json'));

describe('workflow replay with the tracing interceptors', () => {
  let bundle: WorkflowBundleWithSourceMap;
  const exporter = new InMemorySpanExporter();
  const sinks = { exporter: makeWorkflowExporter(new SimpleSpanProcessor(exporter), new Resource({ 'service.name': 'replay' })) };

  beforeAll(async () => {
    bundle = await bundleWorkflowCode({ workflowsPath: workflowsPath(), workflowInterceptorModules: [workflowInterceptorsPath()] });
  });

  it('bundles the interceptors module next to the workflows', () => {
    expect(workflowInterceptorsPath()).toMatch(/workflows[/\\]interceptors\.[jt]s$/);
    expect(files.length).toBeGreaterThan(0);
  });

  it.each(files)('replays %s without a nondeterminism error', async (file) => {
    const history = temporal.api.history.v1.History.fromObject(
      JSON.parse(readFileSync(join(dir, file), 'utf8')) as Record<string, unknown>,
    );
    await expect(Worker.runReplayHistory({ workflowBundle: bundle, sinks }, history, file)).resolves.toBeUndefined();
    expect(exporter.getFinishedSpans()).toEqual([]);
  });
});
