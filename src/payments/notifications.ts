// POST /v1/payments/webhook/{provider}[/{organization_id}] (api-contract.md, Payments): find whose
// secret verifies the notification, verify the raw bytes, store each event once, and hand it to
// its payment's workflow as a signal. The workflow decides what the event does to the payment.
import type { Db } from '../db';
import { isDuplicateKeyError } from '../db';
import type { PaymentDoc } from '../db/models/payment';
import { ApiError, BadRequest, Unauthorized } from '../errors';
import type { TemporalClient } from '../temporal/client';
import { activeProviderIntegration, providerContext } from './integrations';
import { loadPaymentWorkflowInput, signalProviderEvent } from './payment-workflow';
import { adapterFor } from './providers';
import { InvalidProviderSignature, type ProviderCode, type ProviderNotification, type RawHeaders } from './providers/types';
import type { SecretBox } from './secrets';

export interface NotificationDeps {
  db: Db;
  temporal: TemporalClient;
  secrets: SecretBox;
}

export type NotificationAnswer = 'processed' | 'duplicate' | 'ignored';

const invalidSignature = (message = 'The notification signature is missing or invalid') => new Unauthorized(message, 'invalid_signature');

/** The organization whose integration must verify the payload: the path's, else that of a payment it names. */
async function organizationOf(db: Db, provider: ProviderCode, rawBody: Buffer): Promise<string | null> {
  const refs = adapterFor(provider).references(rawBody);
  for (const id of refs.paymentIds) {
    const payment = await db.models.Payment.findById(id, { organization_id: 1, provider: 1 }).lean();
    if (payment?.provider === provider) return payment.organization_id;
  }
  for (const id of refs.providerIds) {
    const payment = await db.models.Payment.findOne(
      { provider, $or: [{ provider_checkout_id: id }, { provider_payment_id: id }] },
      { organization_id: 1 },
    ).lean();
    if (payment) return payment.organization_id;
  }
  return null;
}

/** The payment an event is about, within the verified organization: our id first, then the provider's ids. */
async function paymentOf(db: Db, organizationId: string, provider: ProviderCode, n: ProviderNotification): Promise<PaymentDoc | null> {
  const { Payment } = db.models;
  if (n.paymentId) {
    const payment = await Payment.findById(n.paymentId).lean();
    if (payment && payment.organization_id === organizationId && payment.provider === provider) return payment;
  }
  if (n.providerCheckoutId) {
    const payment = await Payment.findOne({ organization_id: organizationId, provider, provider_checkout_id: n.providerCheckoutId }).lean();
    if (payment) return payment;
  }
  if (n.providerPaymentId) {
    const payment = await Payment.findOne({ organization_id: organizationId, provider, provider_payment_id: n.providerPaymentId }).lean();
    if (payment) return payment;
  }
  return null;
}

export async function receiveNotification(
  deps: NotificationDeps,
  input: { provider: ProviderCode; organizationId: string | null; rawBody: Buffer; headers: RawHeaders; now: Date },
): Promise<NotificationAnswer> {
  const organizationId = input.organizationId ?? (await organizationOf(deps.db, input.provider, input.rawBody));
  if (!organizationId) throw invalidSignature('No organization of this notification could be found');
  const integration = await activeProviderIntegration(deps.db, organizationId, input.provider);
  if (!integration) throw invalidSignature(`No active ${input.provider} integration verifies this notification`);

  let notifications: ProviderNotification[];
  try {
    notifications = adapterFor(input.provider).verifyNotification(providerContext(deps.secrets, integration), {
      rawBody: input.rawBody,
      headers: input.headers,
      now: input.now,
    });
  } catch (err) {
    if (err instanceof InvalidProviderSignature) throw invalidSignature();
    if (err instanceof ApiError) throw err;
    // Verified, but not a payload we can read.
    throw new BadRequest(`The notification could not be read: ${err instanceof Error ? err.message : String(err)}`, 'invalid_json');
  }

  const answers: NotificationAnswer[] = [];
  for (const notification of notifications) answers.push(await deliver(deps, organizationId, input.provider, notification));
  if (answers.includes('processed')) return 'processed';
  if (answers.includes('duplicate')) return 'duplicate';
  return 'ignored';
}

/** Stores one event once, then signals its payment's workflow (again, for a replay whose first signal was lost). */
async function deliver(
  deps: NotificationDeps,
  organizationId: string,
  provider: ProviderCode,
  n: ProviderNotification,
): Promise<NotificationAnswer> {
  const { ProviderEvent } = deps.db.models;
  const payment = await paymentOf(deps.db, organizationId, provider, n);
  if (!payment) return 'ignored';
  let answer: NotificationAnswer = 'processed';
  try {
    await ProviderEvent.create({
      organization_id: organizationId,
      provider,
      event_key: n.eventKey,
      event_type: n.eventType,
      payment_id: payment._id,
      outcome: n.outcome,
      notification: { ...n, paymentId: payment._id },
    });
  } catch (err) {
    if (!isDuplicateKeyError(err)) throw err;
    const stored = await ProviderEvent.findOne(
      { organization_id: organizationId, provider, event_key: n.eventKey },
      { delivered_at: 1 },
    ).lean();
    if (stored?.delivered_at) return 'duplicate';
    answer = 'duplicate';
  }
  // The workflow ignores an event key it has seen, and the payment's status only moves forward,
  // so a second signal of the same event changes nothing.
  await signalProviderEvent(deps.temporal, await loadPaymentWorkflowInput(deps.db, payment), { ...n, paymentId: payment._id });
  await ProviderEvent.updateOne(
    { organization_id: organizationId, provider, event_key: n.eventKey },
    { $set: { delivered_at: new Date() } },
  );
  return answer;
}
