// Runs the TypeScript sources under plain Node, without a build, for the tests that start the real
// processes: `node --require test/metrics/register-ts.cjs src/server.ts`. Each .ts file is compiled
// to CommonJS on require by @swc/core (installed with @temporalio/worker), as tsc would emit it.
// node:cluster forks with the same --require, so the API's workers load it too.
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS preload: require() is how it loads anything */
const { readFileSync } = require('node:fs');
const { transformSync } = require('@swc/core');

require.extensions['.ts'] = function compileTypeScript(module, filename) {
  const { code } = transformSync(readFileSync(filename, 'utf8'), {
    filename,
    sourceMaps: 'inline',
    jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
    module: { type: 'commonjs' },
  });
  module._compile(code, filename);
};
