// Replays recorded histories (test/workflows/histories, made by record-histories.test.ts) through
// the current workflow code: a change that would break running executions fails here (then guard
// it with patched()).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { temporal } from '@temporalio/proto';
import { Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { beforeAll, describe, expect, it } from 'vitest';
import { bundleWorkflows } from '../support/temporal';

const dir = join(__dirname, 'histories');
const files = readdirSync(dir).filter((f) => f.endsWith('.json'));

describe('workflow replay', () => {
  let bundle: WorkflowBundleWithSourceMap;
  beforeAll(async () => {
    bundle = await bundleWorkflows();
  });

  it('has recorded histories to replay', () => {
    expect(files.length).toBeGreaterThan(0);
  });

  it.each(files)('replays %s without a nondeterminism error', async (file) => {
    // Rebuilt with @temporalio/proto itself (the SDK's JSON helper can meet a second protobufjs copy).
    const history = temporal.api.history.v1.History.fromObject(
      JSON.parse(readFileSync(join(dir, file), 'utf8')) as Record<string, unknown>,
    );
    await expect(Worker.runReplayHistory({ workflowBundle: bundle }, history, file)).resolves.toBeUndefined();
  });
});
