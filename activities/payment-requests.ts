import {
  afterFailedAttempt,
  anythingLeft,
  finishRequest,
  recordAttempt,
  startAttempt,
  type AttemptDeps,
  type AttemptResult,
} from '../src/payments/payment-requests';

/**
 * The paymentRequestWorkflow's steps (src/payments/payment-requests.ts); each receives the instant
 * it acts for from the workflow, so a retried step records the same instants.
 */
export function createPaymentRequestActivities(deps: AttemptDeps) {
  return {
    async startPaymentRequestAttemptActivity(requestId: string, attempt: number, at: string): Promise<AttemptResult> {
      return startAttempt(deps, requestId, attempt, new Date(at));
    },
    async recordPaymentRequestAttemptActivity(requestId: string, paymentId: string, attempt: number, at: string): Promise<void> {
      await recordAttempt(deps, requestId, paymentId, attempt, new Date(at));
    },
    async afterFailedPaymentRequestAttemptActivity(requestId: string, nextAt: string | null, at: string): Promise<void> {
      await afterFailedAttempt(deps, requestId, nextAt ? new Date(nextAt) : null, new Date(at));
    },
    async finishPaymentRequestActivity(requestId: string, status: 'succeeded' | 'failed', at: string): Promise<void> {
      await finishRequest(deps, requestId, status, new Date(at));
    },
    async paymentRequestHasSomethingLeftActivity(requestId: string): Promise<boolean> {
      return anythingLeft(deps.db, requestId);
    },
  };
}
