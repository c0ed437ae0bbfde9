/**
 * What the service asks of a payment provider (payment-providers.md), one adapter per provider
 * behind this interface: `provider_a` Stripe, `provider_b` Adyen, `provider_c` GoCardless,
 * `provider_d` UCP, `manual`. Adapters call the provider through its official SDK where one exists
 * (plain HTTP for UCP) and verify notifications with the SDK's verifier where there is one.
 *
 * Adapters hold no state and read no clock or environment: the settings (decrypted), the API
 * address and the instant come in as arguments, so activities can retry them and tests can point
 * them at the local fakes of test/support/providers/.
 */
import type { ProviderCode } from '../../domain/payment-providers';

export { isProviderCode, providerCodes, type ProviderCode } from '../../domain/payment-providers';

/** The integration of one organization for one provider, as an adapter sees it. */
export interface ProviderContext {
  /** Decrypted settings with the contract's names (api_key, webhook_secret, hmac_key, ...). */
  settings: Record<string, string>;
  /** Replaces the provider's API address (a sandbox, a proxy, a local fake), when set. */
  apiBaseUrl?: string | null;
}

export interface CheckoutRequest {
  /** Our payment id: it goes into the provider's metadata / reference so notifications find it. */
  paymentId: string;
  invoiceId: string;
  invoiceNumber: string | null;
  /** Minor units of `currency`, a whole number (the service's amounts are minor units already: never x100). */
  amountMinor: number;
  /** ISO 4217, upper case. */
  currency: string;
  successUrl: string;
  cancelUrl: string;
  /** Where a redirect flow sends the customer back (provider_c): GET /v1/payments/{id}/return. */
  returnUrl: string;
  customerEmail: string | null;
  /** Sent as the provider's Idempotency-Key where it takes one: a retried activity creates one checkout. */
  idempotencyKey: string;
  /** The instant the request is made for (workflow time), to compute default expiries. */
  now: Date;
}

export interface CheckoutResult {
  providerCheckoutId: string;
  /** null for manual. */
  checkoutUrl: string | null;
  /** The provider's answer, else the contract's default for the provider. */
  expiresAt: Date;
  providerPaymentId?: string | null;
}

export interface RefundRequest {
  paymentId: string;
  providerPaymentId: string | null;
  providerCheckoutId: string | null;
  amountMinor: number;
  currency: string;
  idempotencyKey: string;
}

export interface RefundResult {
  providerRefundId: string | null;
  /** The provider's status for the refund request (pending, succeeded, received, ...). */
  status: string;
}

/** What a verified notification (or one item of a batch) means for a payment. */
export type NotificationOutcome = 'processing' | 'succeeded' | 'failed' | 'canceled' | 'refunded';

export interface ProviderNotification {
  /**
   * Unique per provider event: Stripe `evt_…`, GoCardless `EV…`, Adyen
   * `pspReference:eventCode:success`, UCP and manual the SHA-256 (hex) of the raw body.
   */
  eventKey: string;
  /** The provider's event name (`checkout.session.completed`, `AUTHORISATION`, `payments.confirmed`, ...). */
  eventType: string;
  /** null: verified but nothing to do for a payment (answered `ignored`). */
  outcome: NotificationOutcome | null;
  /** Our payment id when the payload carries it (metadata, reference, client_reference_id, session_token). */
  paymentId: string | null;
  providerCheckoutId: string | null;
  providerPaymentId: string | null;
  failureReason: string | null;
  /** A saved method or an active mandate the notification reports, for the customer. */
  providerCustomerId: string | null;
  paymentMethodId: string | null;
}

/** Thrown when a notification's signature is missing or wrong: the route answers 401 `invalid_signature`. */
export class InvalidProviderSignature extends Error {
  override readonly name = 'InvalidProviderSignature';
}

/** Thrown when the provider refuses a call for a reason a retry cannot fix (the activity fails for good). */
export class ProviderRefused extends Error {
  override readonly name = 'ProviderRefused';
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

/** Lower-cased header names, as Node's IncomingMessage gives them. */
export type RawHeaders = Record<string, string | string[] | undefined>;

export interface NotificationInput {
  rawBody: Buffer;
  headers: RawHeaders;
  /** For timestamped schemes (Stripe's 300 s tolerance). */
  now: Date;
}

/** What an unverified payload points at, so the route can find the organization whose secret verifies it. */
export interface NotificationReferences {
  paymentIds: string[];
  /** Provider checkout / payment / flow / mandate ids the payload names. */
  providerIds: string[];
}

export interface RedirectCompletion {
  flowId: string;
  /** The session token given at checkout (our payment id). */
  sessionToken: string;
  paymentId: string;
  amountMinor: number;
  currency: string;
  idempotencyKey: string;
}

export interface RedirectCompletionResult {
  mandateId: string;
  providerCustomerId: string | null;
  /** The payment created on the mandate. */
  providerPaymentId: string;
}

/** A charge of a saved method without the customer (dunning's payment requests): Stripe off-session, a GoCardless mandate, an Adyen stored method. */
export interface SavedMethodCharge {
  paymentId: string;
  amountMinor: number;
  currency: string;
  /** The customer's id at the provider (Stripe `cus_…`, Adyen shopperReference); null when the provider needs none. */
  providerCustomerId: string | null;
  /** Stripe `pm_…`, GoCardless mandate `MD…`, Adyen storedPaymentMethodId. */
  paymentMethodId: string;
  description: string;
  idempotencyKey: string;
}

export interface SavedMethodChargeResult {
  /** Null when the provider refused before creating anything (a GoCardless mandate no longer active). */
  providerPaymentId: string | null;
  /** What the provider answered at once; the rest arrives by notification. */
  outcome: 'processing' | 'succeeded' | 'failed';
  failureReason: string | null;
}

export interface PaymentProviderAdapter {
  code: ProviderCode;
  /** Creates the hosted checkout (session, redirect flow, checkout session); manual: a local id, no URL. */
  createCheckout(ctx: ProviderContext, request: CheckoutRequest): Promise<CheckoutResult>;
  /** Ends an open checkout at the provider (provider_a: the session's expire call); others: nothing. */
  expireCheckout(ctx: ProviderContext, providerCheckoutId: string): Promise<void>;
  /** Requests a refund through the provider's refund API (manual: recorded only). */
  refund(ctx: ProviderContext, request: RefundRequest): Promise<RefundResult>;
  /**
   * Verifies the raw body with the integration's secret (throws InvalidProviderSignature) and
   * returns every event of the batch.
   */
  verifyNotification(ctx: ProviderContext, input: NotificationInput): ProviderNotification[];
  /** Reads, without verifying, which payments a payload refers to (empty when it cannot be parsed). */
  references(rawBody: Buffer): NotificationReferences;
  /** Charges a saved method without the customer (provider_a, provider_b, provider_c); absent: checkout only. */
  chargeSavedMethod?(ctx: ProviderContext, charge: SavedMethodCharge): Promise<SavedMethodChargeResult>;
  /** provider_c only: completes the redirect flow and creates the payment on the new mandate. */
  completeRedirect?(ctx: ProviderContext, completion: RedirectCompletion): Promise<RedirectCompletionResult>;
}
