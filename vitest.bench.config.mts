import { defineConfig } from 'vitest/config';
import { experimental_getRunnerTask, type Reporter, type TestModule } from 'vitest/node';

/**
 * Benchmarks of the pure domain (bench/**\/*.bench.ts): `npx vitest bench --run --config
 * vitest.bench.config.mts`, which scripts/bench.sh runs first. No global setup: the domain needs
 * neither MongoDB nor Temporal. Besides vitest's own tables, a summary reporter prints one compact
 * table at the end: mean and p99 per operation in ms, operations/s, and events/s for the benches
 * whose name says how many events one operation handles ("[200000 events/op]"), and whether a
 * bench named with a target ("(target < 5 ms)") met it on the mean.
 */

interface BenchTask {
  name: string;
  type: string;
  tasks?: BenchTask[];
  meta?: { benchmark?: boolean };
  result?: { benchmark?: { mean: number; p99: number; hz: number; sampleCount?: number } };
}

function benchmarks(task: BenchTask): BenchTask[] {
  if (task.meta?.benchmark) return [task];
  return (task.tasks ?? []).flatMap(benchmarks);
}

const ms = (value: number): string => (value < 10 ? value.toFixed(3) : value.toFixed(1));
const grouped = (value: number): string => (value < 100 ? value.toFixed(2) : Math.round(value).toLocaleString('en-US'));

const summaryReporter: Reporter = {
  onTestRunEnd(testModules: readonly TestModule[]) {
    const rows = testModules
      .flatMap((module) => benchmarks(experimental_getRunnerTask(module) as unknown as BenchTask))
      .flatMap((task) => {
        const result = task.result?.benchmark;
        // A bench that threw has no timings; vitest reports its error above.
        if (!result || typeof result.mean !== 'number' || typeof result.p99 !== 'number') return [];
        const events = /\[(\d+) events\/op\]/.exec(task.name);
        const target = /\(target < (\d+(?:\.\d+)?) ms\)/.exec(task.name);
        return [
          {
            bench: task.name,
            'mean ms': ms(result.mean),
            'p99 ms': ms(result.p99),
            'ops/s': grouped(result.hz),
            'events/s': events ? grouped(result.hz * Number(events[1])) : '',
            samples: result.sampleCount ?? '',
            target: target ? (result.mean < Number(target[1]) ? `met (< ${target[1]} ms)` : `MISSED (< ${target[1]} ms)`) : '',
          },
        ];
      });
    if (rows.length === 0) return;
    const columns = Object.keys(rows[0]!) as (keyof (typeof rows)[number])[];
    const width = (column: (typeof columns)[number]) => Math.max(column.length, ...rows.map((row) => String(row[column]).length));
    const line = (cells: string[]) =>
      cells.map((cell, i) => (i === 0 ? cell.padEnd(width(columns[i]!)) : cell.padStart(width(columns[i]!)))).join('  ');
    const out = [
      '',
      'Domain benchmark summary',
      line(columns.map(String)),
      ...rows.map((row) => line(columns.map((column) => String(row[column])))),
      '',
    ];
    process.stdout.write(`${out.join('\n')}\n`);
  },
};

export default defineConfig({
  test: {
    include: [],
    benchmark: {
      include: ['bench/**/*.bench.ts'],
      reporters: ['default', summaryReporter],
    },
  },
});
