// A strict reader of the Prometheus text exposition format 0.0.4 (no parser package is installed):
// it throws on anything a Prometheus server would refuse or that breaks the format's rules, and
// returns the families with their samples for the tests to read values from.
//
// Checked: metric and label names, label value escapes, numeric values, one HELP and one TYPE per
// family before its samples, a family's samples together, no series twice, and histograms whole
// (an `le` on every bucket, +Inf present, counts never decreasing, _count equal to the +Inf bucket).

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: MetricType;
  help: string | null;
  samples: Sample[];
}

export type Exposition = Map<string, Family>;

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set<MetricType>(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/** A float as Prometheus reads it (Go's ParseFloat: NaN and Inf in any case; prom-client writes "Nan"). */
function parseValue(text: string, line: number): number {
  const special = text.toLowerCase();
  if (special === 'nan') return Number.NaN;
  if (special === '+inf' || special === 'inf' || special === '+infinity' || special === 'infinity') return Number.POSITIVE_INFINITY;
  if (special === '-inf' || special === '-infinity') return Number.NEGATIVE_INFINITY;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`line ${line}: bad value "${text}"`);
  return Number(text);
}

/** `{a="x",b="y"}` from position `at` (the brace); returns the labels and the position after `}`. */
function parseLabels(text: string, at: number, line: number): { labels: Record<string, string>; end: number } {
  const labels: Record<string, string> = {};
  let i = at + 1;
  for (;;) {
    while (text[i] === ' ') i++;
    if (text[i] === '}') return { labels, end: i + 1 };
    const nameMatch = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(text.slice(i));
    if (!nameMatch) throw new Error(`line ${line}: bad label name at column ${i}`);
    const name = nameMatch[0];
    i += name.length;
    if (text[i] !== '=' || text[i + 1] !== '"') throw new Error(`line ${line}: expected ="" after label ${name}`);
    i += 2;
    let value = '';
    for (;;) {
      const c = text[i];
      if (c === undefined) throw new Error(`line ${line}: unterminated label value`);
      if (c === '"') break;
      if (c === '\\') {
        const next = text[i + 1];
        if (next === 'n') value += '\n';
        else if (next === '\\' || next === '"') value += next;
        else throw new Error(`line ${line}: bad escape \\${next ?? ''}`);
        i += 2;
        continue;
      }
      value += c;
      i++;
    }
    i++;
    if (name in labels) throw new Error(`line ${line}: label ${name} twice`);
    labels[name] = value;
    while (text[i] === ' ') i++;
    if (text[i] === ',') i++;
    else if (text[i] !== '}') throw new Error(`line ${line}: expected , or } after label ${name}`);
  }
}

/** The family a sample belongs to: histogram and summary samples carry a suffix. */
function familyOf(name: string, families: Exposition): Family | undefined {
  const direct = families.get(name);
  if (direct && direct.type !== 'histogram') return direct;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!name.endsWith(suffix)) continue;
    const family = families.get(name.slice(0, -suffix.length));
    if (family && (family.type === 'histogram' || (family.type === 'summary' && suffix !== '_bucket'))) return family;
  }
  return direct;
}

