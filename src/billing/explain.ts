// GET /v1/invoices/{id}/explain: how an invoice came to its total, from what billing stored when it
// issued it. Each fee carries its basis (src/billing/fee-basis.ts: the plan and charge as they were,
// the usage read); the charge model's steps come from running the domain's own pricing again on
// the billed units (src/domain/charge-steps.ts), never from a second implementation. The invoice's
// arithmetic is then replayed in the pipeline's order (billing-rules.md, Invoice pipeline): fees,
// subtotal, taxes, coupons, progressive billing credits, credit notes, wallets, each step with the
// running figure, and checked against every stored amount (`adds_up`).
import type Decimal from 'decimal.js';
import type { Db } from '../db';
import { fromDecimal128 } from '../db/decimal';
import type { FeeDoc } from '../db/models/fee';
import type { InvoiceDoc } from '../db/models/invoice';
import { matchingFilterIndex } from '../domain/charge-filters';
import { type ChargeModel, isChargeModel } from '../domain/charge-models';
import { chargeModelSteps } from '../domain/charge-steps';
import { dec, sum, toDecimal4String, ZERO } from '../domain/money';
import { iso } from '../resources/format';
import type { ExplanationStep, FeeExplanation, InvoiceExplanation } from '../resources/invoice-explanation';
import type { BaseFeeBasis, ChargeFeeBasis, CommitmentFeeBasis, FeeBasis } from './fee-basis';

const d4 = (value: Decimal) => toDecimal4String(value);
const amount = (value: unknown): Decimal => fromDecimal128(value) ?? ZERO;
const plain = (value: unknown): string | null => fromDecimal128(value)?.toFixed() ?? null;

function basisOf(fee: FeeDoc): FeeBasis | null {
  const basis = fee.basis as FeeBasis | null | undefined;
  return basis && (basis.kind === 'charge' || basis.kind === 'base_fee' || basis.kind === 'commitment') ? basis : null;
}

interface EventRange {
  count: number;
  first: Date | null;
  last: Date | null;
}

/**
 * The events stored in each charge line's range, per bucket: one query per (metric, range),
 * grouped by the events' dimensions, which are matched to the charge's filters as the daily rows
 * are (src/usage/period-usage.ts).
 */
async function eventRanges(db: Db, invoice: InvoiceDoc, fees: FeeDoc[]): Promise<Map<string, EventRange>> {
  const byRange = new Map<string, { basis: ChargeFeeBasis; fees: { fee: FeeDoc; basis: ChargeFeeBasis }[] }>();
  for (const fee of fees) {
    const basis = basisOf(fee);
    if (basis?.kind !== 'charge' || basis.line !== 'bucket' || !fee.subscription_id) continue;
    const key = `${basis.metric.id}|${basis.usage.from}|${basis.usage.to}|${basis.charge.id}`;
    const group = byRange.get(key) ?? { basis, fees: [] };
    group.fees.push({ fee, basis });
    byRange.set(key, group);
  }
  const ranges = new Map<string, EventRange>();
  await Promise.all(
    [...byRange.values()].map(async ({ basis, fees: members }) => {
      const rows = await db.models.Event.collection
        .aggregate<{ _id: string | null; count: number; first: Date; last: Date }>([
          {
            $match: {
              organization_id: invoice.organization_id,
              subscription_ids: invoice.subscription_id,
              billable_metric_id: basis.metric.id,
              timestamp: { $gte: new Date(basis.usage.from), $lt: new Date(basis.usage.to) },
            },
          },
          { $group: { _id: '$dimensions_key', count: { $sum: 1 }, first: { $min: '$timestamp' }, last: { $max: '$timestamp' } } },
        ])
        .toArray();
      const filters = basis.charge.filters;
      for (const { fee, basis: feeBasis } of members) {
        const index = feeBasis.filter_id === null ? null : filters.findIndex((f) => f.id === feeBasis.filter_id);
        const range: EventRange = { count: 0, first: null, last: null };
        for (const row of rows) {
          const dims = JSON.parse(row._id || '{}') as Record<string, string>;
          if (matchingFilterIndex(filters, dims) !== index) continue;
          range.count += row.count;
          if (range.first === null || row.first < range.first) range.first = row.first;
          if (range.last === null || row.last > range.last) range.last = row.last;
        }
        ranges.set(fee._id, range);
      }
    }),
  );
  return ranges;
}

