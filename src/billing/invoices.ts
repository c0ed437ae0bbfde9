// The invoice lifecycle's writes. Called by the invoiceWorkflow's activities (the invoice's one
// writer) and, for creation, by the API (one-off invoices) or the subscription workflows. Every
// function is idempotent: it can be retried after a crash at any point and leaves the same result.
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type Decimal from 'decimal.js';
import type { Db } from '../db';
import { isDuplicateKeyError } from '../db';
import type { AppliedCouponDoc } from '../db/models/applied-coupon';
import type { InvoiceDoc, InvoiceType } from '../db/models/invoice';
import type { FeeDoc } from '../db/models/fee';
import type { OrganizationDoc } from '../db/models/organization';
import { CUSTOMER_READ_FLAGS, mayHave, readFlagsProjection, type CustomerReadFlags, type OrganizationReadFlags } from '../db/read-flags';
import { applyCoupons, type AppliedCoupon, type CouponApplication } from '../domain/coupons';
import { assembleInvoice, type AssembledFee, type AssembledInvoice, type PricedFee } from '../domain/invoice-assembly';
import { Dec, nonNegative, roundCents } from '../domain/money';
import { invoiceDueDates, overdueAt } from '../domain/invoice-due';
import { deterministicId, invoiceIdFor } from '../ids';
import { fromDecimal128, toDecimal128 } from '../db/decimal';
import type { TemporalClient } from '../temporal/client';
import { emitEvents, type EmitDeps } from '../webhooks/emit-event';
import { applyCreditNotesToInvoice } from './credit-notes';
import { draftInvoiceNumber, invoiceNumber, takeDocumentNumber } from './document-numbers';
import { amountToSettle, recordSettlement, settledAmount } from './settlements';

export { amountToSettle };
import { notifyInvoiceLeft, notifyOverdue } from '../payments/dunning';
import { consumeWalletsForInvoice, settleWalletPurchase, type CreditInvoiceRequest } from './wallets';
import { loadTaxSets } from '../usage/tax-sets';
import { NO_TAXES } from '../domain/taxes';
import { toInvoiceResource } from '../resources/invoice';
import { clockOfCustomer, clockOfCustomerId, type ClockRef } from '../test-clocks/time';
import { startInvoiceWorkflow } from '../../workflows/invoice.messages';
import { countInvoiceFinalized, countInvoiceIssued } from '../metrics/registry';
import { commitmentFeeBasis } from './fee-basis';
import { activityOrigin } from './origin';

export interface InvoiceDeps extends EmitDeps {
  temporal: TemporalClient;
}

export interface NewInvoice {
  organizationId: string;
  customerId: string;
  subscriptionId?: string | null;
  invoiceType: InvoiceType;
  currency: string;
  /** Makes creation idempotent, per organization: a subscription bill's key (src/billing/subscription/shared.ts), or the request's. */
  idempotencyKey: string;
  fees: PricedFee[];
  /** Taxes: the plan and charges whose levels apply (the customer's and organization's always do). */
  planId?: string | null;
  /** The plan as billed (code, name, terms), when the caller has it; else read by `planId`. */
  plan?: { _id: string; code: string; name: string; interval: string; amount_cents: number; currency: string } | null;
  periodStartedAt?: Date | null;
  periodEndedAt?: Date | null;
  /** The span billed by the lines that name none of their own (usage, commitment); default the invoice's period. */
  linesPeriod?: { from: Date; to: Date };
  /** Extra assembly inputs (commitment, progressive billing credits) from subscription billing. */
  assembly?: Partial<Parameters<typeof assembleInvoice>[0]>;
  /** Overrides the customer's or organization's grace period (progressive invoices: 0). */
  gracePeriodDays?: number;
  /**
   * Without a grace period, finalize here, before the workflow starts (it starts finalized). A
   * subscription step uses it so that its invoices take their numbers in step order without the
   * step waiting on another workflow's activity (which, under load, would hold every worker slot).
   */
  finalizeAtCreation?: boolean;
  at: Date;
}

function money(value: Decimal.Value | null | undefined) {
  return toDecimal128(value ?? 0);
}

export function toAppliedCoupon(doc: AppliedCouponDoc, reusable: boolean): AppliedCoupon {
  return {
    id: doc._id,
    status: doc.status,
    applied_at: doc.created_at,
    coupon: {
      id: doc.coupon_id,
      code: doc.coupon_code,
      coupon_type: doc.coupon_type,
      frequency: doc.frequency,
      reusable,
      amount_cents: fromDecimal128(doc.amount_cents),
      amount_currency: doc.amount_currency,
      percentage_rate: fromDecimal128(doc.percentage_rate),
      frequency_duration: doc.frequency_duration,
    },
    amount_cents: fromDecimal128(doc.amount_cents),
    amount_currency: doc.amount_currency,
    percentage_rate: fromDecimal128(doc.percentage_rate),
    frequency_duration: doc.frequency_duration,
    frequency_duration_remaining: doc.frequency_duration_remaining,
  };
}

/**
 * The customer's active applied coupons, oldest first, as the engine takes them; with
 * `claimedBy`, also those that invoice's finalization already used (a retry counts them active).
 */
