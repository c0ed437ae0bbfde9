import { afterAll, beforeAll, expect, it } from 'vitest';
import { createOrganization, createTestStack, type TestStack } from '../support/stack';

let stack: TestStack;
beforeAll(async () => {
  stack = await createTestStack();
});
afterAll(async () => stack?.close());

it('creates an organization and lists its (empty) customers', async () => {
  const org = await createOrganization(stack.app);
  const res = await stack.app.inject({ method: 'GET', url: '/v1/customers', headers: org.headers });
  expect(res.statusCode).toBe(200);
  expect(res.json()).toEqual([]);
  expect(res.headers['x-total-count']).toBe('0');
});