/** The charge model's steps over the billed units, or the stored amount in one step when they cannot be reproduced. */
function pricingOf(basis: ChargeFeeBasis): FeeExplanation['pricing'] {
  const billed = dec(basis.model.amount_cents);
  let steps: NonNullable<FeeExplanation['pricing']>['steps'] = [];
  let reproduced = false;
  try {
    if (!isChargeModel(basis.charge.charge_model)) throw new Error('unknown charge model');
    const model: ChargeModel = basis.charge.charge_model;
    const result = chargeModelSteps(model, basis.properties, {
      units: dec(basis.usage.units),
      eventsCount: basis.usage.events_count,
      perEventValues: [],
    });
    if (result.amount.equals(billed)) {
      reproduced = true;
      let running = ZERO;
      steps = result.steps.map((step) => {
        running = running.plus(step.amount);
        return {
          description: step.description,
          from_value: step.from_value,
          to_value: step.to_value,
          units: step.units.toString(),
          per_unit_amount: step.per_unit_amount?.toString() ?? null,
          rate: step.rate?.toString() ?? null,
          flat_amount: step.flat_amount?.toString() ?? null,
          amount_cents: d4(step.amount),
          running_amount_cents: d4(running),
        };
      });
    }
  } catch {
    // Priced from per-event values that are not kept (percentage allowances, dynamic): shown as billed.
  }
  if (!reproduced) {
    steps = [
      {
        description: `${basis.charge.charge_model} as billed (it prices per event; the events are not replayed here)`,
        from_value: null,
        to_value: null,
        units: basis.model.units,
        per_unit_amount: null,
        rate: null,
        flat_amount: null,
        amount_cents: d4(billed),
        running_amount_cents: d4(billed),
      },
    ];
  }
  const nullable = (value: string | null) => (value === null ? null : d4(dec(value)));
  return {
    steps,
    model_amount_cents: d4(billed),
    reproduced,
    proration:
      basis.caps.used_days === basis.caps.period_days ? null : { used_days: basis.caps.used_days, period_days: basis.caps.period_days },
    charge_amount_before_caps_cents: d4(dec(basis.caps.amount_before_caps_cents)),
    min_amount_cents: nullable(basis.caps.min_amount_cents),
    max_amount_cents: nullable(basis.caps.max_amount_cents),
    max_reduction_cents: d4(dec(basis.caps.reduction_cents)),
    min_true_up_cents: d4(dec(basis.caps.min_true_up_cents)),
  };
}

function chargeOf(basis: ChargeFeeBasis): NonNullable<FeeExplanation['charge']> {
  const filter = basis.filter_id === null ? undefined : basis.charge.filters.find((f) => f.id === basis.filter_id);
  return {
    id: basis.charge.id,
    charge_model: basis.charge.charge_model,
    billable_metric: {
      id: basis.metric.id,
      code: basis.metric.code,
      name: basis.metric.name,
      aggregation_type: basis.metric.aggregation_type,
      field_name: basis.metric.field_name,
      recurring: basis.metric.recurring,
    },
    filter: filter ? { id: filter.id, values: filter.values } : null,
    properties: basis.properties,
    pay_in_advance: basis.charge.pay_in_advance,
    prorated: basis.charge.prorated,
    min_amount_cents: basis.charge.min_amount_cents,
    max_amount_cents: basis.charge.max_amount_cents,
  };
}

function usageOf(basis: ChargeFeeBasis, events: EventRange | undefined): FeeExplanation['usage'] {
  const { sources } = basis.usage;
  return {
    from: basis.usage.from,
    to: basis.usage.to,
    units: basis.usage.units,
    events_count: basis.usage.events_count,
    daily_rows: {
      count: sources.daily_rows,
      events_count: sources.daily_rows_events,
      first_usage_date: sources.first_usage_date,
      last_usage_date: sources.last_usage_date,
    },
    raw_events: { count: sources.raw_events, first_event_at: sources.first_event_at, last_event_at: sources.last_event_at },
    events: { count: events?.count ?? 0, first_event_at: iso(events?.first ?? null), last_event_at: iso(events?.last ?? null) },
  };
}

function baseFeeOf(basis: BaseFeeBasis): FeeExplanation['base_fee'] {
  return {
    plan_amount_cents: basis.plan.amount_cents,
    interval: basis.plan.interval,
    used_days: basis.used_days,
    period_days: basis.period_days,
  };
}

