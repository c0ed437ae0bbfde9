import type { Tracer } from '@opentelemetry/api';
import type { AnyBulkWriteOperation, Collection, Document } from 'mongodb';
import mongoose, { type Connection, type Model } from 'mongoose';
import { traceCommands } from './command-spans';
import { apiKeySchema, type ApiKeyDoc } from './models/api-key';
import { appliedCouponSchema, type AppliedCouponDoc } from './models/applied-coupon';
import { commitmentSchema, type CommitmentDoc } from './models/commitment';
import { couponSchema, type CouponDoc } from './models/coupon';
import { planSchema, type PlanDoc } from './models/plan';
import { usageThresholdSchema, type UsageThresholdDoc } from './models/usage-threshold';
import { addOnSchema, type AddOnDoc } from './models/add-on';
import { appliedTaxSchema, type AppliedTaxDoc } from './models/applied-tax';
import { billableMetricSchema, type BillableMetricDoc } from './models/billable-metric';
import { customerSchema, type CustomerDoc } from './models/customer';
import { creditNoteSchema, type CreditNoteDoc } from './models/credit-note';
import { documentNumberSchema, type DocumentNumberDoc } from './models/document-number';
import { feeSchema, type FeeDoc } from './models/fee';
import { invoiceSchema, type InvoiceDoc } from './models/invoice';
import { invoiceSettlementSchema, type InvoiceSettlementDoc } from './models/invoice-settlement';
import { dailyUsageSchema, type DailyUsageDoc } from './models/daily-usage';
import { eventSchema, type EventDoc } from './models/event';
import { rateLimitWindowSchema, type RateLimitWindowDoc } from './models/rate-limit-window';
import { lifecycleEventSchema, type LifecycleEventDoc } from './models/lifecycle-event';
import { organizationSchema, type OrganizationDoc } from './models/organization';
import { subscriptionSchema, type SubscriptionDoc } from './models/subscription';
import { taxSchema, type TaxDoc } from './models/tax';
import { webhookSchema, type WebhookDoc } from './models/webhook';
import { webhookEndpointSchema, type WebhookEndpointDoc } from './models/webhook-endpoint';
import { walletSchema, type WalletDoc } from './models/wallet';
import { walletTransactionSchema, type WalletTransactionDoc } from './models/wallet-transaction';
import { walletConsumptionLeaseSchema, type WalletConsumptionLeaseDoc } from './models/wallet-consumption-lease';
import { testClockSchema, type TestClockDoc } from './models/test-clock';
import { idempotencyKeySchema, type IdempotencyKeyDoc } from './models/idempotency-key';
import { integrationSchema, type IntegrationDoc } from './models/integration';
import { paymentSchema, type PaymentDoc } from './models/payment';
import { providerEventSchema, type ProviderEventDoc } from './models/provider-event';
import { paymentRequestSchema, type PaymentRequestDoc } from './models/payment-request';
import { dunningCampaignSchema, type DunningCampaignDoc } from './models/dunning-campaign';
import { usageAlertSchema, type UsageAlertDoc } from './models/usage-alert';
import { usageAlertTriggerSchema, type UsageAlertTriggerDoc } from './models/usage-alert-trigger';
import { featureSchema, type FeatureDoc } from './models/feature';
import { entitlementSchema, entitlementStampSchema, type EntitlementDoc, type EntitlementStampDoc } from './models/entitlement';

export interface Models {
  Organization: Model<OrganizationDoc>;
  ApiKey: Model<ApiKeyDoc>;
  Customer: Model<CustomerDoc>;
  WebhookEndpoint: Model<WebhookEndpointDoc>;
  LifecycleEvent: Model<LifecycleEventDoc>;
  Webhook: Model<WebhookDoc>;
  Subscription: Model<SubscriptionDoc>;
  Plan: Model<PlanDoc>;
  Commitment: Model<CommitmentDoc>;
  UsageThreshold: Model<UsageThresholdDoc>;
  Coupon: Model<CouponDoc>;
  AppliedCoupon: Model<AppliedCouponDoc>;
  BillableMetric: Model<BillableMetricDoc>;
  Tax: Model<TaxDoc>;
  AppliedTax: Model<AppliedTaxDoc>;
  AddOn: Model<AddOnDoc>;
  Event: Model<EventDoc>;
  DailyUsage: Model<DailyUsageDoc>;
  RateLimitWindow: Model<RateLimitWindowDoc>;
  Invoice: Model<InvoiceDoc>;
  Fee: Model<FeeDoc>;
  InvoiceSettlement: Model<InvoiceSettlementDoc>;
  DocumentNumber: Model<DocumentNumberDoc>;
  CreditNote: Model<CreditNoteDoc>;
  Wallet: Model<WalletDoc>;
  WalletTransaction: Model<WalletTransactionDoc>;
  WalletConsumptionLease: Model<WalletConsumptionLeaseDoc>;
  TestClock: Model<TestClockDoc>;
  IdempotencyKey: Model<IdempotencyKeyDoc>;
  Integration: Model<IntegrationDoc>;
  Payment: Model<PaymentDoc>;
  ProviderEvent: Model<ProviderEventDoc>;
  PaymentRequest: Model<PaymentRequestDoc>;
  DunningCampaign: Model<DunningCampaignDoc>;
  UsageAlert: Model<UsageAlertDoc>;
  UsageAlertTrigger: Model<UsageAlertTriggerDoc>;
  Feature: Model<FeatureDoc>;
  Entitlement: Model<EntitlementDoc>;
  EntitlementStamp: Model<EntitlementStampDoc>;
}

