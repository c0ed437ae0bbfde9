import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';

const check = z.object({ status: z.enum(['ok', 'unavailable']), mongodb: z.string().optional(), temporal: z.string().optional() });

/** Liveness and readiness; no authentication. */
export const healthRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get('/health', { schema: { hide: true, response: { 200: check } } }, () => ({ status: 'ok' as const }));

  app.get('/ready', { schema: { hide: true, response: { 200: check, 503: check } } }, async (_request, reply) => {
    const { db, temporal } = app.deps;
    const [mongodb, temporalState] = await Promise.all([
      db.ping().then(
        () => 'ok',
        (err: Error) => `unavailable: ${err.message}`,
      ),
      temporal.ping().then(
        () => 'ok',
        (err: Error) => `unavailable: ${err.message}`,
      ),
    ]);
    const ready = mongodb === 'ok' && temporalState === 'ok';
    return reply.status(ready ? 200 : 503).send({ status: ready ? 'ok' : 'unavailable', mongodb, temporal: temporalState });
  });
};