function commitmentOf(basis: CommitmentFeeBasis): FeeExplanation['commitment'] {
  return {
    commitment_amount_cents: d4(dec(basis.commitment_amount_cents)),
    charges_amount_cents: d4(dec(basis.charges_amount_cents)),
    true_up_amount_cents: d4(dec(basis.true_up_amount_cents)),
    used_days: basis.used_days,
    period_days: basis.period_days,
  };
}

function explainFee(fee: FeeDoc, events: EventRange | undefined): FeeExplanation {
  const basis = basisOf(fee);
  const charge = basis?.kind === 'charge' ? basis : null;
  const bucket = charge?.line === 'bucket' ? charge : null;
  return {
    fee_id: fee._id,
    key: fee.key,
    fee_type: fee.fee_type,
    invoice_display_name: fee.invoice_display_name ?? null,
    period_started_at: iso(fee.period_started_at),
    period_ended_at: iso(fee.period_ended_at),
    units: d4(amount(fee.units)),
    events_count: fee.events_count,
    unit_amount_cents: d4(amount(fee.unit_amount_cents)),
    amount_cents: d4(amount(fee.amount_cents)),
    taxes_amount_cents: d4(amount(fee.taxes_amount_cents)),
    total_amount_cents: d4(amount(fee.total_amount_cents)),
    taxes: (fee.applied_taxes ?? []).map((t) => ({
      tax_id: t.tax_id,
      tax_code: t.tax_code,
      tax_rate: plain(t.tax_rate) ?? '0',
      amount_cents: d4(amount(t.amount_cents)),
    })),
    recorded: basis !== null,
    base_fee: basis?.kind === 'base_fee' ? baseFeeOf(basis) : null,
    charge: charge ? chargeOf(charge) : null,
    usage: bucket ? usageOf(bucket, events) : null,
    pricing: bucket ? pricingOf(bucket) : null,
    minimum_true_up:
      charge?.line === 'minimum'
        ? {
            min_amount_cents: charge.caps.min_amount_cents === null ? null : d4(dec(charge.caps.min_amount_cents)),
            charge_amount_before_caps_cents: d4(dec(charge.caps.amount_before_caps_cents)),
          }
        : null,
    commitment: basis?.kind === 'commitment' ? commitmentOf(basis) : null,
    event: fee.event_id || fee.event_transaction_id ? { id: fee.event_id ?? null, transaction_id: fee.event_transaction_id ?? null } : null,
  };
}

function feeLabel(fee: FeeExplanation): string {
  const name = fee.invoice_display_name;
  if (fee.base_fee)
    return `${name ?? 'base fee'}: ${fee.base_fee.used_days} of ${fee.base_fee.period_days} days of ${fee.base_fee.plan_amount_cents}`;
  if (fee.charge) {
    const metric = fee.charge.billable_metric.code;
    const filter = fee.charge.filter
      ? ` (${Object.entries(fee.charge.filter.values)
          .map(([k, v]) => `${k}: ${v.join(', ')}`)
          .join('; ')})`
      : '';
    const what = fee.minimum_true_up ? 'minimum of ' : '';
    return `${name ?? `${what}${metric}${filter}`}: ${fee.units} units`;
  }
  return `${name ?? fee.fee_type}: ${fee.units} units`;
}

/** Replays the invoice's arithmetic from its fees to its total; `adds_up` when every stored amount is reached. */
class Ledger {
  running = ZERO;
  readonly steps: ExplanationStep[] = [];
  private consistent = true;

  add(kind: ExplanationStep['kind'], refId: string | null, description: string, change: Decimal): void {
    this.running = this.running.plus(change);
    this.steps.push({ kind, ref_id: refId, description, amount_cents: d4(change), running_total_cents: d4(this.running) });
  }

  /** Brings the running figure to a stored rounded amount (when rounding changed it). */
  roundTo(kind: 'subtotal_rounding' | 'tax_rounding', stored: Decimal, description: string): void {
    const change = stored.minus(this.running);
    if (!change.isZero()) this.add(kind, null, description, change);
  }

  expect(actual: Decimal, stored: Decimal): void {
    if (!actual.equals(stored)) this.consistent = false;
  }

  get addsUp(): boolean {
    return this.consistent;
  }
}

