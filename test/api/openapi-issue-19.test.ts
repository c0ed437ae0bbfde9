// The OpenAPI document (GET /docs/openapi.json) lists every route of issue 19 (item 6): previews,
// next billing date and lifecycle, pause and resume (one and in bulk), features, entitlements
// (a plan's and a subscription's), usage alerts with their status and triggers; each operation
// with a 200/201 response described, and the invoice preview with its `invoices`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestStack, type TestStack } from '../support/stack';

let stack: TestStack;

beforeAll(async () => {
  stack = await createTestStack();
}, 120_000);

afterAll(async () => {
  await stack?.close();
});

interface Operation {
  summary?: string;
  responses?: Record<string, unknown>;
}

interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
}

/** Each path of issue 19 and the methods it must document. */
const ISSUE_19: Record<string, string[]> = {
  '/v1/invoices/preview': ['post'],
  '/v1/subscriptions/{id}/change_plan_preview': ['post'],
  '/v1/subscriptions/{id}/next_billing_date': ['get'],
  '/v1/subscriptions/{id}/lifecycle': ['get'],
  '/v1/subscriptions/{id}/pause': ['post'],
  '/v1/subscriptions/{id}/resume': ['post'],
  '/v1/subscriptions/bulk_pause': ['post'],
  '/v1/subscriptions/bulk_resume': ['post'],
  '/v1/features': ['get', 'post'],
  '/v1/features/{id}': ['delete', 'get', 'put'],
  '/v1/entitlements': ['get', 'post'],
  '/v1/entitlements/{id}': ['delete', 'get', 'put'],
  '/v1/entitlements/copy': ['post'],
  '/v1/subscriptions/{id}/entitlements': ['get'],
  '/v1/usage_alerts': ['get', 'post'],
  '/v1/usage_alerts/{id}': ['delete', 'get', 'put'],
  '/v1/usage_alerts/{id}/status': ['get'],
  '/v1/usage_alerts/{id}/triggers': ['get'],
};

describe('OpenAPI document, issue 19', () => {
  it('lists every route of issue 19 with its methods, a summary and a success response', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/docs/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json<OpenApiDocument>();
    const missing = Object.keys(ISSUE_19).filter((path) => doc.paths[path] === undefined);
    expect(missing).toEqual([]);
    for (const [path, methods] of Object.entries(ISSUE_19)) {
      const documented = Object.keys(doc.paths[path]!).filter((m) => ['get', 'post', 'put', 'delete', 'patch'].includes(m));
      expect(documented.sort(), path).toEqual(methods);
      for (const method of methods) {
        const operation = doc.paths[path]![method]!;
        expect(operation.summary, `${method} ${path}`).toEqual(expect.any(String));
        const success = Object.keys(operation.responses ?? {}).filter((code) => code === '200' || code === '201');
        expect(success, `${method} ${path}`).toHaveLength(1);
      }
    }
  });

  it('describes the invoice preview with the issued invoices beside the top-level one', async () => {
    const doc = (await stack.app.inject({ method: 'GET', url: '/docs/openapi.json' })).json<OpenApiDocument>();
    expect(Object.keys(doc.components.schemas.InvoicesPreview?.properties ?? {})).toEqual(
      expect.arrayContaining(['invoices', 'total', 'fees', 'progressive_billing_credit_amount_cents', 'tax_amount']),
    );
    expect(Object.keys(doc.components.schemas.PlanChangePreview?.properties ?? {})).toEqual(
      expect.arrayContaining(['invoices', 'credit_notes', 'invoices_at_effective_date']),
    );
  });
});
