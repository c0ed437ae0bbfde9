import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MAX_EXPRESSION_DEPTH,
  evaluateExpression,
  expressionIdentifiers,
  numericValue,
  parseExpression,
  type Expr,
} from '../../src/domain/expression';
import { Dec } from '../../src/domain/money';

function parseOk(src: string): Expr {
  const parsed = parseExpression(src);
  if (!parsed.ok) throw new Error(`expected ${src} to parse: ${parsed.message}`);
  return parsed.expr;
}

function evaluate(src: string, properties: Record<string, unknown> = {}): string | null {
  return evaluateExpression(parseOk(src), properties)?.toFixed() ?? null;
}

describe('evaluateExpression', () => {
  it.each([
    ['cpu_seconds * 2 + memory_mb / 1024', { cpu_seconds: 10, memory_mb: '2048' }, '22'],
    ['1 + 2 * 3', {}, '7'],
    ['(1 + 2) * 3', {}, '9'],
    ['10 - 4 - 3', {}, '3'],
    ['100 / 10 / 5', {}, '2'],
    ['2 * 3 / 4', {}, '1.5'],
    ['-2 * 3', {}, '-6'],
    ['--5', {}, '5'],
    ['2 * -3', {}, '-6'],
    ['-(a - 10)', { a: 4 }, '6'],
    ['0.1 + 0.2', {}, '0.3'],
    ['1 / 3', {}, '0.3333333333333333333333333333333333333333'],
    ['\t a\n+ 1 ', { a: '-1.5' }, '-0.5'],
    ['round(2.5)', {}, '3'],
    ['round(-2.5)', {}, '-3'],
    ['round(1.2345, 2)', {}, '1.23'],
    ['round(1.235, 2)', {}, '1.24'],
    ['round(1250, -2)', {}, '1300'],
    ['round(x, d)', { x: '3.14159', d: 3 }, '3.142'],
    ['ceil(1.1)', {}, '2'],
    ['ceil(-1.1)', {}, '-1'],
    ['floor(1.9)', {}, '1'],
    ['floor(-1.1)', {}, '-2'],
    ['min(3, x)', { x: 2 }, '2'],
    ['max(3, x)', { x: 2 }, '3'],
    ['abs(-4.5)', {}, '4.5'],
    ['max(min(a, 10), 0) * 2', { a: 12 }, '20'],
    // A property may be named like a function: only a call reads the function.
    ['round + 1', { round: 4 }, '5'],
    ['000012.500', {}, '12.5'],
  ])('%s with %j = %s', (src, properties, expected) => {
    expect(evaluate(src, properties)).toBe(expected);
  });

  it.each([
    ['missing identifier', 'a + 1', {}],
    ['non-numeric string', 'a + 1', { a: 'abc' }],
    ['exponent notation string', 'a', { a: '1e3' }],
    ['null', 'a', { a: null }],
    ['boolean', 'a', { a: true }],
    ['object', 'a', { a: { value: 1 } }],
    ['division by zero', 'a / b', { a: 1, b: 0 }],
    ['division by a computed zero', 'a / (b - b)', { a: 1, b: '7.5' }],
    ['non-integer round digits', 'round(x, d)', { x: 1, d: '1.5' }],
    ['round digits out of range', 'round(x, d)', { x: 1, d: 41 }],
    ['inherited property', 'constructor + 1', {}],
    ['prototype key', '__proto__ + 1', {}],
    ['toString key', 'toString', {}],
  ])('is null (event skipped) for %s', (_label, src, properties) => {
    expect(evaluate(src, properties)).toBeNull();
  });

  it('skips on a missing identifier even when another branch would not need it', () => {
    expect(evaluate('min(a, 0)', { b: 1 })).toBeNull();
    expect(evaluate('min(a, 0)', { a: 1 })).toBe('0');
  });
});

describe('numericValue', () => {
  it.each([
    [5, '5'],
    [-0.5, '-0.5'],
    ['5', '5'],
    ['-0.5', '-0.5'],
    ['007', '7'],
    [1e21, '1000000000000000000000'],
    ['123456789012345678901234567890.123456789', '123456789012345678901234567890.123456789'],
  ] as const)('%j is numeric: %s', (raw, expected) => {
    expect(numericValue(raw)?.toFixed()).toBe(expected);
  });

  it.each([['1e3'], ['+5'], ['.5'], ['5.'], [' 5'], ['5 '], [''], ['-'], [NaN], [Infinity], [null], [undefined], [true], [[1]]])(
    '%j is not numeric',
    (raw) => {
      expect(numericValue(raw)).toBeNull();
    },
  );
});