/**
 * Indexes the schemas no longer declare, dropped at start-up from databases created before the
 * change: createIndexes only adds, and a unique index left behind would go on refusing what the
 * index that replaced it allows.
 */
const RETIRED_INDEXES: readonly { model: keyof Models; name: string }[] = [
  // Invoice idempotency keys are per organization now ({ organization_id, idempotency_key }); on
  // the key alone, a second organization using a key could not have its own invoice.
  { model: 'Invoice', name: 'idempotency_key_1' },
  // Daily rows are unique by their _id (subscription, metric, date, dimensions); the unique
  // compound index repeated it, and only served equality on all four keys in the stand-in.
  { model: 'DailyUsage', name: 'subscription_id_1_billable_metric_id_1_usage_date_1_dimensions_key_1' },
];

/** Error codes of dropping an index that is not there: no such collection (26) or index (27). */
const ABSENT_INDEX_CODES = new Set([26, 27]);

export interface Db {
  connection: Connection;
  models: Models;
  /** Creates every collection's indexes and drops retired ones; run once at start-up by the API and the worker. */
  ensureIndexes(): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

function bindModels(connection: Connection): Models {
  return {
    Organization: connection.model<OrganizationDoc>('Organization', organizationSchema),
    ApiKey: connection.model<ApiKeyDoc>('ApiKey', apiKeySchema),
    Customer: connection.model<CustomerDoc>('Customer', customerSchema),
    WebhookEndpoint: connection.model<WebhookEndpointDoc>('WebhookEndpoint', webhookEndpointSchema),
    LifecycleEvent: connection.model<LifecycleEventDoc>('LifecycleEvent', lifecycleEventSchema),
    Webhook: connection.model<WebhookDoc>('Webhook', webhookSchema),
    Subscription: connection.model<SubscriptionDoc>('Subscription', subscriptionSchema),
    Plan: connection.model<PlanDoc>('Plan', planSchema),
    Commitment: connection.model<CommitmentDoc>('Commitment', commitmentSchema),
    UsageThreshold: connection.model<UsageThresholdDoc>('UsageThreshold', usageThresholdSchema),
    Coupon: connection.model<CouponDoc>('Coupon', couponSchema),
    AppliedCoupon: connection.model<AppliedCouponDoc>('AppliedCoupon', appliedCouponSchema),
    BillableMetric: connection.model<BillableMetricDoc>('BillableMetric', billableMetricSchema),
    Tax: connection.model<TaxDoc>('Tax', taxSchema),
    AppliedTax: connection.model<AppliedTaxDoc>('AppliedTax', appliedTaxSchema),
    AddOn: connection.model<AddOnDoc>('AddOn', addOnSchema),
    Event: connection.model<EventDoc>('Event', eventSchema),
    DailyUsage: connection.model<DailyUsageDoc>('DailyUsage', dailyUsageSchema),
    RateLimitWindow: connection.model<RateLimitWindowDoc>('RateLimitWindow', rateLimitWindowSchema),
    Invoice: connection.model<InvoiceDoc>('Invoice', invoiceSchema),
    Fee: connection.model<FeeDoc>('Fee', feeSchema),
    InvoiceSettlement: connection.model<InvoiceSettlementDoc>('InvoiceSettlement', invoiceSettlementSchema),
    DocumentNumber: connection.model<DocumentNumberDoc>('DocumentNumber', documentNumberSchema),
    CreditNote: connection.model<CreditNoteDoc>('CreditNote', creditNoteSchema),
    Wallet: connection.model<WalletDoc>('Wallet', walletSchema),
    WalletTransaction: connection.model<WalletTransactionDoc>('WalletTransaction', walletTransactionSchema),
    WalletConsumptionLease: connection.model<WalletConsumptionLeaseDoc>('WalletConsumptionLease', walletConsumptionLeaseSchema),
    TestClock: connection.model<TestClockDoc>('TestClock', testClockSchema),
    IdempotencyKey: connection.model<IdempotencyKeyDoc>('IdempotencyKey', idempotencyKeySchema),
    Integration: connection.model<IntegrationDoc>('Integration', integrationSchema),
    Payment: connection.model<PaymentDoc>('Payment', paymentSchema),
    ProviderEvent: connection.model<ProviderEventDoc>('ProviderEvent', providerEventSchema),
    PaymentRequest: connection.model<PaymentRequestDoc>('PaymentRequest', paymentRequestSchema),
    DunningCampaign: connection.model<DunningCampaignDoc>('DunningCampaign', dunningCampaignSchema),
    UsageAlert: connection.model<UsageAlertDoc>('UsageAlert', usageAlertSchema),
    UsageAlertTrigger: connection.model<UsageAlertTriggerDoc>('UsageAlertTrigger', usageAlertTriggerSchema),
    Feature: connection.model<FeatureDoc>('Feature', featureSchema),
    Entitlement: connection.model<EntitlementDoc>('Entitlement', entitlementSchema),
    EntitlementStamp: connection.model<EntitlementStampDoc>('EntitlementStamp', entitlementStampSchema),
  };
}

export interface ConnectDbOptions {
  maxPoolSize?: number;
  monitorCommands?: boolean;
  /** Tracing is on: a span per command inside a traced request or activity (./command-spans.ts). */
  tracer?: Tracer;
}

export async function connectDb(uri: string, options: ConnectDbOptions = {}): Promise<Db> {
  const connection = mongoose.createConnection(uri, {
    maxPoolSize: options.maxPoolSize ?? 50,
    // The driver's command monitoring (commandStarted events on the client), for benchmarks and
    // tracing. Off otherwise: the driver then decodes each reply once more, for the event.
    ...(options.monitorCommands || options.tracer ? { monitorCommands: true } : {}),
    serverSelectionTimeoutMS: 10_000,
    // Fail fast instead of queueing operations while disconnected.
    bufferCommands: false,
  });
  if (options.tracer) traceCommands(connection.getClient(), options.tracer);
  await connection.asPromise();
  const models = bindModels(connection);
  return {
    connection,
    models,
    async ensureIndexes() {
      // The API and the worker both run this at start-up, often at the same moment. Index builds
      // are idempotent, but two processes creating the same collection can collide (the stand-in
      // reports it as an unknown error), so a failed attempt is simply retried.
      for (const model of Object.values(models) as Model<unknown>[]) {
        for (let attempt = 1; ; attempt++) {
          try {
            await model.createIndexes();
            break;
          } catch (err) {
            if (attempt >= 5) throw err;
            await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
          }
        }
      }
      // Retired indexes go once what replaced them exists, so that no key is ever unguarded. One
      // already absent is fine: a newer database, or the other process dropped it first.
      for (const { model, name } of RETIRED_INDEXES) {
        await models[model].collection.dropIndex(name).catch((err: unknown) => {
          if (!ABSENT_INDEX_CODES.has((err as { code?: number } | null)?.code ?? 0)) throw err;
        });
      }
    },
    async ping() {
      await connection.db!.admin().command({ ping: 1 });
    },
    async close() {
      await connection.close();
    },
  };
}

/** A MongoDB duplicate-key error (11000), on insert or update. */
export function isDuplicateKeyError(err: unknown): boolean {
  const e = err as { code?: number; writeErrors?: { code?: number }[] } | null;
  return e?.code === 11000 || (e?.writeErrors?.some((w) => w.code === 11000) ?? false);
}

/**
 * Upserts in one unordered bulk write. When two writers create the same new key at once (a unique
 * index on the filter's fields), the loser's upsert fails with 11000 (duplicate key): it is sent
 * again and then updates the winner's document. Any other error, or 11000 five times, is thrown.
 */
export async function bulkUpsert<T extends Document>(collection: Collection<T>, ops: AnyBulkWriteOperation<T>[]): Promise<void> {
  let pending = ops;
  for (let attempt = 1; pending.length > 0; attempt++) {
    try {
      await collection.bulkWrite(pending, { ordered: false });
      return;
    } catch (err) {
      const writeErrors = (err as { writeErrors?: { code?: number; index: number }[] | { code?: number; index: number } }).writeErrors;
      const list = Array.isArray(writeErrors) ? writeErrors : writeErrors ? [writeErrors] : [];
      if (attempt >= 5 || list.length === 0 || list.some((w) => w.code !== 11000)) throw err;
      pending = list.map((w) => pending[w.index]!);
    }
  }
}