export async function explainInvoice(db: Db, invoice: InvoiceDoc): Promise<InvoiceExplanation> {
  const { AppliedCoupon, CreditNote, Fee, Wallet, WalletTransaction } = db.models;
  const scope = { organization_id: invoice.organization_id };
  const [fees, appliedCoupons, notes, consumptions] = await Promise.all([
    Fee.find({ ...scope, invoice_id: invoice._id })
      .sort({ key: 1 })
      .lean(),
    AppliedCoupon.find({ ...scope, _id: { $in: (invoice.applied_coupons ?? []).map((c) => c.applied_coupon_id) } }).lean(),
    CreditNote.find({ ...scope, customer_id: invoice.customer_id, currency: invoice.currency, applied_invoice_ids: invoice._id })
      .sort({ created_at: 1, sequential_id: 1, _id: 1 })
      .lean(),
    WalletTransaction.find({
      ...scope,
      customer_id: invoice.customer_id,
      invoice_id: invoice._id,
      transaction_type: 'outbound',
      status: 'invoiced',
    }).lean(),
  ]);
  const [events, wallets] = await Promise.all([
    eventRanges(db, invoice, fees),
    Wallet.find(
      { ...scope, _id: { $in: consumptions.map((t) => t.wallet_id) } },
      { name: 1, code: 1, priority: 1, rate_amount: 1, created_at: 1 },
    ).lean(),
  ]);
  const explained = fees.map((fee) => explainFee(fee, events.get(fee._id)));
  const ledger = new Ledger();

  // 1. Fees, then the subtotal in whole cents.
  for (const fee of explained) ledger.add('fee', fee.fee_id, feeLabel(fee), dec(fee.amount_cents));
  ledger.expect(ledger.running, amount(invoice.fees_amount_cents));
  const subtotal = amount(invoice.subtotal);
  ledger.roundTo('subtotal_rounding', subtotal, 'subtotal rounded to whole cents');
  ledger.expect(ledger.running, subtotal);

  // 2. Taxes: each tax over the fees it applies to, then the invoice's tax amount in whole cents.
  const taxes = new Map<string, { tax_id: string; tax_code: string; tax_rate: string; base: Decimal; amount: Decimal }>();
  for (const fee of explained) {
    for (const tax of fee.taxes) {
      const entry = taxes.get(tax.tax_id) ?? { ...tax, base: ZERO, amount: ZERO };
      entry.base = entry.base.plus(dec(fee.amount_cents));
      entry.amount = entry.amount.plus(dec(tax.amount_cents));
      taxes.set(tax.tax_id, entry);
    }
  }
  for (const tax of taxes.values()) {
    ledger.add('tax', tax.tax_id, `${tax.tax_code} at ${tax.tax_rate} of ${d4(tax.base)}`, tax.amount);
  }
  const taxAmount = amount(invoice.tax_amount);
  ledger.roundTo('tax_rounding', subtotal.plus(taxAmount), 'tax amount rounded to whole cents');
  ledger.expect(ledger.running, subtotal.plus(taxAmount));

  // 3. Coupons, in the order they were applied, each on what remained of the subtotal.
  const couponTerms = new Map(appliedCoupons.map((c) => [c._id, c]));
  let remaining = subtotal;
  const coupons = (invoice.applied_coupons ?? []).map((applied) => {
    const terms = couponTerms.get(applied.applied_coupon_id);
    const value = amount(applied.amount_cents);
    const base = remaining;
    remaining = remaining.minus(value);
    const rate = plain(terms?.percentage_rate);
    ledger.add(
      'coupon',
      applied.applied_coupon_id,
      `coupon ${applied.coupon_code}${rate !== null ? ` (${rate} % of ${d4(base)})` : ''}`,
      value.negated(),
    );
    return {
      applied_coupon_id: applied.applied_coupon_id,
      coupon_id: applied.coupon_id,
      coupon_code: applied.coupon_code,
      coupon_type: terms?.coupon_type ?? null,
      frequency: terms?.frequency ?? null,
      percentage_rate: rate,
      fixed_amount_cents: terms?.amount_cents ? d4(amount(terms.amount_cents)) : null,
      base_amount_cents: d4(base),
      amount_cents: d4(value),
    };
  });
  ledger.expect(sum(coupons.map((c) => dec(c.amount_cents))), amount(invoice.coupons_amount_cents));

  // 4. What this period's progressive billing invoices already billed.
  const progressiveTotal = amount(invoice.progressive_billing_credit_amount_cents);
  const progressive =
    invoice.progressive_billing_credits ??
    (progressiveTotal.isZero() ? [] : [{ invoice_id: null, amount_cents: invoice.progressive_billing_credit_amount_cents }]);
  const progressiveCredits = progressive.map((credit) => {
    const value = amount(credit.amount_cents);
    ledger.add('progressive_billing_credit', credit.invoice_id, 'already billed by a progressive billing invoice', value.negated());
    return { invoice_id: credit.invoice_id, amount_cents: d4(value) };
  });
  ledger.expect(sum(progressiveCredits.map((c) => dec(c.amount_cents))), progressiveTotal);
  // What is due after coupons and progressive credits is never below zero.
  if (ledger.running.isNegative()) ledger.add('floor_at_zero', null, 'nothing is due below zero', ledger.running.negated());

  // 5. Credit notes, oldest first, then 6. wallets in their order of consumption (priority, then age).
  const creditNotes = notes.map((note) => {
    const value = amount(note.applications.find((a) => a.invoice_id === invoice._id)?.amount_cents);
    ledger.add('credit_note', note._id, `credit note ${note.number}`, value.negated());
    return {
      credit_note_id: note._id,
      number: note.number,
      reason: note.reason,
      credit_amount_cents: d4(amount(note.credit_amount_cents)),
      amount_cents: d4(value),
    };
  });
  ledger.expect(sum(creditNotes.map((c) => dec(c.amount_cents))), amount(invoice.credit_notes_amount_cents));

  const walletById = new Map(wallets.map((w) => [w._id, w]));
  const order = (id: string) => {
    const w = walletById.get(id);
    return [w?.priority ?? Number.MAX_SAFE_INTEGER, w?.created_at?.getTime() ?? 0] as const;
  };
  consumptions.sort((a, b) => {
    const [pa, ca] = order(a.wallet_id);
    const [pb, cb] = order(b.wallet_id);
    return pa - pb || ca - cb || (a.wallet_id < b.wallet_id ? -1 : a.wallet_id > b.wallet_id ? 1 : 0);
  });
  const walletLines = consumptions.map((t) => {
    const wallet = walletById.get(t.wallet_id);
    const value = amount(t.amount);
    ledger.add('wallet', t._id, `wallet ${wallet?.name ?? wallet?.code ?? t.wallet_id}`, value.negated());
    return {
      wallet_id: t.wallet_id,
      wallet_transaction_id: t._id,
      name: wallet?.name ?? null,
      code: wallet?.code ?? null,
      priority: wallet?.priority ?? null,
      rate_amount: plain(wallet?.rate_amount),
      credit_amount: plain(t.credit_amount) ?? '0',
      amount_cents: d4(value),
    };
  });
  ledger.expect(sum(walletLines.map((w) => dec(w.amount_cents))), amount(invoice.prepaid_credit_amount));
  ledger.expect(ledger.running, amount(invoice.total));

  return {
    invoice_id: invoice._id,
    number: invoice.number,
    status: invoice.status,
    invoice_type: invoice.invoice_type,
    currency: invoice.currency,
    customer_id: invoice.customer_id,
    subscription_id: invoice.subscription_id ?? null,
    period_started_at: iso(invoice.period_started_at),
    period_ended_at: iso(invoice.period_ended_at),
    plan: invoice.plan ?? null,
    issued_by: originOf(invoice.issued_by),
    finalized_by: originOf(invoice.finalized_by),
    fees: explained,
    taxes: [...taxes.values()].map((t) => ({
      tax_id: t.tax_id,
      tax_code: t.tax_code,
      tax_rate: t.tax_rate,
      fees_amount_cents: d4(t.base),
      amount_cents: d4(t.amount),
    })),
    coupons,
    progressive_billing_credits: progressiveCredits,
    credit_notes: creditNotes,
    wallets: walletLines,
    steps: ledger.steps,
    amounts: {
      fees_amount_cents: d4(amount(invoice.fees_amount_cents)),
      subtotal: d4(subtotal),
      tax_amount: d4(taxAmount),
      coupons_amount_cents: d4(amount(invoice.coupons_amount_cents)),
      progressive_billing_credit_amount_cents: d4(progressiveTotal),
      credit_notes_amount_cents: d4(amount(invoice.credit_notes_amount_cents)),
      prepaid_credit_amount: d4(amount(invoice.prepaid_credit_amount)),
      total: d4(amount(invoice.total)),
    },
    adds_up: ledger.addsUp,
  };
}

function originOf(origin: InvoiceDoc['issued_by']): InvoiceExplanation['issued_by'] {
  if (!origin) return null;
  return { ...origin, recorded_at: new Date(origin.recorded_at).toISOString() };
}