describe('parseExpression errors', () => {
  it.each([
    ['', 'unexpected end of expression', 0],
    ['   ', 'unexpected end of expression', 3],
    ['1 +', 'unexpected end of expression', 3],
    ['foo(1)', "unknown function 'foo'", 0],
    ['1 + ROUND(2)', "unknown function 'ROUND'", 4],
    ['round(1, 2, 3)', 'round() takes 1 or 2 arguments, got 3', 0],
    ['min(1)', 'min() takes 2 arguments, got 1', 0],
    ['abs(1, 2)', 'abs() takes 1 argument, got 2', 0],
    ['a $ b', "unexpected character '$'", 2],
    ['(1 + 2', "expected ')' but found end of expression", 6],
    ['1 2', "unexpected '2'", 2],
    ['2x', "unexpected 'x' after number", 1],
    ['1.', "expected a digit after '.'", 2],
    ['.5', "unexpected character '.'", 0],
    ['1 + )', "unexpected ')'", 4],
    ['round(1, 0.5)', 'round() digits must be an integer', 9],
    ['round(1, -21)', 'round() digits must be an integer from -20 to 40', 9],
    ['+1', "unexpected '+'", 0],
    ['a ** 2', "unexpected '*'", 3],
    ['f(', "unknown function 'f'", 0],
    ['max(1,)', "unexpected ')'", 6],
    ['a\u0000', 'unexpected character U+0000', 1],
    ['eval(1)', "unknown function 'eval'", 0],
    ['concat("a")', "unexpected character '\"'", 7],
  ])('%j fails with "%s" at %i', (src, message, position) => {
    const parsed = parseExpression(src);
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.message).toContain(message);
    expect(parsed.position).toBe(position);
  });

  it(`accepts ${MAX_EXPRESSION_DEPTH} levels of nesting and refuses one more`, () => {
    const nested = (n: number) => `${'('.repeat(n)}1${')'.repeat(n)}`;
    expect(parseExpression(nested(MAX_EXPRESSION_DEPTH)).ok).toBe(true);
    const deeper = parseExpression(nested(MAX_EXPRESSION_DEPTH + 1));
    expect(deeper).toMatchObject({ ok: false, position: MAX_EXPRESSION_DEPTH });
    expect(parseExpression(`${'-'.repeat(100_000)}1`).ok).toBe(false);
    expect(parseExpression(`${'abs('.repeat(10_000)}1${')'.repeat(10_000)}`).ok).toBe(false);
  });
});

describe('expressionIdentifiers', () => {
  it.each([
    ['a * b + round(a, c) - max(d, 2)', ['a', 'b', 'c', 'd']],
    ['1 + 2', []],
    ['-(x) / x', ['x']],
  ])('%s reads %j', (src, identifiers) => {
    expect(expressionIdentifiers(parseOk(src))).toEqual(identifiers);
  });
});

/** A random expression with its reference value, computed without the parser. */
type Generated = { src: string; value: Dec | null };

const generatedExpression: fc.Arbitrary<Generated> = fc.letrec<{ node: Generated }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.integer({ min: 0, max: 1000 }).map((n) => ({ src: String(n), value: new Dec(n) })),
    fc.constantFrom('a', 'b').map((name) => ({ src: name, value: new Dec(name === 'a' ? '2.5' : '-4') })),
    fc
      .tuple(tie('node'), fc.constantFrom('+', '-', '*', '/'), tie('node'))
      .map(([l, op, r]) => ({ src: `(${l.src} ${op} ${r.src})`, value: reference(op, l.value, r.value) })),
    tie('node').map((x) => ({ src: `-${x.src}`, value: x.value?.negated() ?? null })),
    tie('node').map((x) => ({ src: `abs(${x.src})`, value: x.value?.abs() ?? null })),
    fc
      .tuple(tie('node'), tie('node'))
      .map(([x, y]) => ({ src: `max(${x.src}, ${y.src})`, value: x.value && y.value && Dec.max(x.value, y.value) })),
  ),
})).node;

function reference(op: string, l: Dec | null, r: Dec | null): Dec | null {
  if (l === null || r === null) return null;
  if (op === '+') return l.plus(r);
  if (op === '-') return l.minus(r);
  if (op === '*') return l.times(r);
  return r.isZero() ? null : l.div(r);
}

describe('parser properties', () => {
  it('never throws on random input: it parses or returns ok:false with a position inside the source', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (src) => {
        const parsed = parseExpression(src);
        if (!parsed.ok) {
          expect(parsed.message.length).toBeGreaterThan(0);
          expect(parsed.position).toBeGreaterThanOrEqual(0);
          expect(parsed.position).toBeLessThanOrEqual(src.length);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('never throws on token soup, and what parses evaluates to a decimal or null', () => {
    const token = fc.constantFrom('a', 'b', '1', '0', '2.5', '+', '-', '*', '/', '(', ')', ',', ' ', 'round', 'min', 'abs', 'x(');
    fc.assert(
      fc.property(fc.array(token, { maxLength: 40 }), (tokens) => {
        const parsed = parseExpression(tokens.join(''));
        if (parsed.ok) {
          const value = evaluateExpression(parsed.expr, { a: '3', b: 0 });
          expect(value === null || value.isFinite()).toBe(true);
        } else {
          expect(parsed.position).toBeLessThanOrEqual(tokens.join('').length);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('a generated expression evaluates to its reference value', () => {
    fc.assert(
      fc.property(generatedExpression, ({ src, value }) => {
        const actual = evaluateExpression(parseOk(src), { a: '2.5', b: -4 });
        expect(actual?.toFixed() ?? null).toBe(value?.toFixed() ?? null);
      }),
      { numRuns: 500 },
    );
  });
});
