/**
 * Outgoing webhook delivery schedule (api-contract.md, Outgoing webhooks): 10 attempts in all; the
 * first retry 30 s after the first failure, each next one twice as late, never more than 1 h apart.
 * Attempt delays: 30 s, 1 min, 2 min, 4 min, 8 min, 16 min, 32 min, 1 h, 1 h.
 */
export const WEBHOOK_MAX_ATTEMPTS = 10;
export const WEBHOOK_ATTEMPT_TIMEOUT_MS = 10_000;
const FIRST_RETRY_MS = 30_000;
const MAX_RETRY_MS = 60 * 60_000;

/** Delay between failed attempt `attempt` (1-based) and the next one. */
export function webhookRetryDelayMs(attempt: number): number {
  return Math.min(FIRST_RETRY_MS * 2 ** (attempt - 1), MAX_RETRY_MS);
}

/** Every lifecycle event type the service emits (specification section 6 and api-contract.md). */
export const WEBHOOK_EVENT_TYPES = [
  'customer.created',
  'subscription.created',
  'subscription.started',
  'subscription.plan_changed',
  'subscription.trial_ended',
  'subscription.canceled',
  'subscription.terminated',
  'subscription.paused',
  'subscription.resumed',
  'subscription.usage_threshold_reached',
  'invoice.created',
  'invoice.finalized',
  'invoice.paid',
  'invoice.voided',
  'invoice.payment_overdue',
  'payment.created',
  'payment.succeeded',
  'payment.failed',
  'payment.canceled',
  'payment.refunded',
  'payment_request.created',
  'payment_request.payment_succeeded',
  'payment_request.payment_failed',
  'wallet.created',
  'wallet.terminated',
  'wallet_transaction.created',
  'wallet_transaction.settled',
  'credit_note.created',
  'credit_note.finalized',
  'usage_alert.triggered',
] as const;

export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