export async function appliedCouponsOf(db: Db, organizationId: string, customerId: string, claimedBy?: string): Promise<AppliedCoupon[]> {
  // The consumption marker is bookkeeping outside the schema (see consumeCoupon), hence the cast.
  const status = claimedBy ? { $or: [{ status: 'active' }, { consumed_invoice_ids: claimedBy }] } : { status: 'active' };
  const applied = await db.models.AppliedCoupon.find({ organization_id: organizationId, customer_id: customerId, ...status } as never)
    .sort({ created_at: 1, _id: 1 })
    .lean();
  if (applied.length === 0) return [];
  const coupons = await db.models.Coupon.find({ _id: { $in: applied.map((a) => a.coupon_id) } }, { reusable: 1 }).lean();
  const reusable = new Map(coupons.map((c) => [c._id, c.reusable]));
  return applied.map((a) => ({ ...toAppliedCoupon(a, reusable.get(a.coupon_id) ?? true), status: 'active' as const }));
}

/** Where a fee stands: its id, its invoice (null: a fee billed without one), whose it is, what it covers. */
export interface FeePlace {
  id: string;
  organizationId: string;
  invoiceId: string | null;
  customerId: string;
  subscriptionId: string | null;
  currency: string;
  periodStartedAt: Date | null;
  periodEndedAt: Date | null;
  at: Date;
}

/** The stored fee of an assembled line. */
export function feeRecord(fee: AssembledFee, place: FeePlace) {
  return {
    _id: place.id,
    organization_id: place.organizationId,
    invoice_id: place.invoiceId,
    customer_id: place.customerId,
    subscription_id: place.subscriptionId,
    key: fee.key,
    fee_type: fee.fee_type,
    charge_id: fee.charge_id ?? null,
    charge_filter_id: fee.charge_filter_id ?? null,
    add_on_id: fee.add_on_id ?? null,
    invoice_display_name: fee.invoice_display_name ?? null,
    description: null,
    currency: place.currency,
    // Exact units (prorated ones: 21/31 of a seat) can have more digits than Decimal128 holds: stored
    // to its 34 significant digits (the amount was computed from the exact units).
    units: money(new Dec(fee.units).toSignificantDigits(34)),
    events_count: fee.events_count,
    unit_amount_cents: money(fee.unit_amount_cents),
    amount_cents: money(fee.amount_cents),
    taxes_amount_cents: money(fee.taxes_amount_cents),
    total_amount_cents: money(fee.total_amount_cents),
    applied_taxes: fee.applied_taxes.map((t) => ({
      tax_id: t.tax_id,
      tax_code: t.tax_code,
      tax_rate: money(t.tax_rate),
      amount_cents: money(t.amount_cents),
    })),
    payment_status: 'pending' as const,
    credited_amount_cents: money(0),
    credit_note_item_ids: [] as string[],
    period_started_at: place.periodStartedAt,
    period_ended_at: place.periodEndedAt,
    pay_in_advance: fee.pay_in_advance ?? false,
    event_id: fee.event_id ?? null,
    event_transaction_id: fee.event_transaction_id ?? null,
    basis: fee.basis ?? null,
    created_at: place.at,
    updated_at: place.at,
  };
}

/**
 * Creates a draft invoice with its fees, priced and taxed by the engine, emits invoice.created and
 * starts its workflow. A retry with the same idempotency key returns the invoice created first.
 */
export async function createInvoice(db: Db, deps: InvoiceDeps, input: NewInvoice): Promise<InvoiceDoc> {
  const { Fee, Invoice } = db.models;
  // Exactly the unique index's fields: the key is the organization's, and the MongoDB stand-in
  // only uses an index whose fields are exactly the query's.
  const byKey = { organization_id: input.organizationId, idempotency_key: input.idempotencyKey };
  const existing = await Invoice.findOne(byKey).lean();
  if (existing) return resumeCreation(db, deps, input, existing);
  const { organization, customer, coupons, invoice: draft, fees } = await draftInvoice(db, input);
  const timezone = customer.timezone ?? organization.timezone;
  const finalizing = input.finalizeAtCreation === true && draft.grace_period_days === 0;
  const context: DraftContext = { organization, customer, timezone, coupons };
  // Finalized at creation, a customer that never had a coupon, a credit note or a wallet (its read
  // flags, src/db/read-flags.ts) settles without writing anything: the invoice is then written once,
  // finalized, its number taken first (keyed by the invoice: a retry takes the same one, with the
  // amounts it computes). Otherwise the draft is written first, so that the amounts the claims,
  // credit notes and wallet credits are taken for are fixed before any is taken: a retry after a
  // crash finalizes the stored draft, never one recomputed from later usage.
  const settlesWithoutWrites =
    !mayHave(customer, 'has_applied_coupons') && !mayHave(customer, 'has_credit_notes') && !mayHave(customer, 'has_wallets');
  const finalizeNow = finalizing && settlesWithoutWrites;
  const doc = finalizeNow ? { ...draft, ...(await finalization(db, deps, draft, input.at, context)) } : draft;
  if (fees.length > 0) {
    await Fee.collection.insertMany(fees.map((fee) => ({ ...fee })) as never[], { ordered: false }).catch((err: unknown) => {
      if (!isDuplicateKeyError(err)) throw err; // a retry: the lines are there already
    });
  }
  // Written through the driver, as the fees are: the draft holds every field of the schema, with
  // its defaults (test/billing/driver-writes.test.ts holds it to what mongoose would write). An
  // undefined value is left out, as mongoose's create left it out (its insertMany, which lifecycle
  // events went through, stored null: see emitEvents).
  let invoice: InvoiceDoc = doc;
  try {
    await Invoice.collection.insertOne(invoice as never, { ignoreUndefined: true });
  } catch (err) {
    if (!isDuplicateKeyError(err)) throw err;
    // A concurrent creation wrote it first: what it has not finished yet is done as a retry does.
    return resumeCreation(db, deps, input, (await Invoice.findOne(byKey).lean())!);
  }
  // Counted by the write that created it (the draft's amount is what was issued): a retry finds it
  // and counts nothing.
  countInvoiceIssued(draft);
  // A new invoice's lines are the ones just written.
  const created = fees as FeeDoc[];
  if (finalizeNow) {
    countInvoiceFinalized(invoice);
    // invoice.created goes out with invoice.finalized, in one write (emitInvoiceEvents), and shows
    // the invoice as created: the draft (the specification's invoice life), never written as such.
    await afterFinalization(db, deps, invoice, input.at, {
      organization,
      fees: created,
      createdEvent: { invoice: draft, at: input.at },
    });
  } else if (finalizing) {
    // invoice.created goes out with invoice.finalized, in one write (emitInvoiceEvents).
    invoice = await finalizeDraft(db, deps, invoice, input.at, { ...context, createdEvent: { invoice, at: input.at }, fees: created });
  } else {
    await emitInvoiceEvents(db, deps, [{ invoice, type: 'invoice.created', at: input.at }], { organization, fees: created });
  }
  await ensureInvoiceWorkflow(
    deps.temporal,
    invoice,
    await clockOfCustomer(db, customer),
    invoice.payment_due_date ? overdueAt(invoice.payment_due_date, timezone) : null,
    customer.external_id,
  );
  return invoice;
}

