// The layers of docs/architecture.md, checked on the source: nothing below src/api imports from it,
// src/resources and src/domain stay below the services, and no runtime import runs in a circle.
// (Type-only imports are left out of the circle check: a workflow names its activities' types and
// a messages module its workflow's, which Temporal's typed proxies need and which vanish at run time.)
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(__dirname, '../..');
const IMPORT = /^(?:import|export)\s+(type\s+)?(?:[^;]*?\sfrom\s+)?'(\.[^']+)'/gms;

interface SourceImport {
  from: string;
  to: string;
  typeOnly: boolean;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(ROOT, path)).isDirectory()) return sourceFiles(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

const files = new Set(['src', 'activities', 'workflows'].flatMap(sourceFiles));

const imports: SourceImport[] = [...files].flatMap((from) =>
  [...readFileSync(join(ROOT, from), 'utf8').matchAll(IMPORT)].flatMap((m) => {
    const target = normalize(join(dirname(from), m[2]!));
    const to = [`${target}.ts`, join(target, 'index.ts')].find((candidate) => files.has(candidate));
    return to ? [{ from, to, typeOnly: m[1] !== undefined }] : [];
  }),
);

const under = (file: string, dir: string) => !relative(dir, file).startsWith('..');

describe('layers', () => {
  it('reads the imports of every source file (a check of the check)', () => {
    expect(files.size).toBeGreaterThan(100);
    expect(imports.length).toBeGreaterThan(500);
    expect(imports).toContainEqual({ from: 'src/api/routes/invoices.ts', to: 'src/resources/invoice.ts', typeOnly: false });
  });

  it('has no import into src/api from below it (only the server entry point builds the app)', () => {
    const upward = imports.filter((i) => under(i.to, 'src/api') && !under(i.from, 'src/api') && i.from !== 'src/server.ts');
    expect(upward).toEqual([]);
  });

  it.each([
    ['src/resources', ['src/resources', 'src/db', 'src/domain']],
    ['src/domain', ['src/domain']],
    ['src/db', ['src/db', 'src/domain', 'src/ids.ts', 'src/errors.ts']],
  ])('keeps %s on the layers below it (at run time: a mapper may name the type it maps)', (layer, allowed) => {
    const outside = imports.filter((i) => !i.typeOnly && under(i.from, layer) && !allowed.some((a) => under(i.to, a)));
    expect(outside).toEqual([]);
  });

  it('has no runtime import circle', () => {
    const graph = new Map<string, string[]>([...files].map((f) => [f, []]));
    for (const i of imports) if (!i.typeOnly) graph.get(i.from)!.push(i.to);
    const state = new Map<string, 'open' | 'done'>();
    const circles: string[][] = [];
    const visit = (file: string, path: string[]) => {
      state.set(file, 'open');
      for (const next of graph.get(file)!) {
        if (state.get(next) === 'open') circles.push([...path.slice(path.indexOf(next)), next]);
        else if (!state.has(next)) visit(next, [...path, next]);
      }
      state.set(file, 'done');
    };
    for (const file of files) if (!state.has(file)) visit(file, [file]);
    expect(circles).toEqual([]);
  });
});
