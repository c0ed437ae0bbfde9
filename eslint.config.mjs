// ESLint flat config (ESLint 9, typescript-eslint 8).
//
// Deliberately small: the recommended sets plus the rules that catch real bugs in this code base,
// promises nobody awaits and Node I/O leaking into workflow code. Formatting is not linted.
import { builtinModules } from 'node:module';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

const rootDir = dirname(fileURLToPath(import.meta.url));

const tsFiles = ['**/*.ts', '**/*.mts', '**/*.cts'];
const jsFiles = ['**/*.js', '**/*.mjs', '**/*.cjs'];

// Workflow code is replayed from history and must do exactly the same thing every time, so it may
// import only @temporalio/workflow, src/domain and types. Type-only imports are erased at compile
// time and stay allowed (`import type * as activities from '../activities'`).
const determinismMessage =
  'Workflow code must be deterministic and free of I/O: it is replayed from history inside the ' +
  "worker's sandbox. Do this in an activity and call it through proxyActivities(); import only " +
  '@temporalio/workflow, src/domain and types (`import type`) here.';

const nodeBuiltins = [
  ...new Set([
    ...builtinModules.filter((name) => !name.startsWith('_')),
    // Named explicitly so the list does not depend on the Node version running ESLint.
    'fs',
    'path',
    'os',
    'crypto',
    'http',
    'https',
    'net',
    'child_process',
    'events',
    'stream',
    'util',
    'url',
  ]),
];
const ioLibraries = ['mongoose', 'mongodb', 'fastify', '@temporalio/client', '@temporalio/worker', '@temporalio/activity'];

const workflowImportRestrictions = {
  paths: [...nodeBuiltins, ...ioLibraries].map((name) => ({
    name,
    message: determinismMessage,
    allowTypeImports: true,
  })),
  patterns: [
    {
      group: ['node:*'],
      message: determinismMessage,
      allowTypeImports: true,
    },
    {
      // Subpath imports of the same modules (fs/promises, mongoose/lib/..., fastify/...).
      group: [...nodeBuiltins, ...ioLibraries].map((name) => `${name}/*`),
      message: determinismMessage,
      allowTypeImports: true,
    },
    {
      // Project modules that do I/O: activities, database models, the API, the Temporal client.
      regex: '(^|/)(activities|src/db|src/api|src/temporal/client|src/server|src/worker)(/|$)',
      message: determinismMessage,
      allowTypeImports: true,
    },
  ],
};

export default defineConfig(
  {
    name: 'billing/ignores',
    ignores: ['dist/', 'node_modules/', '.tools/', '.data/', 'coverage/'],
  },

  {
    name: 'billing/linter-options',
    linterOptions: { reportUnusedDisableDirectives: 'warn' },
  },

  js.configs.recommended,
  tseslint.configs.recommended,

  {
    // Type-aware rules over every TypeScript file (src, workflows, activities, test, scripts,
    // bench); the project service finds each file's tsconfig.json.
    name: 'billing/typescript',
    files: tsFiles,
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: rootDir,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      // `_`-prefixed names are intentionally unused (handler signatures, destructuring).
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          args: 'after-used',
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          caughtErrorsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
      // Library boundaries (mongoose, Temporal payloads) sometimes need `any`; keep it visible.
      '@typescript-eslint/no-explicit-any': 'warn',
    },
  },

  {
    // Plain JavaScript (this file, scripts/*.mjs) is not part of any tsconfig: no type-aware rules.
    name: 'billing/javascript',
    files: jsFiles,
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: {
      sourceType: 'module',
      globals: {
        console: 'readonly',
        process: 'readonly',
        Buffer: 'readonly',
        URL: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        fetch: 'readonly',
      },
    },
  },
  {
    name: 'billing/commonjs',
    files: ['**/*.cjs'],
    languageOptions: {
      sourceType: 'commonjs',
      globals: { require: 'readonly', module: 'writable', __dirname: 'readonly', __filename: 'readonly' },
    },
  },

  {
    name: 'billing/workflows',
    files: ['workflows/**/*.ts'],
    rules: {
      // The TypeScript version of the core rule, so that `import type` stays allowed.
      'no-restricted-imports': 'off',
      '@typescript-eslint/no-restricted-imports': ['error', workflowImportRestrictions],
    },
  },
);