/**
 * An invoice of `input` that a first attempt (or a concurrent creation) already wrote: what that
 * attempt did not finish is done again (each part is idempotent), invoice.created included (it
 * goes out with invoice.finalized when finalized at creation). A draft finalized at creation
 * (a customer with coupons, credit notes or wallets, or an invoice of an earlier version) is
 * finalized here, from its stored amounts.
 */
async function resumeCreation(db: Db, deps: InvoiceDeps, input: NewInvoice, existing: InvoiceDoc): Promise<InvoiceDoc> {
  const finalizedAtCreation = input.finalizeAtCreation && existing.grace_period_days === 0;
  const current =
    finalizedAtCreation && (existing.status === 'draft' || existing.finalized_at)
      ? await finalizeInvoice(db, deps, existing._id, input.at, { withCreatedEvent: true })
      : existing;
  if (!finalizedAtCreation) await emitInvoiceEvents(db, deps, [{ invoice: current, type: 'invoice.created', at: input.at }]);
  await ensureInvoiceWorkflow(
    deps.temporal,
    current,
    await clockOfCustomerId(db, current.customer_id),
    await invoiceOverdueAt(db, current),
    await customerExternalIdOf(db, current.customer_id),
  );
  return current;
}

/**
 * A draft as creation makes it: what it read (organization, customer, the applied coupons as its
 * finalization takes them) and its invoice and fee documents, unwritten.
 */
export type Draft = Awaited<ReturnType<typeof draftInvoice>>;

/**
 * The draft of `input`, priced, taxed and discounted by the engine: the reads of creation and no
 * write. createInvoice writes it; a preview (src/billing/preview.ts) shows it.
 */
export async function draftInvoice(db: Db, input: NewInvoice) {
  const { Customer, Organization } = db.models;
  const [organization, customer] = await Promise.all([
    Organization.findById(input.organizationId).lean(),
    Customer.findById(input.customerId).lean(),
  ]);
  if (!organization || !customer) throw new Error(`organization or customer of invoice ${input.idempotencyKey} not found`);
  const id = invoiceIdFor(input.organizationId, input.idempotencyKey);
  const [taxes, coupons, plan] = await Promise.all([
    // An organization that never had a tax taxes nothing (src/db/read-flags.ts).
    !mayHave(organization, 'has_taxes') ? NO_TAXES : loadTaxSets(db, taxSetsQuery(input, input.customerId)),
    // A purchase of wallet credits is never discounted (nor credited, nor paid by a wallet: see finalizeInvoice).
    // Read as the finalization reads them for this invoice (a new one: the active ones), so that a
    // finalization at creation takes them from here.
    input.invoiceType === 'credit' || !mayHave(customer, 'has_applied_coupons')
      ? []
      : appliedCouponsOf(db, input.organizationId, input.customerId, id),
    // The plan as billed, for explanations (its charges are on the fees' basis).
    input.plan ??
      (input.planId ? db.models.Plan.findById(input.planId, { code: 1, name: 1, interval: 1, amount_cents: 1, currency: 1 }).lean() : null),
  ]);
  const assembled: AssembledInvoice = assembleInvoice({
    currency: input.currency,
    fees: input.fees,
    taxes,
    applied_coupons: coupons,
    ...input.assembly,
  });

  const doc = {
    _id: id,
    organization_id: input.organizationId,
    customer_id: input.customerId,
    subscription_id: input.subscriptionId ?? null,
    invoice_type: input.invoiceType,
    status: 'draft' as const,
    number: draftInvoiceNumber(organization.document_number_prefix, id),
    sequential_id: null,
    currency: input.currency,
    issuing_date: null,
    payment_due_date: null,
    net_payment_term: customer.net_payment_term ?? organization.net_payment_term,
    grace_period_days: input.gracePeriodDays ?? customer.invoice_grace_period ?? organization.invoice_grace_period,
    payment_status: 'pending' as const,
    payment_overdue: false,
    period_started_at: input.periodStartedAt ?? null,
    period_ended_at: input.periodEndedAt ?? null,
    fees_amount_cents: money(assembled.fees_amount_cents),
    subtotal: money(assembled.subtotal),
    tax_amount: money(assembled.tax_amount),
    coupons_amount_cents: money(assembled.coupons_amount_cents),
    progressive_billing_credit_amount_cents: money(assembled.progressive_billing_credit_amount_cents),
    credit_notes_amount_cents: money(0),
    prepaid_credit_amount: money(0),
    total: money(assembled.total),
    applied_taxes: assembled.applied_taxes.map((t) => ({
      tax_id: t.tax_id,
      tax_code: t.tax_code,
      tax_rate: money(t.tax_rate),
      fees_amount_cents: money(t.fees_amount_cents),
      amount_cents: money(t.amount_cents),
    })),
    applied_coupons: assembled.coupons.map((c) => ({
      applied_coupon_id: c.applied_coupon_id,
      coupon_id: c.coupon_id,
      coupon_code: c.coupon_code,
      amount_cents: money(c.amount_cents),
    })),
    metadata: {},
    idempotency_key: input.idempotencyKey,
    finalized_at: null,
    paid_at: null,
    voided_at: null,
    deleted_at: null,
    plan: plan
      ? {
          id: plan._id,
          code: plan.code,
          name: plan.name,
          interval: plan.interval,
          amount_cents: plan.amount_cents,
          currency: plan.currency,
        }
      : null,
    progressive_billing_credits: assembled.progressive_billing_credits.map((c) => ({
      invoice_id: c.invoice_id,
      amount_cents: money(c.amount_cents),
    })),
    issued_by: activityOrigin(),
    finalized_by: null,
    created_at: input.at,
    updated_at: input.at,
  } satisfies InvoiceDoc;
  // Fees first: an invoice document is only ever visible with all its lines.
  // (A periodic invoice may have no line at all: it is still issued, at zero.)
  const fees = feeRecordsOf(assembled, input, id, (key) => deterministicId(`fee/${id}/${key}`));
  return { organization, customer, coupons, invoice: doc, fees };
}

