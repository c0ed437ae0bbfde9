// Catalog documents written straight to MongoDB, for tests of ingestion and usage that must not
// depend on the catalog routes. Shapes follow the collections' contracts (src/usage/catalog-view.ts).
import { randomUUID } from 'node:crypto';
import type { Db } from '../../src/db';
import type { SubscriptionStatus } from '../../src/db/models/subscription';

export async function insertMetric(db: Db, organizationId: string, metric: Record<string, unknown>): Promise<string> {
  const _id = randomUUID();
  await db.connection.collection('billable_metrics').insertOne({
    _id: _id as never,
    organization_id: organizationId,
    name: String(metric.code),
    description: null,
    field_name: null,
    recurring: false,
    expression: null,
    rounding_function: null,
    rounding_precision: null,
    filters: [],
    deleted_at: null,
    created_at: new Date(),
    updated_at: new Date(),
    ...metric,
  });
  return _id;
}

export async function insertPlan(
  db: Db,
  organizationId: string,
  plan: { code?: string; interval?: string; amount_cents?: number; currency?: string; charges: Record<string, unknown>[] },
): Promise<{ planId: string; chargeIds: string[] }> {
  const _id = randomUUID();
  const charges = plan.charges.map((c) => ({
    _id: randomUUID(),
    pay_in_advance: false,
    prorated: false,
    invoiceable: true,
    min_amount_cents: null,
    max_amount_cents: null,
    invoice_display_name: null,
    filters: [],
    ...c,
  }));
  await db.connection.collection('plans').insertOne({
    _id: _id as never,
    organization_id: organizationId,
    code: plan.code ?? `plan-${_id.slice(0, 8)}`,
    name: 'Plan',
    description: null,
    interval: plan.interval ?? 'monthly',
    amount_cents: plan.amount_cents ?? 0,
    currency: plan.currency ?? 'USD',
    trial_period_days: 0,
    charges,
    deleted_at: null,
    created_at: new Date(),
    updated_at: new Date(),
  });
  return { planId: _id, chargeIds: charges.map((c) => c._id) };
}

export async function insertSubscription(
  db: Db,
  s: {
    organizationId: string;
    customerId: string;
    externalCustomerId: string;
    planId: string;
    startedAt: Date;
    externalId?: string;
    status?: SubscriptionStatus;
    billingTime?: 'calendar' | 'anniversary';
    timezone?: string;
  },
): Promise<string> {
  const doc = await db.models.Subscription.create({
    organization_id: s.organizationId,
    customer_id: s.customerId,
    external_customer_id: s.externalCustomerId,
    external_id: s.externalId ?? `sub-${randomUUID().slice(0, 8)}`,
    plan_id: s.planId,
    status: s.status ?? 'active',
    billing_time: s.billingTime ?? 'calendar',
    started_at: s.startedAt,
  });
  return doc._id;
}
