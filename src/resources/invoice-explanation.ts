// The explanation of an invoice (GET /v1/invoices/{id}/explain): every fee with what it was priced
// from, and the arithmetic from the fees to the total, one signed step at a time. Amounts are cents
// as Decimal(12,4) strings ("1486.0000"); counts are numbers; instants ISO 8601 UTC.
import { z } from 'zod';
import { decimal4, nullableTimestamp, timestamp } from './format';

const signedDecimal4 = z.string().describe('decimal with 4 fractional digits, negative when it lowers the running figure');

export const invoiceOrigin = z
  .object({
    workflow_id: z.string(),
    run_id: z.string(),
    workflow_type: z.string().nullable(),
    activity_type: z.string(),
    activity_id: z.string(),
    attempt: z.number().int(),
    task_queue: z.string(),
    recorded_at: timestamp.describe('wall-clock time of the write (a test clock does not change it)'),
  })
  .describe(
    'The Temporal workflow run and activity that wrote the invoice at this step; null when none did (an API request) or for invoices written before it was recorded',
  )
  .meta({ id: 'InvoiceOrigin' });

const chargeModelStep = z.object({
  description: z.string(),
  from_value: z.number().int().nullable().describe("the tier's first unit (tiered models)"),
  to_value: z.number().int().nullable().describe("the tier's last unit; null: open-ended, or a model without tiers"),
  units: z.string().describe('the units this step prices'),
  per_unit_amount: z.string().nullable(),
  rate: z.string().nullable().describe('a percentage (1.5 = 1.5 %)'),
  flat_amount: z.string().nullable(),
  amount_cents: decimal4,
  running_amount_cents: decimal4,
});

const eventRange = z.object({
  count: z.number().int(),
  first_event_at: nullableTimestamp,
  last_event_at: nullableTimestamp,
});

const feeCharge = z.object({
  id: z.string(),
  charge_model: z.string(),
  billable_metric: z.object({
    id: z.string(),
    code: z.string(),
    name: z.string().nullable(),
    aggregation_type: z.string(),
    field_name: z.string().nullable(),
    recurring: z.boolean(),
  }),
  filter: z
    .object({ id: z.string(), values: z.record(z.string(), z.array(z.string())) })
    .nullable()
    .describe("the charge filter whose bucket this fee bills; null: the charge's default bucket (events matching no filter)"),
  properties: z.record(z.string(), z.unknown()).describe("the properties that priced this bucket (the filter's, else the charge's)"),
  pay_in_advance: z.boolean(),
  prorated: z.boolean(),
  min_amount_cents: z.string().nullable(),
  max_amount_cents: z.string().nullable(),
});

const feeUsage = z.object({
  from: timestamp,
  to: timestamp,
  units: z.string().describe('the aggregated units of the bucket'),
  events_count: z.number().int().describe('the events that contributed a value'),
  daily_rows: z
    .object({
      count: z.number().int(),
      events_count: z.number().int(),
      first_usage_date: z.string().nullable(),
      last_usage_date: z.string().nullable(),
    })
    .describe('the daily pre-aggregate rows billing read (whole local days)'),
  raw_events: eventRange.describe('the events billing read one by one (partial days, or charges priced per event)'),
  events: eventRange.describe("the bucket's events stored in the range, read now (events sent after billing included)"),
});

const feePricing = z.object({
  steps: z.array(chargeModelStep),
  model_amount_cents: decimal4.describe('what the charge model priced: the sum of the steps'),
  reproduced: z
    .boolean()
    .describe('true when pricing the billed units again gives the billed model amount; false: the steps are the stored amount in one step'),
  proration: z
    .object({ used_days: z.number().int(), period_days: z.number().int() })
    .nullable()
    .describe('the part of the period billed, which prorates the caps; null: the whole period'),
  charge_amount_before_caps_cents: decimal4,
  min_amount_cents: decimal4.nullable().describe("the charge's minimum, prorated"),
  max_amount_cents: decimal4.nullable().describe("the charge's maximum, prorated"),
  max_reduction_cents: decimal4.describe("this bucket's share of what the maximum took off"),
  min_true_up_cents: decimal4,
});

