import type { Db } from '../src/db';
import { createSecretBox } from '../src/payments/secrets';
import type { TemporalClient } from '../src/temporal/client';
import { createDiagnosticActivities } from './diagnostics';
import { createIdempotencyKeyActivities } from './idempotency-keys';
import { createInvoiceActivities } from './invoices';
import { createPaymentActivities } from './payments';
import { createPaymentRequestActivities } from './payment-requests';
import { createPlanSimulationActivities } from './plan-simulations';
import { createDunningActivities } from './dunning';
import { createReconcilerActivities } from './reconciler';
import { createSubscriptionActivities } from './subscriptions';
import { createTestClockActivities } from './test-clocks';
import { createWalletActivities } from './wallets';
import { createWebhookActivities } from './webhooks';

/** What activities need from the outside world; tests pass real MongoDB and fake providers. */
export interface ActivityDeps {
  db: Db;
  /** To start the workflows an activity spawns (webhook deliveries). */
  temporal: TemporalClient;
  fetch?: typeof fetch;
  webhookAttemptTimeoutMs?: number;
  /** SECRETS_KEY: opens the integrations' secrets to call the providers. */
  secretsKey?: string;
  /** The service's public address (publicUrlOf): where providers send customers back after a payment request's checkout. */
  publicUrl?: string;
}

/** Every activity the worker registers, built from its dependencies (style.md). */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createDiagnosticActivities(deps.db.models),
    ...createWalletActivities(deps.db, { models: deps.db.models, temporal: deps.temporal }),
    ...createInvoiceActivities(deps.db, { models: deps.db.models, temporal: deps.temporal }),
    ...createSubscriptionActivities(deps.db, { models: deps.db.models, temporal: deps.temporal }),
    ...createTestClockActivities({ db: deps.db, temporal: deps.temporal }),
    ...createReconcilerActivities({ db: deps.db, temporal: deps.temporal }),
    ...createIdempotencyKeyActivities({ db: deps.db }),
    ...createPaymentRequestActivities({
      db: deps.db,
      models: deps.db.models,
      temporal: deps.temporal,
      publicUrl: deps.publicUrl ?? 'http://127.0.0.1:3000',
    }),
    ...createDunningActivities({ db: deps.db, models: deps.db.models, temporal: deps.temporal }),
    ...createPlanSimulationActivities(deps.db, { models: deps.db.models, temporal: deps.temporal }),
    ...createPaymentActivities({ db: deps.db, models: deps.db.models, temporal: deps.temporal, secrets: createSecretBox(deps.secretsKey) }),
    ...createWebhookActivities({
      models: deps.db.models,
      temporal: deps.temporal,
      ...(deps.fetch ? { fetch: deps.fetch } : {}),
      ...(deps.webhookAttemptTimeoutMs ? { attemptTimeoutMs: deps.webhookAttemptTimeoutMs } : {}),
    }),
  };
}

export type Activities = ReturnType<typeof createActivities>;
