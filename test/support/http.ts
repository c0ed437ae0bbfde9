// Assertions shared by the API tests: the uniform error body and small polling/timing helpers.
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';

export interface ErrorBody {
  status: number;
  code: string;
  message: string;
  errors: { path: string; message: string }[];
  request_id: string;
  [extra: string]: unknown;
}

const ERROR_KEYS = ['code', 'errors', 'message', 'request_id', 'status'];

/**
 * Asserts the uniform error body of api-contract.md ("Errors"): status and code as given, a
 * message, an errors array, and a request_id equal to the x-request-id response header.
 * `extraKeys` lists members allowed beyond the five (for example a 409's existing id).
 */
export function expectError(res: LightMyRequestResponse, status: number, code: string, extraKeys: string[] = []): ErrorBody {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const body = res.json<ErrorBody>();
  expect(Object.keys(body).sort()).toEqual([...ERROR_KEYS, ...extraKeys].sort());
  expect(body.status).toBe(status);
  expect(body.code).toBe(code);
  expect(typeof body.message).toBe('string');
  expect(body.message.length).toBeGreaterThan(0);
  expect(Array.isArray(body.errors)).toBe(true);
  for (const e of body.errors) {
    expect(typeof e.path).toBe('string');
    expect(typeof e.message).toBe('string');
  }
  expect(typeof body.request_id).toBe('string');
  expect(body.request_id.length).toBeGreaterThan(0);
  expect(res.headers['x-request-id']).toBe(body.request_id);
  return body;
}

/** A 422 whose errors name `path` (and whose message does too). */
export function expectValidationError(res: LightMyRequestResponse, path: string): ErrorBody {
  const body = expectError(res, 422, 'validation_error');
  expect(body.errors.map((e) => e.path)).toContain(path);
  expect(body.message).toContain(path);
  return body;
}

/**
 * A 422 for unknown body fields whose message names each of them. (Whether errors[].path names
 * them too is asserted by dedicated tests, so that one defect fails one test per file.)
 */
export function expectUnknownFields(res: LightMyRequestResponse, fields: string[]): ErrorBody {
  const body = expectError(res, 422, 'validation_error');
  for (const field of fields) expect(body.message).toContain(field);
  return body;
}

/** Polls `probe` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 3000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** ISO 8601 in UTC with milliseconds, as every timestamp of the API (api-contract.md). */
export const ISO_MS_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

/** A request of an organization (its API key's headers, plus `headers`) to the in-process API. */
export function injectAs(
  app: FastifyInstance,
  org: { headers: Record<string, string> },
  method: Method,
  url: string,
  payload?: unknown,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  return app.inject({
    method,
    url,
    headers: { ...org.headers, ...headers },
    ...(payload !== undefined ? { payload: payload as Record<string, unknown> } : {}),
  });
}

/** Asserts the status (the body is the message when it differs) and answers the JSON body. */
export function ok<T>(res: LightMyRequestResponse, status = 200): T {
  expect(res.statusCode, res.body).toBe(status);
  return res.json<T>();
}
