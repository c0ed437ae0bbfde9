import type Decimal from 'decimal.js';
import { Dec } from './money';

/**
 * The per-event value language of billable metrics (billing-rules.md, Usage). It is parsed once when
 * a metric is created (a syntax error is a 422 there) and evaluated per event with decimal.js, so a
 * metric's arithmetic is as exact as the rest of the billing. Never `eval`: an expression is data
 * written by a tenant.
 *
 *   expr    := term (('+' | '-') term)*
 *   term    := unary (('*' | '/') unary)*
 *   unary   := '-' unary | primary
 *   primary := number | identifier | identifier '(' expr (',' expr)* ')' | '(' expr ')'
 *   number  := digits ('.' digits)?           identifier := [A-Za-z_][A-Za-z0-9_]*
 */

export const EXPRESSION_FUNCTIONS = ['round', 'ceil', 'floor', 'min', 'max', 'abs'] as const;
export type ExpressionFunction = (typeof EXPRESSION_FUNCTIONS)[number];

/** Positions are 0-based offsets into the source, so a 422 can point at the offending character. */
export type Expr =
  | { readonly kind: 'number'; readonly value: Dec; readonly position: number }
  | { readonly kind: 'identifier'; readonly name: string; readonly position: number }
  | { readonly kind: 'negate'; readonly operand: Expr; readonly position: number }
  | {
      readonly kind: 'binary';
      readonly operator: '+' | '-' | '*' | '/';
      readonly left: Expr;
      readonly right: Expr;
      readonly position: number;
    }
  | {
      readonly kind: 'call';
      readonly name: ExpressionFunction;
      readonly args: readonly Expr[];
      readonly position: number;
    };

export type ParseResult =
  { readonly ok: true; readonly expr: Expr } | { readonly ok: false; readonly message: string; readonly position: number };

/** Arity per function: `round(x)` is `round(x, 0)`, as in Lago's expression language. */
const ARITY: Record<ExpressionFunction, { min: number; max: number }> = {
  round: { min: 1, max: 2 },
  ceil: { min: 1, max: 1 },
  floor: { min: 1, max: 1 },
  abs: { min: 1, max: 1 },
  min: { min: 2, max: 2 },
  max: { min: 2, max: 2 },
};

/**
 * The recursion of the parser and of the evaluator is bounded by this nesting depth, so a hostile
 * expression ("((((…" or "------…") is a 422, never a stack overflow.
 */
export const MAX_EXPRESSION_DEPTH = 64;

/** `round(x, digits)` accepts digits in this range; beyond it the result is meaningless anyway. */
export const ROUND_DIGITS_RANGE = { min: -20, max: 40 } as const;

type Token =
  | { kind: 'number'; text: string; position: number }
  | { kind: 'identifier'; text: string; position: number }
  | { kind: 'punct'; text: '+' | '-' | '*' | '/' | '(' | ')' | ','; position: number }
  | { kind: 'end'; position: number };

class SyntaxFailure {
  constructor(
    readonly message: string,
    readonly position: number,
  ) {}
}

function isDigit(c: string): boolean {
  return c >= '0' && c <= '9';
}

function isIdentifierStart(c: string): boolean {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c === '_';
}

function isIdentifierPart(c: string): boolean {
  return isIdentifierStart(c) || isDigit(c);
}

function describeChar(c: string): string {
  const code = c.codePointAt(0) ?? 0;
  return code < 0x20 || code === 0x7f ? `U+${code.toString(16).toUpperCase().padStart(4, '0')}` : `'${c}'`;
}

function tokenize(src: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src.charAt(i);
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      i += 1;
    } else if (isDigit(c)) {
      const start = i;
      while (i < src.length && isDigit(src.charAt(i))) i += 1;
      if (src.charAt(i) === '.') {
        i += 1;
        if (!isDigit(src.charAt(i))) {
          throw new SyntaxFailure(`expected a digit after '.' at position ${i}`, i);
        }
        while (i < src.length && isDigit(src.charAt(i))) i += 1;
      }
      if (isIdentifierStart(src.charAt(i))) {
        // "2x" is almost certainly a missing operator; reading it as "2 x" would hide the mistake.
        throw new SyntaxFailure(`unexpected '${src.charAt(i)}' after number at position ${i}`, i);
      }
      tokens.push({ kind: 'number', text: src.slice(start, i), position: start });
    } else if (isIdentifierStart(c)) {
      const start = i;
      while (i < src.length && isIdentifierPart(src.charAt(i))) i += 1;
      tokens.push({ kind: 'identifier', text: src.slice(start, i), position: start });
    } else if (c === '+' || c === '-' || c === '*' || c === '/' || c === '(' || c === ')' || c === ',') {
      tokens.push({ kind: 'punct', text: c, position: i });
      i += 1;
    } else {
      throw new SyntaxFailure(`unexpected character ${describeChar(c)} at position ${i}`, i);
    }
  }
  tokens.push({ kind: 'end', position: src.length });
  return tokens;
}