export const feeExplanation = z
  .object({
    fee_id: z.string(),
    key: z.string(),
    fee_type: z.enum(['subscription', 'charge', 'add_on', 'credit', 'commitment']),
    invoice_display_name: z.string().nullable(),
    period_started_at: nullableTimestamp,
    period_ended_at: nullableTimestamp,
    units: decimal4,
    events_count: z.number().int(),
    unit_amount_cents: decimal4,
    amount_cents: decimal4,
    taxes_amount_cents: decimal4,
    total_amount_cents: decimal4,
    taxes: z.array(z.object({ tax_id: z.string(), tax_code: z.string(), tax_rate: z.string(), amount_cents: decimal4 })),
    recorded: z.boolean().describe('false for a fee billed before its basis was recorded: only its stored amounts are shown'),
    base_fee: z
      .object({
        plan_amount_cents: z.string(),
        interval: z.string(),
        used_days: z.number().int(),
        period_days: z.number().int(),
      })
      .nullable()
      .describe("a base fee: the plan's amount for used_days of the period's period_days"),
    charge: feeCharge.nullable().describe('a usage fee: the charge as it was when billed'),
    usage: feeUsage.nullable(),
    pricing: feePricing.nullable(),
    minimum_true_up: z
      .object({ min_amount_cents: decimal4.nullable(), charge_amount_before_caps_cents: decimal4 })
      .nullable()
      .describe('the line that lifts a charge to its minimum'),
    commitment: z
      .object({
        commitment_amount_cents: decimal4,
        charges_amount_cents: decimal4,
        true_up_amount_cents: decimal4,
        used_days: z.number().int().nullable(),
        period_days: z.number().int().nullable(),
      })
      .nullable(),
    event: z
      .object({ id: z.string().nullable(), transaction_id: z.string().nullable() })
      .nullable()
      .describe('a fee billed when its event arrived (pay in advance): that event'),
  })
  .meta({ id: 'FeeExplanation' });

export const EXPLANATION_STEP_KINDS = [
  'fee',
  'subtotal_rounding',
  'tax',
  'tax_rounding',
  'coupon',
  'progressive_billing_credit',
  'credit_note',
  'wallet',
  'floor_at_zero',
] as const;

const totalStep = z.object({
  kind: z.enum(EXPLANATION_STEP_KINDS),
  ref_id: z.string().nullable().describe('the fee, tax, applied coupon, invoice, credit note or wallet transaction'),
  description: z.string(),
  amount_cents: signedDecimal4.describe('the change to the running figure'),
  running_total_cents: signedDecimal4,
});

export const invoiceExplanation = z
  .object({
    invoice_id: z.string(),
    number: z.string(),
    status: z.enum(['draft', 'finalized', 'paid', 'voided']),
    invoice_type: z.enum(['subscription', 'add_on', 'credit', 'one_off', 'progressive_billing']),
    currency: z.string(),
    customer_id: z.string(),
    subscription_id: z.string().nullable(),
    period_started_at: nullableTimestamp,
    period_ended_at: nullableTimestamp,
    plan: z
      .object({
        id: z.string(),
        code: z.string().nullable(),
        name: z.string().nullable(),
        interval: z.string().nullable(),
        amount_cents: z.number().nullable(),
        currency: z.string().nullable(),
      })
      .nullable()
      .describe('the plan as it was when the invoice was issued'),
    issued_by: invoiceOrigin.nullable(),
    finalized_by: invoiceOrigin.nullable(),
    fees: z.array(feeExplanation),
    taxes: z.array(
      z.object({
        tax_id: z.string(),
        tax_code: z.string(),
        tax_rate: z.string(),
        fees_amount_cents: decimal4,
        amount_cents: decimal4.describe("the sum of the fees' amounts of this tax, before rounding the invoice's tax_amount"),
      }),
    ),
    coupons: z.array(
      z.object({
        applied_coupon_id: z.string(),
        coupon_id: z.string(),
        coupon_code: z.string(),
        coupon_type: z.string().nullable(),
        frequency: z.string().nullable(),
        percentage_rate: z.string().nullable(),
        fixed_amount_cents: decimal4.nullable(),
        base_amount_cents: decimal4.describe('what remained of the subtotal when its turn came'),
        amount_cents: decimal4,
      }),
    ),
    progressive_billing_credits: z.array(z.object({ invoice_id: z.string().nullable(), amount_cents: decimal4 })),
    credit_notes: z.array(
      z.object({
        credit_note_id: z.string(),
        number: z.string(),
        reason: z.string(),
        credit_amount_cents: decimal4,
        amount_cents: decimal4.describe('what it paid on this invoice'),
      }),
    ),
    wallets: z.array(
      z.object({
        wallet_id: z.string(),
        wallet_transaction_id: z.string(),
        name: z.string().nullable(),
        code: z.string().nullable(),
        priority: z.number().int().nullable(),
        rate_amount: z.string().nullable(),
        credit_amount: z.string(),
        amount_cents: decimal4,
      }),
    ),
    steps: z.array(totalStep).describe("from the fees to the total: each step's amount added to the previous running figure"),
    amounts: z.object({
      fees_amount_cents: decimal4,
      subtotal: decimal4,
      tax_amount: decimal4,
      coupons_amount_cents: decimal4,
      progressive_billing_credit_amount_cents: decimal4,
      credit_notes_amount_cents: decimal4,
      prepaid_credit_amount: decimal4,
      total: decimal4,
    }),
    adds_up: z.boolean().describe("true when the steps reach each of the invoice's stored amounts"),
  })
  .meta({ id: 'InvoiceExplanation' });

export type InvoiceExplanation = z.output<typeof invoiceExplanation>;
export type FeeExplanation = z.output<typeof feeExplanation>;
export type ExplanationStep = z.output<typeof totalStep>;
