// The API's error handler with the load shedding it runs behind (@fastify/under-pressure): a shed
// request is a 503 in the uniform error body with Retry-After, not a 500 (found by the model tests,
// whose scenarios overloaded the API).
import underPressure from '@fastify/under-pressure';
import Fastify from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { registerErrorHandling } from '../../src/api/plugins/errors';
import { eventually } from '../support/http';

describe('a request shed under load', () => {
  const app = Fastify({ logger: false });
  let healthy = true;
  afterAll(() => app.close());

  it('answers 503 service_unavailable with Retry-After, and the route again once the pressure is gone', async () => {
    registerErrorHandling(app);
    await app.register(underPressure, {
      healthCheck: async () => healthy,
      healthCheckInterval: 20,
      retryAfter: 7,
      exposeStatusRoute: false,
    });
    app.get('/ping', async () => ({ ok: true }));
    await app.ready();
    expect((await app.inject({ method: 'GET', url: '/ping' })).statusCode).toBe(200);

    healthy = false;
    const shed = await eventually(
      async () => {
        const res = await app.inject({ method: 'GET', url: '/ping' });
        return res.statusCode === 200 ? undefined : res;
      },
      3000,
      'the health check to fail',
    );
    expect(shed.statusCode).toBe(503);
    // The uniform error body (the request-id header comes from the full app's hook, not built here).
    expect(shed.json()).toMatchObject({ status: 503, code: 'service_unavailable', errors: [], request_id: expect.any(String) });
    expect(shed.headers['retry-after']).toBe('7');

    healthy = true;
    await eventually(
      async () => ((await app.inject({ method: 'GET', url: '/ping' })).statusCode === 200 ? true : undefined),
      3000,
      'the pressure to go',
    );
  });
});
