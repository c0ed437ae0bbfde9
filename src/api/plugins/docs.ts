import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';

/**
 * OpenAPI 3.1 generated from the route schemas (the same zod schemas that validate requests),
 * served at /docs/openapi.json, with an interactive reference at /docs.
 */
export async function registerDocs(app: FastifyInstance, version: string): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Billing service API',
        version,
        description:
          'Multi-tenant usage-based billing. Authenticate with `Authorization: Bearer <API key>`; create an organization (and its first key) with `POST /v1/organizations`.',
      },
      components: {
        securitySchemes: { apiKey: { type: 'http', scheme: 'bearer', description: 'An API key: bsk_live_...' } },
      },
      security: [{ apiKey: [] }],
    },
    transform: jsonSchemaTransform,
    transformObject: jsonSchemaTransformObject,
  });
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { docExpansion: 'list', deepLinking: true } });
  // The contract's address for the document (swagger-ui serves it as /docs/json too).
  app.get('/docs/openapi.json', { schema: { hide: true } }, () => app.swagger());
}
