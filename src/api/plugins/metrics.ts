import cluster from 'node:cluster';
import type { FastifyInstance } from 'fastify';
import { clusterMetricsText, joinClusterMetrics } from '../../metrics/cluster';
import { collectProcessMetrics, httpRequestDuration, httpRequests, registry } from '../../metrics/registry';

/**
 * Prometheus metrics of the API (api-contract.md): every answer counted and timed by route
 * pattern and status, and GET /metrics without a key. Under node:cluster (API_WORKERS > 1) a
 * scrape answers the sum over every worker (src/metrics/cluster.ts); alone, this process's
 * registry. Left out of the OpenAPI document: it is for Prometheus, not for API clients.
 */
export async function registerMetrics(app: FastifyInstance, options: { enabled: boolean }): Promise<void> {
  if (!options.enabled) return;
  collectProcessMetrics();
  if (cluster.isWorker) joinClusterMetrics();

  app.addHook('onResponse', async (request, reply) => {
    // The route's pattern (/v1/customers/:id), never the URL: ids would make a series per tenant
    // and per resource. Unknown routes share one label.
    const labels = { method: request.method, route: request.routeOptions.url ?? 'unmatched', status_code: String(reply.statusCode) };
    httpRequests.inc(labels);
    httpRequestDuration.observe(labels, reply.elapsedTime / 1000);
  });

  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    const text = cluster.isWorker ? await clusterMetricsText() : await registry.metrics();
    return reply.type(registry.contentType).send(text);
  });
}
