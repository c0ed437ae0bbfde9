// The Node.js the project runs on: scripts/lib.sh pins it (NODE_VERSION), the bootstrap installs it
// into .tools/node and every script puts it first on PATH, so this suite runs on it too; the Docker
// image is built on the same major version.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(__dirname, '..', '..');
const lib = readFileSync(join(ROOT, 'scripts', 'lib.sh'), 'utf8');
const pinned = /^NODE_VERSION="([\d.]+)"/m.exec(lib)?.[1];

/** What lib.sh would install here: its npm package and sha512, or '' for the machine's own Node.js. */
const pinnedPackage = execFileSync('bash', ['-c', 'source scripts/lib.sh && pinned_node_package'], {
  cwd: ROOT,
  encoding: 'utf8',
}).trim();

describe('the Node.js runtime', () => {
  it('is the version scripts/lib.sh pins, wherever lib.sh pins one', (ctx) => {
    expect(pinned).toMatch(/^\d+\.\d+\.\d+$/);
    if (pinnedPackage === '') ctx.skip("no pinned Node.js for this platform (or BILLING_SYSTEM_NODE=1): the machine's own runs");
    expect(pinnedPackage).toMatch(/^node-linux-(x64|arm64) sha512-/);
    expect(process.versions.node, 'npm test (scripts/test.sh) runs vitest on .tools/node/bin/node').toBe(pinned);
  });

  it('has the Docker image built on the same major version', () => {
    const image = /^ARG NODE_IMAGE=node:(\d+)-/m.exec(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'))?.[1];
    expect(image).toBe(pinned!.split('.')[0]);
  });
});