function isFunctionName(name: string): name is ExpressionFunction {
  return (EXPRESSION_FUNCTIONS as readonly string[]).includes(name);
}

function describeToken(token: Token): string {
  return token.kind === 'end' ? 'end of expression' : `'${token.text}'`;
}

class Parser {
  private index = 0;
  private depth = 0;

  constructor(private readonly tokens: readonly Token[]) {}

  parse(): Expr {
    const expr = this.expression();
    const next = this.peek();
    if (next.kind !== 'end') {
      throw new SyntaxFailure(`unexpected ${describeToken(next)} at position ${next.position}`, next.position);
    }
    return expr;
  }

  private peek(): Token {
    // The tokenizer always ends the list with an 'end' token and the parser never steps past it.
    return this.tokens[this.index] ?? { kind: 'end', position: 0 };
  }

  private advance(): Token {
    const token = this.peek();
    if (token.kind !== 'end') this.index += 1;
    return token;
  }

  private isPunct(text: string): boolean {
    const token = this.peek();
    return token.kind === 'punct' && token.text === text;
  }

  private expect(text: string): void {
    const token = this.peek();
    if (!this.isPunct(text)) {
      throw new SyntaxFailure(`expected '${text}' but found ${describeToken(token)} at position ${token.position}`, token.position);
    }
    this.advance();
  }

  private enter(position: number): void {
    this.depth += 1;
    if (this.depth > MAX_EXPRESSION_DEPTH) {
      throw new SyntaxFailure(`expression nested deeper than ${MAX_EXPRESSION_DEPTH} levels at position ${position}`, position);
    }
  }

  private expression(): Expr {
    let left = this.term();
    for (;;) {
      const token = this.peek();
      if (token.kind !== 'punct' || (token.text !== '+' && token.text !== '-')) return left;
      this.advance();
      left = { kind: 'binary', operator: token.text, left, right: this.term(), position: token.position };
    }
  }

  private term(): Expr {
    let left = this.unary();
    for (;;) {
      const token = this.peek();
      if (token.kind !== 'punct' || (token.text !== '*' && token.text !== '/')) return left;
      this.advance();
      left = { kind: 'binary', operator: token.text, left, right: this.unary(), position: token.position };
    }
  }

  private unary(): Expr {
    const token = this.peek();
    if (token.kind === 'punct' && token.text === '-') {
      this.advance();
      this.enter(token.position);
      const operand = this.unary();
      this.depth -= 1;
      return { kind: 'negate', operand, position: token.position };
    }
    return this.primary();
  }

  private primary(): Expr {
    const token = this.advance();
    switch (token.kind) {
      case 'number':
        return { kind: 'number', value: new Dec(token.text), position: token.position };
      case 'identifier':
        return this.isPunct('(') ? this.call(token.text, token.position) : identifier(token);
      case 'punct':
        if (token.text === '(') {
          this.enter(token.position);
          const inner = this.expression();
          this.expect(')');
          this.depth -= 1;
          return inner;
        }
        throw new SyntaxFailure(`unexpected '${token.text}' at position ${token.position}`, token.position);
      case 'end':
        throw new SyntaxFailure(`unexpected end of expression at position ${token.position}`, token.position);
    }
  }

  private call(name: string, position: number): Expr {
    if (!isFunctionName(name)) {
      throw new SyntaxFailure(`unknown function '${name}' at position ${position} (known: ${EXPRESSION_FUNCTIONS.join(', ')})`, position);
    }
    this.enter(position);
    this.expect('(');
    const args: Expr[] = [this.expression()];
    while (this.isPunct(',')) {
      this.advance();
      args.push(this.expression());
    }
    this.expect(')');
    this.depth -= 1;
    const { min, max } = ARITY[name];
    if (args.length < min || args.length > max) {
      const expected = min === max ? `${min}` : `${min} or ${max}`;
      throw new SyntaxFailure(
        `${name}() takes ${expected} argument${max === 1 ? '' : 's'}, got ${args.length} at position ${position}`,
        position,
      );
    }
    const digits = args[1];
    if (name === 'round' && digits !== undefined) checkLiteralDigits(digits);
    return { kind: 'call', name, args, position };
  }
}

function identifier(token: Token & { kind: 'identifier' }): Expr {
  return { kind: 'identifier', name: token.text, position: token.position };
}

/** A constant digits argument is checked now, so the mistake is a 422 rather than skipped events. */
function checkLiteralDigits(digits: Expr): void {
  const literal =
    digits.kind === 'number'
      ? digits.value
      : digits.kind === 'negate' && digits.operand.kind === 'number'
        ? digits.operand.value.negated()
        : null;
  if (literal !== null && !validRoundDigits(literal)) {
    throw new SyntaxFailure(
      `round() digits must be an integer from ${ROUND_DIGITS_RANGE.min} to ${ROUND_DIGITS_RANGE.max}` + ` at position ${digits.position}`,
      digits.position,
    );
  }
}

