import { randomUUID } from 'node:crypto';
import helmet from '@fastify/helmet';
import underPressure from '@fastify/under-pressure';
import Fastify, { type FastifyInstance, LogController } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Config } from '../config';
import type { Db } from '../db';
import { BadRequest } from '../errors';
import { createSecretBox, type SecretBox } from '../payments/secrets';
import type { TemporalClient } from '../temporal/client';
import { registerApiKeyAuth } from './plugins/auth';
import { registerDocs } from './plugins/docs';
import { registerErrorHandling } from './plugins/errors';
import { registerIdempotency } from './plugins/idempotency';
import { registerMetrics } from './plugins/metrics';
import { commitmentRoutes } from './routes/commitments';
import { couponRoutes } from './routes/coupons';
import { planRoutes } from './routes/plans';
import { usageThresholdRoutes } from './routes/usage-thresholds';
import { addOnRoutes } from './routes/add-ons';
import { billableMetricRoutes } from './routes/billable-metrics';
import { creditNoteRoutes } from './routes/credit-notes';
import { customerRoutes } from './routes/customers';
import { eventRoutes } from './routes/events';
import { invoiceRoutes } from './routes/invoices';
import { previewRoutes } from './routes/previews';
import { planSimulationRoutes } from './routes/plan-simulations';
import { usageRoutes } from './routes/usage';
import { usageAlertRoutes } from './routes/usage-alerts';
import { healthRoutes } from './routes/health';
import { organizationRoutes, signupRoutes } from './routes/organizations';
import { taxRoutes } from './routes/taxes';
import { walletRoutes } from './routes/wallets';
import { subscriptionRoutes } from './routes/subscriptions';
import { testClockRoutes } from './routes/test-clocks';
import { webhookRoutes } from './routes/webhooks';
import { integrationRoutes } from './routes/integrations';
import { paymentRoutes } from './routes/payments';
import { paymentRequestRoutes } from './routes/payment-requests';
import { dunningCampaignRoutes } from './routes/dunning-campaigns';
import { paymentWebhookRoutes } from './routes/payment-webhooks';
import { featureRoutes } from './routes/features';
import { entitlementRoutes } from './routes/entitlements';

export interface AppDeps {
  config: Pick<Config, 'LOG_LEVEL' | 'BILLING_SIGNUP_TOKEN' | 'BODY_LIMIT_BYTES'> &
    Partial<
      Pick<
        Config,
        | 'BILLING_JITTER_WINDOW_SECONDS'
        | 'PROGRESSIVE_BILLING_CHECK_MINUTES'
        | 'SECRETS_KEY'
        | 'PAYMENT_PROVIDER_BASE_URL_OVERRIDE'
        | 'PUBLIC_URL'
        | 'HOST'
        | 'PORT'
        | 'METRICS_ENABLED'
      >
    >;
  db: Db;
  temporal: TemporalClient;
  /** The clock of the API (tests pass their own). */
  now?: () => Date;
  /** Pass false to silence request logs (tests). */
  logger?: boolean;
}

export type App = FastifyInstance;

declare module 'fastify' {
  interface FastifyInstance {
    deps: Required<Pick<AppDeps, 'now'>> & AppDeps & { secrets: SecretBox };
  }
}

const VERSION = '0.1.0';

/** One log line per request (its completion, with the request id, status and time), not two. */
class OneLinePerRequest extends LogController {
  override incomingRequest(): void {}
}

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    logger: deps.logger === false ? false : { level: deps.config.LOG_LEVEL },
    bodyLimit: deps.config.BODY_LIMIT_BYTES,
    routerOptions: { ignoreTrailingSlash: true },
    requestIdHeader: 'x-request-id',
    genReqId: () => randomUUID(),
    logController: new OneLinePerRequest(),
  }).withTypeProvider<ZodTypeProvider>();

  app.decorate('deps', { now: () => new Date(), ...deps, secrets: createSecretBox(deps.config.SECRETS_KEY) });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandling(app);

  app.addHook('onSend', async (request, reply) => {
    void reply.header('x-request-id', request.id);
  });
  // A JSON body must be an object (api-contract.md: "malformed JSON or body not an object" is 400;
  // a literal `null` is not an object either). A route with a body schema and no body at all gets
  // {} so that its required fields are named.
  app.addHook('preValidation', async (request) => {
    if (!request.routeOptions.schema?.body) return;
    if (request.body === undefined) {
      request.body = {};
    } else if (request.body === null || typeof request.body !== 'object' || Array.isArray(request.body)) {
      throw new BadRequest('The request body must be a JSON object', 'invalid_json');
    }
  });

  // External plugins first, then the app's own, then routes (style.md).
  await app.register(helmet, { contentSecurityPolicy: false, global: true });
  await app.register(underPressure, { maxEventLoopDelay: 2000, exposeStatusRoute: false });
  await registerDocs(app, VERSION);
  // GET /metrics and the request counters (api-contract.md); on unless METRICS_ENABLED=false.
  await registerMetrics(app, { enabled: deps.config.METRICS_ENABLED ?? true });

  await app.register(healthRoutes);
  await app.register(signupRoutes, { prefix: '/v1' });
  // Called by payment providers and customers' browsers: verified by signature, not by API key.
  await app.register(paymentWebhookRoutes, { prefix: '/v1' });
  await app.register(
    async (scope) => {
      registerApiKeyAuth(scope, deps.db.models, app.deps.now);
      registerIdempotency(scope, deps.db.models, app.deps.now);
      await scope.register(organizationRoutes);
      await scope.register(customerRoutes);
      await scope.register(planRoutes);
      await scope.register(subscriptionRoutes);
      await scope.register(commitmentRoutes);
      await scope.register(usageThresholdRoutes);
      await scope.register(couponRoutes);
      await scope.register(billableMetricRoutes);
      await scope.register(taxRoutes);
      await scope.register(addOnRoutes);
      await scope.register(walletRoutes);
      await scope.register(webhookRoutes);
      await scope.register(eventRoutes);
      await scope.register(invoiceRoutes);
      await scope.register(previewRoutes);
      await scope.register(planSimulationRoutes);
      await scope.register(usageRoutes);
      await scope.register(usageAlertRoutes);
      await scope.register(creditNoteRoutes);
      await scope.register(testClockRoutes);
      await scope.register(integrationRoutes);
      await scope.register(paymentRoutes);
      await scope.register(paymentRequestRoutes);
      await scope.register(dunningCampaignRoutes);
      await scope.register(featureRoutes);
      await scope.register(entitlementRoutes);
    },
    { prefix: '/v1' },
  );
  return app;
}