export function parsePrometheusText(text: string): Exposition {
  const families: Exposition = new Map();
  const seriesSeen = new Set<string>();
  const typed = new Set<string>();
  const closed = new Set<string>();
  let current: string | null = null;

  const open = (name: string) => {
    if (current !== name) {
      if (current !== null) closed.add(current);
      if (closed.has(name)) throw new Error(`family ${name} appears in two places`);
      current = name;
    }
  };

  text.split('\n').forEach((raw, index) => {
    const line = index + 1;
    if (raw.trim() === '') return;
    if (raw.startsWith('#')) {
      const m = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s(.*))?$/.exec(raw);
      if (!m) return; // a plain comment
      const [, kind, name, rest = ''] = m;
      if (!METRIC_NAME.test(name!)) throw new Error(`line ${line}: bad metric name "${name}"`);
      open(name!);
      const family = families.get(name!) ?? { name: name!, type: 'untyped' as MetricType, help: null, samples: [] };
      families.set(name!, family);
      if (kind === 'HELP') {
        if (family.help !== null) throw new Error(`line ${line}: second HELP for ${name}`);
        family.help = rest;
      } else {
        if (!TYPES.has(rest.trim() as MetricType)) throw new Error(`line ${line}: unknown type "${rest}"`);
        if (family.samples.length > 0) throw new Error(`line ${line}: TYPE of ${name} after its samples`);
        if (typed.has(name!)) throw new Error(`line ${line}: second TYPE for ${name}`);
        typed.add(name!);
        family.type = rest.trim() as MetricType;
      }
      return;
    }
    const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(raw);
    if (!nameMatch) throw new Error(`line ${line}: not a sample: ${raw}`);
    const name = nameMatch[0];
    let i = name.length;
    let labels: Record<string, string> = {};
    if (raw[i] === '{') ({ labels, end: i } = parseLabels(raw, i, line));
    const rest = raw.slice(i).trim().split(/\s+/);
    if (raw[i] !== ' ' || rest.length < 1 || rest.length > 2) throw new Error(`line ${line}: expected " value [timestamp]": ${raw}`);
    const value = parseValue(rest[0]!, line);
    if (rest[1] !== undefined && !/^-?\d+$/.test(rest[1])) throw new Error(`line ${line}: bad timestamp "${rest[1]}"`);
    for (const label of Object.keys(labels)) if (!LABEL_NAME.test(label)) throw new Error(`line ${line}: bad label ${label}`);

    let family = familyOf(name, families);
    if (!family) {
      family = { name, type: 'untyped', help: null, samples: [] };
      families.set(name, family);
    }
    open(family.name);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : 1)))}`;
    if (seriesSeen.has(key)) throw new Error(`line ${line}: series ${key} twice`);
    seriesSeen.add(key);
    family.samples.push({ name, labels, value });
  });

  for (const family of families.values()) if (family.type === 'histogram') checkHistogram(family);
  return families;
}

function checkHistogram(family: Family): void {
  const groups = new Map<string, { buckets: [number, number][]; count?: number }>();
  for (const s of family.samples) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort(([a], [b]) => (a < b ? -1 : 1)));
    const group = groups.get(key) ?? { buckets: [] };
    groups.set(key, group);
    if (s.name === `${family.name}_bucket`) {
      if (le === undefined) throw new Error(`${family.name}: a bucket without le`);
      group.buckets.push([parseValue(le, 0), s.value]);
    } else if (s.name === `${family.name}_count`) group.count = s.value;
  }
  for (const [key, group] of groups) {
    const sorted = [...group.buckets].sort((a, b) => a[0] - b[0]);
    if (sorted.at(-1)?.[0] !== Number.POSITIVE_INFINITY) throw new Error(`${family.name}${key}: no +Inf bucket`);
    for (let k = 1; k < sorted.length; k++) {
      if (sorted[k]![1] < sorted[k - 1]![1]) throw new Error(`${family.name}${key}: bucket counts decrease`);
    }
    if (group.count !== undefined && group.count !== sorted.at(-1)![1])
      throw new Error(`${family.name}${key}: _count is not the +Inf bucket`);
  }
}

/** The sum of the samples named `name` whose labels include `labels` (0 when there is none yet). */
export function sampleValue(exposition: Exposition, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const family of exposition.values()) {
    for (const s of family.samples) {
      if (s.name !== name) continue;
      if (Object.entries(labels).every(([k, v]) => s.labels[k] === v)) total += s.value;
    }
  }
  return total;
}

/** Every sample of every family, for assertions over the whole exposition. */
export function allSamples(exposition: Exposition): Sample[] {
  return [...exposition.values()].flatMap((f) => f.samples);
}
