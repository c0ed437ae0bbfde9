// The worker's sandbox watchdog (src/temporal/sandbox-watchdog.ts) in child processes loaded the way
// scripts/start.sh loads it (`node --require`): calls into a vm context on a worker thread run
// without Node's per-call timeout, and a call that never returns ends the process with a message.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';

const root = join(__dirname, '..', '..');
const STUCK_MS = 500;
let dir: string;
let preload: string;

beforeAll(() => {
  // Inside node_modules, so that the SDK's bundler finds @temporalio/workflow from the workflows file.
  const cache = join(root, 'node_modules', '.cache');
  mkdirSync(cache, { recursive: true });
  dir = mkdtempSync(join(cache, 'sandbox-watchdog-'));
  // The module as the build compiles it, and a preload like sandbox-watchdog-preload.ts with a short limit.
  const source = readFileSync(join(root, 'src', 'temporal', 'sandbox-watchdog.ts'), 'utf8');
  const { outputText } = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
  });
  writeFileSync(join(dir, 'sandbox-watchdog.js'), outputText);
  preload = join(dir, 'preload.js');
  writeFileSync(preload, `require('./sandbox-watchdog.js').installSandboxWatchdog(${STUCK_MS});\n`);
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Exit {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(args: string[], env: Record<string, string> = {}): { exited: Promise<Exit>; stdout: () => string } {
  const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<Exit>((resolve) => child.on('exit', (code) => resolve({ code, stdout, stderr })));
  return { exited, stdout: () => stdout };
}

describe('calls into a vm context on a worker thread', () => {
  // The thread runs an endless script with a 100 ms timeout, as the SDK passes its 5 s.
  const script = (file: string) => {
    writeFileSync(
      file,
      `const { Worker } = require('node:worker_threads');
       const thread = new Worker(\`
         const vm = require('node:vm');
         const { parentPort } = require('node:worker_threads');
         const context = vm.createContext({});
         parentPort.postMessage('quick call: ' + vm.runInContext('6 * 7', context, { timeout: 100 }));
         try { vm.runInContext('for (;;) {}', context, { timeout: 100 }); parentPort.postMessage('returned'); }
         catch (err) { parentPort.postMessage('stopped by Node: ' + err.message); }
       \`, { eval: true });
       thread.on('message', (message) => console.log(message));
       thread.on('exit', () => process.exit(0));`,
    );
    return file;
  };

  it('without the watchdog, Node stops the endless call at its timeout', async () => {
    const { code, stdout } = await run([script(join(dir, 'plain.js'))]).exited;
    expect(code).toBe(0);
    expect(stdout).toContain('quick call: 42');
    expect(stdout).toContain('stopped by Node: Script execution timed out after 100ms');
  });

  it('with it, the call runs untimed and the watchdog ends the process once it has run too long', async () => {
    const started = Date.now();
    const { code, stdout, stderr } = await run(['--require', preload, script(join(dir, 'watched.js'))]).exited;
    expect(code).toBe(70);
    expect(stdout).toContain('quick call: 42');
    expect(stdout).not.toContain('stopped by Node');
    expect(stderr).toMatch(/workflow sandbox: a call into it on thread \d+ has run for \d+ s without returning/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(STUCK_MS);
  });

  it('a call shorter than the limit is left alone', async () => {
    const file = join(dir, 'short.js');
    writeFileSync(
      file,
      `const { Worker } = require('node:worker_threads');
       const thread = new Worker(\`
         const vm = require('node:vm');
         const { parentPort } = require('node:worker_threads');
         const context = vm.createContext({});
         let n = 0;
         for (let i = 0; i < 200; i++) n += vm.runInContext('(() => { const end = Date.now() + 1; while (Date.now() < end); return 1; })()', context, { timeout: 50 });
         parentPort.postMessage('calls: ' + n);
       \`, { eval: true });
       thread.on('message', (message) => console.log(message));
       thread.on('exit', () => setTimeout(() => process.exit(0), ${2 * STUCK_MS}));`,
    );
    const { code, stdout, stderr } = await run(['--require', preload, file]).exited;
    expect(stderr).toBe('');
    expect(stdout).toContain('calls: 200');
    expect(code).toBe(0);
  });
});

describe("a Temporal worker's workflow thread", () => {
  let connection: Connection;
  let client: Client;
  const taskQueue = `sandbox-watchdog-${randomUUID()}`;
  const spinning = `spin-${randomUUID()}`;

  beforeAll(async () => {
    connection = await Connection.connect({ address: inject('temporalAddress') });
    client = new Client({ connection, namespace: 'default' });
  });

  afterAll(async () => {
    await client?.workflow
      .getHandle(spinning)
      .terminate('test over')
      .catch(() => undefined);
    await connection?.close();
  });

  it('runs workflows, and a workflow that never yields ends the worker with a message', async () => {
    const workflows = join(dir, 'workflows.js');
    writeFileSync(workflows, `exports.quick = async (x) => x * 2;\nexports.spin = async () => { for (;;) {} };\n`);
    const workerScript = join(dir, 'worker.js');
    writeFileSync(
      workerScript,
      `const { Worker, NativeConnection } = require(${JSON.stringify(join(root, 'node_modules', '@temporalio', 'worker'))});
       (async () => {
         const connection = await NativeConnection.connect({ address: ${JSON.stringify(inject('temporalAddress'))} });
         const worker = await Worker.create({ connection, taskQueue: ${JSON.stringify(taskQueue)}, workflowsPath: ${JSON.stringify(workflows)} });
         console.log('polling');
         await worker.run();
       })().catch((err) => { console.error(err); process.exit(1); });`,
    );
    const worker = run(['--require', preload, workerScript]);
    // A workflow task on the patched workflow thread completes as usual.
    const result = await client.workflow.execute('quick', { taskQueue, workflowId: `quick-${randomUUID()}`, args: [21] });
    expect(result).toBe(42);
    expect(worker.stdout()).toContain('polling');

    await client.workflow.start('spin', { taskQueue, workflowId: spinning });
    const { code, stderr } = await worker.exited;
    expect(code).toBe(70);
    expect(stderr).toMatch(/workflow sandbox: a call into it on thread \d+ has run for \d+ s without returning/);
  }, 120_000);
});

describe('the worker process', () => {
  it('is started with the watchdog by npm start and by docker compose', () => {
    const preloadArgs = ['--require', './dist/src/temporal/sandbox-watchdog-preload.js'];
    const startScript = readFileSync(join(root, 'scripts', 'start.sh'), 'utf8');
    expect(startScript).toMatch(
      /node \$WORKER_NODE_FLAGS --require \.\/dist\/src\/temporal\/sandbox-watchdog-preload\.js dist\/src\/worker\.js/,
    );
    const compose = readFileSync(join(root, 'docker-compose.yml'), 'utf8');
    expect(compose).toContain(
      `command: ["node", "--max-old-space-size=256", ${preloadArgs.map((a) => JSON.stringify(a)).join(', ')}, "dist/src/worker.js"]`,
    );
    // The preload's source, compiled into dist/ by the build.
    expect(readFileSync(join(root, 'src', 'temporal', 'sandbox-watchdog-preload.ts'), 'utf8')).toContain(
      'installSandboxWatchdog(STUCK_CALL_MS)',
    );
  });
});
