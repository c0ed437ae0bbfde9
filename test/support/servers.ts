// Starting the project's servers from .tools/ for tests and benchmarks. Nothing is downloaded.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import { join, resolve } from 'node:path';
import { SEARCH_ATTRIBUTE_TYPES } from '../../src/temporal/search-attributes';

const ROOT = resolve(__dirname, '..', '..');
const TOOLS = join(ROOT, '.tools');

export const paths = {
  temporalCli: process.env.TEMPORAL_CLI_PATH ?? join(TOOLS, 'venv', 'bin', 'temporal'),
  temporalTestServer: process.env.TEMPORAL_TEST_SERVER_PATH ?? join(TOOLS, 'venv', 'bin', 'temporal-test-server'),
  standInClasspathFile: process.env.MONGO_STAND_IN_CLASSPATH_FILE ?? join(TOOLS, 'mongo-stand-in', 'classpath.txt'),
  standInClasses: process.env.MONGO_STAND_IN_CLASSES ?? join(TOOLS, 'mongo-stand-in', 'classes'),
};

function requireFile(path: string, what: string): void {
  if (!existsSync(path)) throw new Error(`${what} not found at ${path}: run scripts/bootstrap.sh (npm test does it for you)`);
}

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolvePort(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

async function waitForPort(port: number, timeoutMs: number, name: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}:\n${log()}`);
    const open = await new Promise<boolean>((done) => {
      const socket = new Socket();
      socket.once('connect', () => {
        socket.destroy();
        done(true);
      });
      socket.once('error', () => done(false));
      socket.connect(port, '127.0.0.1');
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`${name} did not listen on ${port} within ${timeoutMs} ms:\n${log()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface RunningServer {
  address: string;
  stop(): Promise<void>;
  /** The last few thousand characters the server wrote (the MongoDB stand-in's). */
  log?: () => string;
}

function spawnServer(command: string, args: string[], env: Record<string, string> = {}): { child: ChildProcess; log: () => string } {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return { child, log: () => output };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((done) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    child.once('exit', () => {
      clearTimeout(timer);
      done();
    });
    child.kill('SIGTERM');
  });
}

/**
 * The MongoDB stand-in on a free port: in memory, or in an H2 file (`storage`); `indexes: false`
 * answers every query by a scan (STAND_IN_INDEXES=off), to compare answers with the indexes'; `env`
 * adds to its environment (MONGO_STAND_IN_SCAN_LOG, for one).
 */
export async function startMongoStandIn(
  options: { storage?: string; indexes?: boolean; env?: Record<string, string> } = {},
): Promise<RunningServer> {
  requireFile(paths.standInClasspathFile, 'MongoDB stand-in classpath');
  const port = await freePort();
  const classpath = `${readFileSync(paths.standInClasspathFile, 'utf8').trim()}:${paths.standInClasses}`;
  const args = ['-Xss4m', '-cp', classpath, 'Launcher', '127.0.0.1', String(port), options.storage ?? 'memory'];
  const { child, log } = spawnServer('java', args, { ...(options.indexes === false ? { STAND_IN_INDEXES: 'off' } : {}), ...options.env });
  await waitForPort(port, 60_000, 'MongoDB stand-in', child, log);
  return { address: `mongodb://127.0.0.1:${port}`, stop: () => stopChild(child), log };
}

/** The reports a stand-in's scan log appended to `file` (MONGO_STAND_IN_SCAN_LOG_FILE), one per line; none before the first. */
export function scanLogReports(file: string): string[] {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').filter(Boolean);
  } catch {
    return [];
  }
}

/** A Temporal dev server (in-memory SQLite) with the project's search attributes registered. */
export async function startTemporalDevServer(): Promise<RunningServer> {
  requireFile(paths.temporalCli, 'temporal CLI');
  const port = await freePort();
  const args = [
    'server',
    'start-dev',
    '--headless',
    '--ip',
    '127.0.0.1',
    '--port',
    String(port),
    '--log-level',
    'error',
    '--dynamic-config-value',
    'frontend.enableUpdateWorkflowExecution=true',
    '--dynamic-config-value',
    'frontend.enableUpdateWorkflowExecutionAsyncAccepted=true',
    '--dynamic-config-value',
    'frontend.enableExecuteMultiOperation=true',
    // One partition per task queue, as npm start runs it (scripts/start.sh).
    '--dynamic-config-value',
    'matching.numTaskqueueReadPartitions=1',
    '--dynamic-config-value',
    'matching.numTaskqueueWritePartitions=1',
    // Search attributes read from the server's cache, not from SQLite at every check (as npm start).
    '--dynamic-config-value',
    'system.forceSearchAttributesCacheRefreshOnRead=false',
    // Without CHASM and the per-transition history, as npm start runs it (the service uses neither).
    '--dynamic-config-value',
    'history.enableChasm=false',
    '--dynamic-config-value',
    'history.enableTransitionHistory=false',
    ...SEARCH_ATTRIBUTE_TYPES.flatMap(({ name, type }) => ['--search-attribute', `${name}=${type}`]),
  ];
  const { child, log } = spawnServer(paths.temporalCli, args);
  await waitForPort(port, 60_000, 'Temporal dev server', child, log);
  return { address: `127.0.0.1:${port}`, stop: () => stopChild(child) };
}