/** What loadTaxSets reads for an invoice of `input`, `customerId`'s customer-level taxes included. */
export function taxSetsQuery(input: NewInvoice, customerId: string): Parameters<typeof loadTaxSets>[1] {
  return {
    organizationId: input.organizationId,
    customerId,
    planId: input.planId ?? null,
    chargeIds: input.fees.flatMap((f) => (f.charge_id ? [f.charge_id] : [])),
    addOnIds: input.fees.flatMap((f) => (f.add_on_id ? [f.add_on_id] : [])),
  };
}

/** The fee documents of an assembled invoice as creation stores them, by key; `feeId` names each. */
export function feeRecordsOf(assembled: AssembledInvoice, input: NewInvoice, invoiceId: string, feeId: (key: string) => string) {
  return assembled.fees
    .map((fee) =>
      feeRecord(fee.fee_type === 'commitment' && assembled.commitment ? withCommitmentBasis(fee, assembled, input) : fee, {
        id: feeId(fee.key),
        organizationId: input.organizationId,
        invoiceId,
        customerId: input.customerId,
        subscriptionId: input.subscriptionId ?? null,
        currency: input.currency,
        periodStartedAt: fee.period?.from ?? input.linesPeriod?.from ?? input.periodStartedAt ?? null,
        periodEndedAt: fee.period?.to ?? input.linesPeriod?.to ?? input.periodEndedAt ?? null,
        at: input.at,
      }),
    )
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** The commitment true-up line with what it was computed from. */
function withCommitmentBasis(fee: AssembledFee, assembled: AssembledInvoice, input: NewInvoice): AssembledFee {
  return { ...fee, basis: commitmentFeeBasis(assembled.commitment!, input.assembly?.commitment_proration) };
}

/** When a finalized invoice becomes overdue if unpaid (src/domain/invoice-due.ts), in the customer's zone. */
export async function invoiceOverdueAt(
  db: Db,
  invoice: Pick<InvoiceDoc, 'payment_due_date' | 'customer_id' | 'organization_id'>,
): Promise<string | null> {
  if (!invoice.payment_due_date) return null;
  const [customer, organization] = await Promise.all([
    db.models.Customer.findById(invoice.customer_id, { timezone: 1 }).lean(),
    db.models.Organization.findById(invoice.organization_id, { timezone: 1 }).lean(),
  ]);
  return overdueAt(invoice.payment_due_date, customer?.timezone ?? organization?.timezone ?? 'UTC');
}

/**
 * Makes sure an invoice has its workflow: a command that reaches an invoice the moment it is
 * issued (shown finalized before createInvoice has started its workflow) starts it, as that
 * would, instead of finding none. A running one is kept, one that ended is not started again.
 */
export async function ensureWorkflowOfInvoice(db: Db, temporal: TemporalClient, invoiceId: string): Promise<void> {
  const invoice = await db.models.Invoice.findById(invoiceId).lean();
  if (!invoice) return;
  await ensureInvoiceWorkflow(
    temporal,
    invoice,
    await clockOfCustomerId(db, invoice.customer_id),
    await invoiceOverdueAt(db, invoice),
    await customerExternalIdOf(db, invoice.customer_id),
  );
}

async function customerExternalIdOf(db: Db, customerId: string): Promise<string | null> {
  return (await db.models.Customer.findById(customerId, { external_id: 1 }).lean())?.external_id ?? null;
}

/** Starts the invoice's workflow: a running one is kept, one that ended is not started again. */
async function ensureInvoiceWorkflow(
  temporal: TemporalClient,
  invoice: Pick<
    InvoiceDoc,
    '_id' | 'organization_id' | 'customer_id' | 'status' | 'created_at' | 'grace_period_days' | 'number' | 'total' | 'currency'
  > & {
    payment_overdue?: boolean;
  },
  clock: ClockRef | null,
  overdueAt: string | null,
  customerExternalId: string | null,
): Promise<void> {
  try {
    await startInvoiceWorkflow(
      temporal,
      {
        invoiceId: invoice._id,
        createdAt: invoice.created_at.toISOString(),
        gracePeriodDays: invoice.grace_period_days,
        status: invoice.status,
        clock,
        labels: {
          number: invoice.number,
          totalCents: Math.round(Number(invoice.total.toString())),
          currency: invoice.currency,
          customerExternalId,
        },
        ...(invoice.status === 'finalized' ? { overdueAt, paymentOverdue: invoice.payment_overdue ?? false } : {}),
      },
      { organizationId: invoice.organization_id, customerId: invoice.customer_id },
    );
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

type InvoiceEventType = 'invoice.created' | 'invoice.finalized' | 'invoice.paid' | 'invoice.voided' | 'invoice.payment_overdue';

/** An invoice's event: the invoice as its payload shows it, and when it happened. */
interface InvoiceEvent {
  invoice: InvoiceDoc;
  type: InvoiceEventType;
  at: Date;
}

/**
 * Events of one invoice that happen together (created and finalized at once), in their order:
 * one write and one read of the endpoints for all (emitEvents). `known` spares reads: the invoice's
 * fees, and the organization's read flags (no endpoint ever: no delivery to look for).
 */
async function emitInvoiceEvents(
  db: Db,
  deps: EmitDeps,
  events: InvoiceEvent[],
  known: { fees?: FeeDoc[] | undefined; organization?: OrganizationReadFlags } = {},
): Promise<void> {
  const fees = known.fees ?? (await db.models.Fee.find({ invoice_id: events[0]!.invoice._id }).sort({ key: 1 }).lean());
  await emitEvents(
    deps,
    events.map(({ invoice, type, at }) => ({
      organizationId: invoice.organization_id,
      type,
      idempotencyKey: `invoice/${invoice._id}/${type}`,
      object: toInvoiceResource(invoice, fees),
      occurredAt: at,
      customerId: invoice.customer_id,
    })),
    { organization: known.organization ?? null },
  );
}

/**
 * Finalizes a draft (billing-rules.md, Invoice life): the next number of the organization's
 * gapless sequence, issuing and due dates, credit notes then wallets against what is due, the
 * coupons' consumption, invoice.finalized; a total of zero is paid at once. Idempotent at every
 * step: the number, the credits and the consumptions are all keyed by the invoice.
 */
export async function finalizeInvoice(
  db: Db,
  deps: InvoiceDeps,
  invoiceId: string,
  at: Date,
  /** withCreatedEvent: an invoice finalized at its creation, whose invoice.created goes out with invoice.finalized. */
  options: { withCreatedEvent?: boolean } = {},
): Promise<InvoiceDoc> {
  const { Customer, Invoice, Organization } = db.models;
  const invoice = await Invoice.findById(invoiceId).lean();
  if (!invoice) throw new Error(`invoice ${invoiceId} not found`);
  if (invoice.deleted_at) return invoice;
  const createdEvent = options.withCreatedEvent ? { invoice, at: invoice.created_at } : undefined;
  // A retry after a crash between the status change and what follows it: do what follows again
  // (each consequence is idempotent), so nothing is lost.
  if (invoice.status !== 'draft') return invoice.finalized_at ? afterFinalization(db, deps, invoice, at, { createdEvent }) : invoice;
  const [organization, customer] = await Promise.all([
    Organization.findById(invoice.organization_id).lean(),
    Customer.findById(invoice.customer_id, { timezone: 1, ...readFlagsProjection(CUSTOMER_READ_FLAGS) }).lean(),
  ]);
  if (!organization) throw new Error(`organization of invoice ${invoiceId} not found`);
  return finalizeDraft(db, deps, invoice, at, {
    organization,
    customer,
    timezone: customer?.timezone ?? organization.timezone,
    createdEvent,
  });
}

/**
 * What the finalization of a draft already read knows (createInvoice finalizing what it just
 * created): its organization, the customer's time zone, the customer's applied coupons as
 * appliedCouponsOf gives them for this invoice, and its fees.
 */
interface DraftContext {
  organization: Pick<OrganizationDoc, 'document_number_prefix'> & OrganizationReadFlags;
  /** Its read flags: what it never had is not looked for (src/db/read-flags.ts). */
  customer: CustomerReadFlags | null;
  timezone: string;
  coupons?: AppliedCoupon[];
  fees?: FeeDoc[];
  /** The invoice as created, when its invoice.created goes out with invoice.finalized. */
  createdEvent?: { invoice: InvoiceDoc; at: Date } | undefined;
}

async function finalizeDraft(db: Db, deps: InvoiceDeps, invoice: InvoiceDoc, at: Date, known: DraftContext): Promise<InvoiceDoc> {
  const { Invoice } = db.models;
  const invoiceId = invoice._id;
  const finalized = await Invoice.findOneAndUpdate(
    { _id: invoiceId, status: 'draft' },
    { $set: await finalization(db, deps, invoice, at, known) },
    { returnDocument: 'after' },
  ).lean();
  // Counted by the status change only (a retried activity finds the invoice finalized: null here).
  if (finalized) countInvoiceFinalized(finalized);
  return afterFinalization(db, deps, finalized ?? (await Invoice.findById(invoiceId).lean())!, at, known);
}

/** What finalization reads of an invoice: a stored draft, or one about to be written finalized. */
type Finalizing = Pick<
  InvoiceDoc,
  | '_id'
  | 'organization_id'
  | 'customer_id'
  | 'currency'
  | 'invoice_type'
  | 'net_payment_term'
  | 'subtotal'
  | 'tax_amount'
  | 'progressive_billing_credit_amount_cents'
>;

/**
 * What finalizing an invoice sets (its number, issuing and due dates, its settlement) with the
 * writes those take, each keyed by the invoice so that a retry takes the same: the number of the
 * organization's gapless sequence, the coupons' claims, the credit notes and wallet credits applied.
 */
async function finalization(db: Db, deps: InvoiceDeps, invoice: Finalizing, at: Date, known: DraftContext) {
  const invoiceId = invoice._id;
  const sequence = await takeDocumentNumber(db, { organizationId: invoice.organization_id, kind: 'invoice', documentId: invoiceId });
  const { issuingDate, paymentDueDate } = invoiceDueDates(at, invoice.net_payment_term, known.timezone);

  // Coupons are used when an invoice is finalized, not when its draft was generated: drafts
  // waiting out a grace period would otherwise each take the same `once` coupon. The draft's
  // coupons were a preview; what is due is recomputed with the ones this finalization claimed.
  const scope = { organizationId: invoice.organization_id, customerId: invoice.customer_id, currency: invoice.currency, invoiceId, at };
  const settled = await settleDraft(invoice, {
    coupons: () => claimCoupons(db, invoice, at, mayHave(known.customer, 'has_applied_coupons') ? known.coupons : []),
    creditNotes: async (due) =>
      mayHave(known.customer, 'has_credit_notes')
        ? (await applyCreditNotesToInvoice(db, { ...scope, amountCents: due })).totalCents
        : new Dec(0),
    wallets: async (due) =>
      mayHave(known.customer, 'has_wallets')
        ? (await consumeWalletsForInvoice(db, { ...scope, amountCents: due }, deps)).totalCents
        : new Dec(0),
  });
  return {
    number: invoiceNumber(known.organization.document_number_prefix, sequence),
    sequential_id: sequence,
    issuing_date: issuingDate,
    payment_due_date: paymentDueDate,
    ...settlementFields(settled),
    finalized_at: at,
    finalized_by: activityOrigin(),
    ...(settled.paid ? { paid_at: at, payment_status: 'succeeded' as const } : {}),
  };
}

/** Where finalization takes what it subtracts from: each returns what it took (a preview only reads). */
export interface SettlementSources {
  coupons(): Promise<{ applications: CouponApplication[]; total: Decimal }>;
  /** Applies credit notes to at most `due`. */
  creditNotes(due: Decimal): Promise<Decimal>;
  /** Consumes wallet credits for at most `due`. */
  wallets(due: Decimal): Promise<Decimal>;
}

export interface Settlement {
  coupons: { applications: CouponApplication[]; total: Decimal };
  creditNotesCents: Decimal;
  prepaidCents: Decimal;
  /** What is left to pay, rounded; zero or less is paid at once. */
  total: Decimal;
  paid: boolean;
}

/**
 * What finalization subtracts from a draft, in the pipeline's order (billing-rules.md): coupons
 * off the subtotal, the progressive billing credits, then credit notes, then wallets against what
 * remains due. A `credit` invoice (a purchase of wallet credits) takes no coupon, credit note or
 * wallet credit: it is paid in money, and the credits it buys pay for the taxed invoices later.
 */
export async function settleDraft(
  invoice: Pick<InvoiceDoc, 'invoice_type' | 'subtotal' | 'tax_amount' | 'progressive_billing_credit_amount_cents'>,
  sources: SettlementSources,
): Promise<Settlement> {
  const purchase = invoice.invoice_type === 'credit';
  const coupons = purchase ? { applications: [], total: new Dec(0) } : await sources.coupons();
  const due = nonNegative(
    amountOf(invoice.subtotal)
      .plus(amountOf(invoice.tax_amount))
      .minus(coupons.total)
      .minus(amountOf(invoice.progressive_billing_credit_amount_cents)),
  );
  const creditNotesCents = !purchase && due.greaterThan(0) ? await sources.creditNotes(due) : new Dec(0);
  const afterCredits = due.minus(creditNotesCents);
  const prepaidCents = !purchase && afterCredits.greaterThan(0) ? await sources.wallets(afterCredits) : new Dec(0);
  const total = roundCents(afterCredits.minus(prepaidCents));
  return { coupons, creditNotesCents, prepaidCents, total, paid: total.lessThanOrEqualTo(0) };
}

/** The invoice fields a settlement decides. */
export function settlementFields(settled: Settlement) {
  return {
    status: settled.paid ? ('paid' as const) : ('finalized' as const),
    coupons_amount_cents: money(settled.coupons.total),
    applied_coupons: settled.coupons.applications.map((c) => ({
      applied_coupon_id: c.applied_coupon_id,
      coupon_id: c.coupon_id,
      coupon_code: c.coupon_code,
      amount_cents: money(c.amount_cents),
    })),
    credit_notes_amount_cents: money(settled.creditNotesCents),
    prepaid_credit_amount: money(settled.prepaidCents),
    total: money(settled.paid ? 0 : settled.total),
  };
}

/** What follows the status change of finalization; idempotent, so a retry may run it again. */
async function afterFinalization(
  db: Db,
  deps: InvoiceDeps,
  invoice: InvoiceDoc,
  at: Date,
  known: Partial<Pick<DraftContext, 'organization' | 'fees' | 'createdEvent'>>,
): Promise<InvoiceDoc> {
  const finalizedAt = invoice.finalized_at ?? at;
  // Claimed before the status change already; an invoice finalized before claims existed records
  // its uses here (each use carries the invoice as a marker, so this is a no-op otherwise).
  for (const used of invoice.applied_coupons) await consumeCoupon(db, invoice._id, used.applied_coupon_id, finalizedAt);
  const finalizedEvent: InvoiceEvent = { invoice, type: 'invoice.finalized', at: finalizedAt };
  await emitInvoiceEvents(
    db,
    deps,
    known.createdEvent ? [{ ...known.createdEvent, type: 'invoice.created' }, finalizedEvent] : [finalizedEvent],
    { fees: known.fees, ...(known.organization ? { organization: known.organization } : {}) },
  );
  // Covered at finalization (coupons, credit notes, wallets): paid with it.
  if (invoice.status === 'paid' && invoice.paid_at && invoice.paid_at.getTime() === finalizedAt.getTime()) {
    await afterPaid(db, deps, invoice, finalizedAt);
  }
  return invoice;
}

/**
 * What follows an invoice's payment, however it came (at finalization, by its settlements):
 * every fee paid (a refund later marks them refunded), invoice.paid, a wallet purchase settled,
 * the payment requests holding it told. Idempotent: a retry after a crash completes it.
 */
async function afterPaid(db: Db, deps: InvoiceDeps, invoice: InvoiceDoc, at: Date): Promise<void> {
  await db.models.Fee.updateMany(
    { invoice_id: invoice._id, payment_status: { $in: ['pending', 'failed'] } },
    { $set: { payment_status: 'succeeded' } },
  );
  await emitInvoiceEvents(db, deps, [{ invoice, type: 'invoice.paid', at: invoice.paid_at ?? at }]);
  await settleWalletPurchase(deps, invoice, at);
  await notifyInvoiceLeft(db, deps.temporal, invoice);
}

const amountOf = (value: Parameters<typeof fromDecimal128>[0]) => fromDecimal128(value) ?? new Dec(0);

/**
 * The coupons a finalizing invoice uses: the customer's coupons active now, applied in order, each
 * use claimed on its applied coupon before the invoice is finalized. When another invoice used one
 * up meanwhile, the coupons are applied again without it (the uses already claimed stay this
 * invoice's: a retry finds them by their marker).
 */
async function claimCoupons(
  db: Db,
  invoice: Pick<InvoiceDoc, '_id' | 'organization_id' | 'customer_id' | 'currency' | 'subtotal'>,
  at: Date,
  preloaded?: AppliedCoupon[],
): Promise<{ applications: CouponApplication[]; total: Dec }> {
  for (let round = 1; ; round++) {
    const result = applyCoupons({
      currency: invoice.currency,
      subtotal: amountOf(invoice.subtotal),
      applied_coupons:
        round === 1 && preloaded ? preloaded : await appliedCouponsOf(db, invoice.organization_id, invoice.customer_id, invoice._id),
    });
    let lost = false;
    for (const application of result.applications) {
      if (!(await consumeCoupon(db, invoice._id, application.applied_coupon_id, at))) {
        lost = true;
        break;
      }
    }
    if (!lost) return { applications: result.applications, total: result.coupons_amount_cents };
    if (round >= 5) throw new Error(`coupons of invoice ${invoice._id} kept being used by other invoices`);
  }
}

/**
 * Records one use of an applied coupon by an invoice (specification, Coupon consumption): once →
 * terminated, recurring → one period less (terminated at zero), forever → unchanged; a coupon that
 * is not reusable ends with its application. The use carries the invoice as a marker, so a retry
 * does not count twice. False when the coupon is no longer active and this invoice did not use it.
 */
async function consumeCoupon(db: Db, invoiceId: string, appliedCouponId: string, at: Date): Promise<boolean> {
  const applied = await db.models.AppliedCoupon.findById(appliedCouponId).lean();
  if (!applied) return false;
  if (applied.frequency === 'forever') return applied.status === 'active';
  const { remaining, ends } = couponUse(applied);
  // Raw collection: the consumption marker is bookkeeping outside the mongoose schema.
  const updated = await db.models.AppliedCoupon.collection.findOneAndUpdate(
    {
      _id: applied._id,
      status: 'active',
      consumed_invoice_ids: { $ne: invoiceId },
      frequency_duration_remaining: applied.frequency_duration_remaining,
    } as never,
    {
      $set: {
        frequency_duration_remaining: applied.frequency === 'recurring' ? Math.max(remaining, 0) : applied.frequency_duration_remaining,
        ...(ends ? { status: 'terminated', terminated_at: at, exclusive_key: applied._id } : {}),
      },
      $push: { consumed_invoice_ids: invoiceId },
    } as never,
    { returnDocument: 'after' },
  );
  if (!updated) return (await db.models.AppliedCoupon.exists({ _id: applied._id, consumed_invoice_ids: invoiceId } as never)) !== null;
  if (ends) {
    const coupon = await db.models.Coupon.findById(applied.coupon_id, { reusable: 1 }).lean();
    if (coupon && !coupon.reusable) {
      await db.models.Coupon.updateOne({ _id: coupon._id, status: 'active' }, { $set: { status: 'terminated', terminated_at: at } });
    }
  }
  return true;
}

/** One use of an applied coupon: the periods a recurring one has left after it, and whether the use ends it. */
export function couponUse(applied: {
  frequency: AppliedCouponDoc['frequency'];
  frequency_duration?: number | null;
  frequency_duration_remaining?: number | null;
}): { remaining: number; ends: boolean } {
  if (applied.frequency === 'forever') return { remaining: 0, ends: false };
  const remaining = applied.frequency === 'recurring' ? (applied.frequency_duration_remaining ?? applied.frequency_duration ?? 1) - 1 : 0;
  return { remaining, ends: applied.frequency === 'once' || remaining <= 0 };
}

/** POST .../pay: a manual payment settles what is left; the invoice is paid. */
export async function payInvoice(db: Db, deps: InvoiceDeps, invoiceId: string, at: Date): Promise<InvoiceDoc> {
  const invoice = (await db.models.Invoice.findById(invoiceId).lean())!;
  // A retry after a crash past the status change: what follows it is done again (idempotent).
  if (invoice.status === 'paid') return markPaidIfSettled(db, deps, invoiceId, at);
  if (invoice.status !== 'finalized') return invoice;
  const left = amountToSettle(invoice).minus(await settledAmount(db, invoiceId));
  if (left.greaterThan(0)) {
    await recordSettlement(db, {
      organizationId: invoice.organization_id,
      invoiceId,
      type: 'payment',
      sourceId: `manual:${invoiceId}`,
      amountCents: left,
    });
  }
  return markPaidIfSettled(db, deps, invoiceId, at);
}

/**
 * An invoice whose settlements reach its total becomes paid, exactly once (guarded update); a paid
 * credit invoice brings its wallet purchase's credits (settleWalletPurchase, once however often
 * this runs).
 */
export async function markPaidIfSettled(db: Db, deps: InvoiceDeps, invoiceId: string, at: Date): Promise<InvoiceDoc> {
  const invoice = (await db.models.Invoice.findById(invoiceId).lean())!;
  // Paid already (a retry after a crash past the status change): what follows it again (idempotent).
  if (invoice.status === 'paid') {
    await afterPaid(db, deps, invoice, at);
    return invoice;
  }
  if (invoice.status !== 'finalized') return invoice;
  if ((await settledAmount(db, invoiceId)).lessThan(amountToSettle(invoice))) return invoice;
  const paid = await db.models.Invoice.findOneAndUpdate(
    { _id: invoiceId, status: 'finalized' },
    { $set: { status: 'paid', paid_at: at, payment_status: 'succeeded', payment_overdue: false } },
    { returnDocument: 'after' },
  ).lean();
  const current = paid ?? (await db.models.Invoice.findById(invoiceId).lean())!;
  if (current.status === 'paid') await afterPaid(db, deps, current, at);
  return current;
}

/**
 * The `credit` invoice of a wallet purchase (api-contract.md, Wallets): one `credit` fee of
 * credits x rate_amount x 100 cents (untaxed: src/domain/taxes.ts), finalized at creation, keyed
 * by the purchase (a retry finds the same invoice). Its payment settles the purchase.
 */
export async function createCreditInvoice(db: Db, deps: InvoiceDeps, request: CreditInvoiceRequest): Promise<InvoiceDoc> {
  const invoice = await createInvoice(db, deps, {
    organizationId: request.organizationId,
    customerId: request.customerId,
    invoiceType: 'credit',
    currency: request.currency,
    idempotencyKey: request.idempotencyKey,
    fees: [
      {
        key: 'credit',
        fee_type: 'credit',
        invoice_display_name: 'Prepaid credits',
        amount_cents: request.amountCents,
        units: request.credits,
        events_count: 0,
        unit_amount_cents: request.rateAmount.times(100),
      },
    ],
    gracePeriodDays: 0,
    finalizeAtCreation: true,
    at: request.at,
  });
  if (invoice._id !== request.invoiceId) throw new Error(`credit invoice of wallet purchase ${request.transactionId} has an unexpected id`);
  return invoice;
}

export async function voidInvoice(db: Db, deps: InvoiceDeps, invoiceId: string, at: Date): Promise<InvoiceDoc> {
  const voided = await db.models.Invoice.findOneAndUpdate(
    { _id: invoiceId, status: 'finalized' },
    { $set: { status: 'voided', voided_at: at, payment_overdue: false } },
    { returnDocument: 'after' },
  ).lean();
  const current = voided ?? (await db.models.Invoice.findById(invoiceId).lean())!;
  if (current.status === 'voided') {
    await emitInvoiceEvents(db, deps, [{ invoice: current, type: 'invoice.voided', at: current.voided_at ?? at }]);
    await notifyInvoiceLeft(db, deps.temporal, current);
  }
  return current;
}

/** Only drafts are deleted (soft: the record stays, hidden, for the audit trail). */
export async function deleteDraftInvoice(db: Db, invoiceId: string, at: Date): Promise<InvoiceDoc> {
  const deleted = await db.models.Invoice.findOneAndUpdate(
    { _id: invoiceId, status: 'draft', deleted_at: null },
    { $set: { deleted_at: at } },
    { returnDocument: 'after' },
  ).lean();
  return deleted ?? (await db.models.Invoice.findById(invoiceId).lean())!;
}

/** The due date passed unpaid: payment_overdue, invoice.payment_overdue (once). */
export async function markInvoiceOverdue(db: Db, deps: InvoiceDeps, invoiceId: string, at: Date): Promise<InvoiceDoc> {
  const overdue = await db.models.Invoice.findOneAndUpdate(
    { _id: invoiceId, status: 'finalized', payment_overdue: false },
    { $set: { payment_overdue: true } },
    { returnDocument: 'after' },
  ).lean();
  const current = overdue ?? (await db.models.Invoice.findById(invoiceId).lean())!;
  if (current.status === 'finalized' && current.payment_overdue) {
    await emitInvoiceEvents(db, deps, [{ invoice: current, type: 'invoice.payment_overdue', at }]);
    // The customer's dunning campaign, if one governs it, looks at its overdue invoices.
    await notifyOverdue(db, deps.temporal, current);
  }
  return current;
}
