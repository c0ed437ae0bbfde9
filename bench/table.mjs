// The one table of `npm run bench` (scripts/bench.sh): the rows each benchmark wrote with
// --summary-json (figure, value, unit, the ceiling measured in the same run, ratio, goal).
//   node bench/table.mjs <summary.json>...
import { readFileSync } from 'node:fs';

const rows = process.argv.slice(2).flatMap((file) => {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return [];
  }
});
if (rows.length === 0) {
  console.log('no benchmark wrote a summary');
} else {
  console.table(
    rows.map((r) => ({
      figure: r.figure,
      value: r.value === null || r.value === undefined ? 'n/a' : `${r.value} ${r.unit ?? ''}`.trim(),
      'ceiling (same run)': r.ceiling === null || r.ceiling === undefined ? '' : `${r.ceiling} ${r.unit ?? ''}`.trim(),
      ratio: r.ratio ?? '',
      goal: r.goal ?? '',
    })),
  );
}