function validRoundDigits(digits: Dec): boolean {
  return digits.isInteger() && digits.gte(ROUND_DIGITS_RANGE.min) && digits.lte(ROUND_DIGITS_RANGE.max);
}

/** Never throws: every malformed input, however hostile, comes back as `ok: false`. */
export function parseExpression(src: string): ParseResult {
  try {
    const expr = new Parser(tokenize(src)).parse();
    return { ok: true, expr };
  } catch (error) {
    if (error instanceof SyntaxFailure) return { ok: false, message: error.message, position: error.position };
    throw error;
  }
}

/** The property names an expression reads, each once, in order of first appearance. */
export function expressionIdentifiers(expr: Expr): string[] {
  const seen = new Set<string>();
  const visit = (node: Expr): void => {
    switch (node.kind) {
      case 'number':
        return;
      case 'identifier':
        seen.add(node.name);
        return;
      case 'negate':
        visit(node.operand);
        return;
      case 'binary':
        visit(node.left);
        visit(node.right);
        return;
      case 'call':
        node.args.forEach(visit);
        return;
    }
  };
  visit(expr);
  return [...seen];
}

const NUMERIC_STRING = /^-?\d+(\.\d+)?$/;

/**
 * The numeric property rule (billing-rules.md, Usage): a JSON number, or a string matching
 * `^-?\d+(\.\d+)?$` ("1e3", "+5", ".5", "5." and " 5" are not numbers, as in Lago). Anything else is
 * null, and the event is then skipped by numeric aggregations.
 */
export function numericValue(raw: unknown): Dec | null {
  if (typeof raw === 'number') return Number.isFinite(raw) ? new Dec(raw) : null;
  if (typeof raw === 'string' && NUMERIC_STRING.test(raw)) return new Dec(raw);
  return null;
}

/**
 * Own properties only: an identifier such as `constructor` or `__proto__` must not reach
 * Object.prototype and turn a missing property into a value.
 */
export function ownProperty(properties: Readonly<Record<string, unknown>>, name: string): unknown {
  return Object.prototype.hasOwnProperty.call(properties, name) ? properties[name] : undefined;
}

/**
 * The expression's value for one event's properties, or null when the event must be skipped: an
 * identifier without a numeric value, a division by zero, or a computed `round` digits argument
 * that is not an integer in range.
 */
export function evaluateExpression(expr: Expr, properties: Readonly<Record<string, unknown>>): Dec | null {
  const value = evaluate(expr, properties);
  return value !== null && value.isFinite() ? value : null;
}

function evaluate(expr: Expr, properties: Readonly<Record<string, unknown>>): Dec | null {
  switch (expr.kind) {
    case 'number':
      return expr.value;
    case 'identifier':
      return numericValue(ownProperty(properties, expr.name));
    case 'negate': {
      const operand = evaluate(expr.operand, properties);
      return operand === null ? null : operand.negated();
    }
    case 'binary': {
      const left = evaluate(expr.left, properties);
      if (left === null) return null;
      const right = evaluate(expr.right, properties);
      return right === null ? null : applyOperator(expr.operator, left, right);
    }
    case 'call':
      return evaluateCall(expr.name, expr.args, properties);
  }
}

function applyOperator(operator: '+' | '-' | '*' | '/', left: Dec, right: Dec): Dec | null {
  switch (operator) {
    case '+':
      return left.plus(right);
    case '-':
      return left.minus(right);
    case '*':
      return left.times(right);
    case '/':
      return right.isZero() ? null : left.div(right);
  }
}

function evaluateCall(name: ExpressionFunction, argExprs: readonly Expr[], properties: Readonly<Record<string, unknown>>): Dec | null {
  const args: Dec[] = [];
  for (const argExpr of argExprs) {
    const value = evaluate(argExpr, properties);
    if (value === null) return null;
    args.push(value);
  }
  const [x, y] = args;
  if (x === undefined) return null;
  switch (name) {
    case 'round': {
      const digits = y ?? new Dec(0);
      // Half away from zero, like every rounding in billing (lago-reference.md section 0).
      return validRoundDigits(digits) ? roundToDigits(x, digits.toNumber(), Dec.ROUND_HALF_UP) : null;
    }
    case 'ceil':
      return x.toDecimalPlaces(0, Dec.ROUND_CEIL);
    case 'floor':
      return x.toDecimalPlaces(0, Dec.ROUND_FLOOR);
    case 'abs':
      return x.abs();
    case 'min':
      return y === undefined ? null : Dec.min(x, y);
    case 'max':
      return y === undefined ? null : Dec.max(x, y);
  }
}

/**
 * Rounds to `digits` fractional digits with a decimal.js rounding mode; a negative `digits` rounds
 * to tens, hundreds… (Ruby's BigDecimal#round(-1), which Lago's rounding_precision allows).
 */
export function roundToDigits(value: Dec, digits: number, mode: Decimal.Rounding): Dec {
  if (digits >= 0) return value.toDecimalPlaces(digits, mode);
  const scale = new Dec(10).pow(-digits);
  return value.div(scale).toDecimalPlaces(0, mode).times(scale);
}
