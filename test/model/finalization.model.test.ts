// Model-based test of what invoice finalization does with a customer's credits (issue 12, item 3):
// coupons over several periods, taxes, credit notes, then wallets, against the independent
// reference model of finalization-model.ts.
//
// fast-check generates scenarios: one customer on a test clock, maybe a monthly subscription (in
// advance or in arrear, a base fee, maybe a usage charge), taxes at some levels, maybe a grace
// period (invoices wait as drafts), and a sequence of operations: wallets (priorities, rates,
// grants, expiry, top-ups, termination; granted, paid and voided credits, the credit invoices of
// purchases and their payment; threshold and monthly interval recurring transaction rules, set on
// creation and replaced by PUT), coupons of every kind (applied, re-applied, removed,
// edited, terminated), one-off invoices, usage, credit notes on earlier invoices (finalized,
// voided, over the creditable amount), early finalizations, payments, and time passing over month
// boundaries. After every operation every invoice, wallet, credit note, coupon and applied coupon
// the public API shows is compared with the model to the cent, and the order in which invoices
// were finalized; at the end, every wallet's transactions.
//
// Rule top-ups are made by the wallet's workflow after what caused them (a consumption crossing a
// threshold, an anniversary), maybe after the answer of the request that caused them: the test
// waits for the top-ups the model made before it compares or goes on. Within one clock advance
// the model makes each top-up before the advance's later instants (a year advanced in one call
// bills like a year lived day by day: docs/test-clocks.md), so a later consumption of the same
// advance sees it. Anniversaries are kept off the instants of invoice events (started_at at a
// minute past the hour, or the wallet's creation when its hour is never one of them): which of two
// things due at one instant goes first is unspecified.
//
// Scenarios are independent (each has its own organization, test clock and customer), so they run
// concurrently: the runs are sampled from the seed up front, and the first one that fails is
// replayed alone by fast-check (same seed, its path) to shrink it. MODEL_RUNS (default 200) sets
// the number of runs, FC_SEED the seed, FC_PATH one run to replay alone (both are printed on
// failure), MODEL_CONCURRENCY the number of scenarios in flight, MODEL_SHRINK_MS the time the
// replay may spend shrinking.
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { BillableMetricResource } from '../../src/resources/billable-metric';
import type { AppliedCouponResource, CouponResource } from '../../src/resources/coupon';
import type { CreditNoteResource } from '../../src/resources/credit-note';
import type { CustomerResource } from '../../src/resources/customer';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { PlanResource } from '../../src/resources/plan';
import type { SubscriptionResource } from '../../src/resources/subscription';
import type { TaxResource } from '../../src/resources/tax';
import type { TestClockResource } from '../../src/resources/test-clock';
import type { WalletResource } from '../../src/resources/wallet';
import type { WalletTransactionResource } from '../../src/resources/wallet-transaction';
import { eventually, injectAs, type Method } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';
import {
  FinalizationModel,
  Money,
  nextMonthStart,
  type ModelAppliedCoupon,
  type ModelCoupon,
  type ModelCreditNote,
  type ModelFee,
  type ModelInvoice,
  type ModelRule,
  type ModelWallet,
  type Outcome,
  type RuleInput,
} from './finalization-model';

const RUNS = Number(process.env.MODEL_RUNS ?? 200);
const SEED = process.env.FC_SEED === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(process.env.FC_SEED);
const PATH = process.env.FC_PATH;
const CONCURRENCY = Number(process.env.MODEL_CONCURRENCY ?? 8);
/** How long the replay of a failing run may spend shrinking it before reporting what it has. */
const SHRINK_MS = Number(process.env.MODEL_SHRINK_MS ?? 180_000);

/**
 * Patterns left out of generation while the service bug they trigger is open (each names its
 * entry in the findings); set to false once the bug is fixed.
 */
const AVOID = {
  /** Finding 6: top_up refuses `voided_credits` (api-contract.md, Wallets); issue 16's work (done). */
  voidedCredits: false,
  /** Finding 8: one advance finalizes drafts (and generates previews) out of instant order. */
  invoiceEventsOutOfOrderInOneAdvance: false,
  /**
   * (No finding.) Set to true if rule top-ups of one advance land after its later instants: time
   * then moves one event at a time while a wallet has rules, each top-up waited for.
   */
  ruleTopUpsAfterLaterInstantsOfOneAdvance: false,
};

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

// ---- scenarios ------------------------------------------------------------------------------

type Expiration = { boundaries: number } | { hours: number };
type NoteAmount = { kind: 'all' } | { kind: 'part'; permille: number } | { kind: 'over' };

/**
 * A recurring transaction rule: its credits (at least one of the two); for a threshold rule its
 * threshold_credits (given, or a share per mille of the credits the wallet holds when the rule is
 * set, so that consumptions cross it often); for an interval rule (monthly) its started_at as a
 * day and hour some months back from now (null: the wallet's creation), at a minute the run gives
 * it (never 0).
 */
type RuleSpec =
  | { trigger: 'threshold'; threshold: string | { permille: number }; granted: string | null; paid: string | null }
  | {
      trigger: 'interval';
      granted: string | null;
      paid: string | null;
      startedAt: { monthsBack: number; day: number; hour: number } | null;
    };

type Op =
  | {
      op: 'createWallet';
      priority: number;
      rate: string;
      credits: string;
      expiration: Expiration | null;
      /** How the granted credits are sent (default initial_granted_credits). */
      grantField?: 'initial_granted_credits' | 'granted_credits';
      /** paid_credits of the first top-up. */
      paid?: string | null;
      rules?: RuleSpec[];
    }
  | { op: 'topUp'; wallet: number; credits: string }
  /** One top_up request with any of granted, paid and voided credits (voided: a share per mille, as voidCredits). */
  | { op: 'topUpMix'; wallet: number; granted: string | null; paid: string | null; voidPermille: number | null }
  /** PUT recurring_transaction_rules: the rules kept (sent back as they are) and new ones, at most 5. */
  | { op: 'setRules'; wallet: number; keep: boolean[]; add: RuleSpec[] }
  /** POST /pay of one of the credit invoices of purchases still unpaid. */
  | { op: 'payPurchase'; purchase: number }
  /** Voids this share (per mille) of the wallet's credits; past 1000, more than it holds. */
  | { op: 'voidCredits'; wallet: number; permille: number }
  | { op: 'terminateWallet'; wallet: number }
  | { op: 'setPriority'; wallet: number; priority: number }
  | { op: 'setExpiration'; wallet: number; expiration: Expiration | null }
  | {
      op: 'coupon';
      couponType: 'fixed_amount' | 'percentage';
      amountCents: number;
      percentageRate: string;
      frequency: 'once' | 'recurring' | 'forever';
      frequencyDuration: number;
      reusable: boolean;
    }
  | { op: 'reapplyCoupon'; coupon: number }
  /** New terms for the coupon: the amount or rate of its type, the duration if recurring. */
  | { op: 'updateCoupon'; coupon: number; amountCents: number; percentageRate: string; frequencyDuration: number }
  | { op: 'terminateCoupon'; coupon: number }
  | { op: 'removeCoupon'; applied: number }
  | { op: 'oneOff'; lines: { unitPrice: string; quantity: number }[] }
  | { op: 'usage'; count: number }
  | { op: 'creditNote'; invoice: number; items: { fee: number; amount: NoteAmount }[]; finalize: boolean }
  | { op: 'finalizeCreditNote'; note: number }
  | { op: 'voidCreditNote'; note: number }
  | { op: 'finalizeInvoice'; invoice: number }
  | { op: 'pay'; invoice: number }
  | { op: 'advance'; to: { months: number } | { days: number; hours: number } };

interface Scenario {
  /** Months after January 2030: the clock starts on that month's 1st at 00:00 UTC. */
  startMonth: number;
  /** The organization's invoice_grace_period (days). */
  graceDays: number;
  /** Tax rates (fractions) applied to the organization, the customer and the plan. */
  taxes: { organization: string[]; customer: string[]; plan: string[] };
  plan: { payInAdvance: boolean; amountCents: number; usagePrice: string | null } | null;
  /** Operations before the subscription starts (same instant: the clock does not move). */
  setup: Op[];
  steps: Op[];
}

/** Cents with up to 2 fractional digits, so that fees, taxes and balances carry fractions. */
const centsArb = (max: number) =>
  fc.oneof(
    fc.integer({ min: 0, max }).map(String),
    fc.integer({ min: 1, max: max * 100 }).map((n) => (n / 100).toFixed(2)),
  );
const taxRateArb = fc.oneof(
  fc.constantFrom('0.2', '0.0875', '0.055', '0.1'),
  fc.integer({ min: 1, max: 3000 }).map((n) => (n / 10_000).toString()),
);
/** Credits with 2 decimals at a rate with 4 give balances with fractions of a cent. */
const creditsArb = fc.oneof(
  fc.integer({ min: 1, max: 200 }).map(String),
  fc.integer({ min: 1, max: 20_000 }).map((n) => (n / 100).toFixed(2)),
);
const rateArb = fc.constantFrom('1', '0.5', '2', '0.3333', '1.25', '0.01', '10');
const priorityArb = fc.constantFrom(1, 1, 2, 3, 50);
const ref = fc.nat({ max: 20 });

/** Exactly at a month boundary (the instant an invoice is finalized) or some hours from now. */
const expirationArb: fc.Arbitrary<Expiration> = fc.oneof(
  fc.record({ boundaries: fc.integer({ min: 1, max: 2 }) }),
  fc.record({ hours: fc.integer({ min: 1, max: 1500 }) }),
);

/** The credits of a rule's top-up: granted, paid, or both. */
const ruleCreditsArb = fc.oneof(
  fc.record({ granted: creditsArb, paid: fc.constant(null) }),
  fc.record({ granted: fc.constant(null), paid: creditsArb }),
  fc.record({ granted: creditsArb, paid: creditsArb }),
);
const thresholdArb = fc.oneof(
  { weight: 3, arbitrary: fc.record({ permille: fc.integer({ min: 0, max: 950 }) }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 150 }).map(String) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 15_000 }).map((n) => (n / 100).toFixed(2)) },
);
const ruleArb: fc.Arbitrary<RuleSpec> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc
      .tuple(thresholdArb, ruleCreditsArb)
      .map(([threshold, credits]): RuleSpec => ({ trigger: 'threshold', threshold, ...credits })),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(
        ruleCreditsArb,
        fc.option(
          fc.record({
            monthsBack: fc.integer({ min: 0, max: 2 }),
            // Month ends often: their anniversaries are clamped to shorter months.
            day: fc.oneof(fc.integer({ min: 28, max: 31 }), fc.integer({ min: 1, max: 31 })),
            hour: fc.integer({ min: 0, max: 23 }),
          }),
          { nil: null },
        ),
      )
      .map(([credits, startedAt]): RuleSpec => ({ trigger: 'interval', ...credits, startedAt })),
  },
);

const createWalletOp: fc.Arbitrary<Op> = fc.record({
  op: fc.constant('createWallet' as const),
  priority: priorityArb,
  rate: rateArb,
  credits: creditsArb,
  expiration: fc.oneof({ weight: 2, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: expirationArb }),
  grantField: fc.constantFrom('initial_granted_credits' as const, 'granted_credits' as const),
  paid: fc.option(creditsArb, { freq: 4, nil: null }),
  rules: fc.oneof(
    { weight: 3, arbitrary: fc.constant<RuleSpec[]>([]) },
    { weight: 2, arbitrary: fc.array(ruleArb, { minLength: 1, maxLength: 2 }) },
  ),
});

const topUpMixOp: fc.Arbitrary<Op> = fc
  .record({
    op: fc.constant('topUpMix' as const),
    wallet: ref,
    granted: fc.option(creditsArb, { nil: null }),
    paid: fc.option(creditsArb, { freq: 2, nil: null }),
    voidPermille: fc.option(fc.integer({ min: 1, max: 1200 }), { freq: 2, nil: null }),
  })
  .map((op) => (op.granted === null && op.paid === null && op.voidPermille === null ? { ...op, paid: '10' } : op));

const setRulesOp: fc.Arbitrary<Op> = fc.record({
  op: fc.constant('setRules' as const),
  wallet: ref,
  keep: fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }),
  add: fc.array(ruleArb, { maxLength: 2 }),
});

const couponAmountArb = fc.integer({ min: 1, max: 15_000 });
const percentageRateArb = fc.oneof(
  fc.constantFrom('10', '25', '50', '100', '12.5', '33.33'),
  fc.integer({ min: 1, max: 10_000 }).map((n) => (n / 100).toString()),
);
const durationArb = fc.integer({ min: 1, max: 4 });

const couponOp: fc.Arbitrary<Op> = fc.record({
  op: fc.constant('coupon' as const),
  couponType: fc.constantFrom('fixed_amount' as const, 'percentage' as const),
  amountCents: couponAmountArb,
  percentageRate: percentageRateArb,
  frequency: fc.constantFrom('once' as const, 'recurring' as const, 'forever' as const),
  frequencyDuration: durationArb,
  reusable: fc.boolean(),
});

const oneOffOp: fc.Arbitrary<Op> = fc.record({
  op: fc.constant('oneOff' as const),
  lines: fc.array(fc.record({ unitPrice: centsArb(20_000), quantity: fc.integer({ min: 1, max: 3 }) }), { minLength: 1, maxLength: 3 }),
});

const creditNoteOp: fc.Arbitrary<Op> = fc.record({
  op: fc.constant('creditNote' as const),
  invoice: ref,
  items: fc.array(
    fc.record({
      fee: ref,
      amount: fc.oneof(
        { weight: 2, arbitrary: fc.constant({ kind: 'all' as const }) },
        { weight: 4, arbitrary: fc.record({ kind: fc.constant('part' as const), permille: fc.integer({ min: 1, max: 999 }) }) },
        { weight: 1, arbitrary: fc.constant({ kind: 'over' as const }) },
      ),
    }),
    { minLength: 1, maxLength: 2 },
  ),
  finalize: fc.oneof({ weight: 4, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
});

/** What can happen at one instant: everything but time passing. */
const instantOp: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: createWalletOp },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('topUp' as const), wallet: ref, credits: creditsArb }) },
  { weight: 2, arbitrary: topUpMixOp },
  { weight: 2, arbitrary: setRulesOp },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('payPurchase' as const), purchase: ref }) },
  ...(AVOID.voidedCredits
    ? []
    : [
        {
          weight: 1,
          arbitrary: fc.record({ op: fc.constant('voidCredits' as const), wallet: ref, permille: fc.integer({ min: 1, max: 1200 }) }),
        },
      ]),
  { weight: 1, arbitrary: fc.record({ op: fc.constant('terminateWallet' as const), wallet: ref }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('setPriority' as const), wallet: ref, priority: priorityArb }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('setExpiration' as const), wallet: ref, expiration: fc.option(expirationArb, { nil: null }) }),
  },
  { weight: 2, arbitrary: couponOp },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('reapplyCoupon' as const), coupon: ref }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('removeCoupon' as const), applied: ref }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('updateCoupon' as const),
      coupon: ref,
      amountCents: couponAmountArb,
      percentageRate: percentageRateArb,
      frequencyDuration: durationArb,
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('terminateCoupon' as const), coupon: ref }) },
  { weight: 3, arbitrary: oneOffOp },
  { weight: 4, arbitrary: creditNoteOp },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('finalizeCreditNote' as const), note: ref }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('voidCreditNote' as const), note: ref }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('usage' as const), count: fc.integer({ min: 1, max: 5 }) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('pay' as const), invoice: ref }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('finalizeInvoice' as const), invoice: ref }) },
);

const advanceOp: fc.Arbitrary<Op> = fc.record({
  op: fc.constant('advance' as const),
  to: fc.oneof(
    fc.record({ months: fc.integer({ min: 1, max: 3 }) }),
    fc.record({ days: fc.integer({ min: 0, max: 20 }), hours: fc.integer({ min: 0, max: 23 }) }),
  ),
});

const scenarioArb: fc.Arbitrary<Scenario> = fc.record({
  startMonth: fc.integer({ min: 0, max: 11 }),
  // 35 days: a month's draft is still waiting when the next month's is generated.
  graceDays: fc.oneof(
    { weight: 6, arbitrary: fc.constant(0) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 3 }) },
    { weight: 1, arbitrary: fc.constant(35) },
  ),
  taxes: fc.record({
    organization: fc.array(taxRateArb, { maxLength: 1 }),
    customer: fc.array(taxRateArb, { maxLength: 2 }),
    plan: fc.array(taxRateArb, { maxLength: 1 }),
  }),
  plan: fc.option(
    fc.record({
      payInAdvance: fc.boolean(),
      amountCents: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 20_000 })),
      usagePrice: fc.option(centsArb(300), { freq: 2, nil: null }),
    }),
    { freq: 4, nil: null },
  ),
  setup: fc.array(instantOp, { maxLength: 4 }),
  steps: fc.array(fc.oneof({ weight: 4, arbitrary: instantOp }, { weight: 1, arbitrary: advanceOp }), {
    minLength: 2,
    maxLength: 24,
    size: 'medium',
  }),
});

/**
 * The shrunk counterexamples of the service bugs this test found (numbered as they were reported),
 * replayed on every run so that none comes back.
 */
const NO_TAXES: Scenario['taxes'] = { organization: [], customer: [], plan: [] };
const ONE_CENT_PLAN: Scenario['plan'] = { payInAdvance: false, amountCents: 1, usagePrice: null };
const REGRESSIONS: Record<string, Scenario> = {
  'a wallet holding a fraction of a cent pays whole cents only (finding 1)': {
    startMonth: 0,
    graceDays: 0,
    taxes: NO_TAXES,
    plan: ONE_CENT_PLAN,
    setup: [],
    steps: [
      { op: 'createWallet', priority: 1, rate: '0.01', credits: '0.01', expiration: null },
      { op: 'advance', to: { months: 1 } },
    ],
  },
  'an invoice the API shows finalized can be paid at once (finding 3)': {
    startMonth: 0,
    graceDays: 0,
    taxes: NO_TAXES,
    plan: null,
    setup: [],
    steps: [
      { op: 'oneOff', lines: [{ unitPrice: '100', quantity: 1 }] },
      { op: 'pay', invoice: 0 },
    ],
  },
  'a wallet expiring later in the same clock advance pays the earlier boundary (finding 4)': {
    startMonth: 0,
    graceDays: 0,
    taxes: NO_TAXES,
    plan: ONE_CENT_PLAN,
    setup: [],
    steps: [
      { op: 'createWallet', priority: 1, rate: '1', credits: '1', expiration: { boundaries: 2 } },
      { op: 'advance', to: { months: 2 } },
    ],
  },
  'drafts waiting out their grace period side by side use a once coupon once (finding 5)': {
    startMonth: 0,
    graceDays: 35,
    taxes: NO_TAXES,
    plan: { payInAdvance: false, amountCents: 1000, usagePrice: null },
    setup: [
      {
        op: 'coupon',
        couponType: 'fixed_amount',
        amountCents: 300,
        percentageRate: '1',
        frequency: 'once',
        frequencyDuration: 1,
        reusable: true,
      },
    ],
    steps: [
      { op: 'advance', to: { months: 2 } },
      { op: 'advance', to: { months: 2 } },
    ],
  },
  'drafts finalized in one advance take the wallet in the order of their instants (finding 8)': {
    startMonth: 0,
    graceDays: 35,
    taxes: NO_TAXES,
    plan: { payInAdvance: false, amountCents: 1000, usagePrice: null },
    setup: [{ op: 'createWallet', priority: 1, rate: '1', credits: '25', expiration: null }],
    steps: [
      { op: 'advance', to: { months: 2 } },
      { op: 'advance', to: { months: 1 } },
      { op: 'advance', to: { months: 3 } },
    ],
  },
  'a fee of 0.51 cent is credited the whole cent its invoice charged': {
    startMonth: 0,
    graceDays: 0,
    taxes: NO_TAXES,
    plan: null,
    setup: [],
    steps: [
      { op: 'oneOff', lines: [{ unitPrice: '0.17', quantity: 3 }] },
      { op: 'creditNote', invoice: 0, items: [{ fee: 0, amount: { kind: 'all' } }], finalize: true },
      { op: 'oneOff', lines: [{ unitPrice: '100', quantity: 1 }] },
    ],
  },
};

/** Hand-written scenarios of the wallet features, run on every run beside the regressions. */
const ARREAR_1000: Scenario['plan'] = { payInAdvance: false, amountCents: 1000, usagePrice: null };
const EXAMPLES: Record<string, Scenario> = {
  'a threshold top-up counts for the next boundary of the same advance, once per crossing': {
    startMonth: 0,
    graceDays: 0,
    taxes: NO_TAXES,
    plan: ARREAR_1000,
    setup: [
      {
        op: 'createWallet',
        priority: 1,
        rate: '1',
        credits: '15',
        expiration: null,
        rules: [{ trigger: 'threshold', threshold: '10', granted: '10', paid: '2' }],
      },
    ],
    steps: [
      { op: 'advance', to: { months: 3 } },
      { op: 'payPurchase', purchase: 1 },
      { op: 'oneOff', lines: [{ unitPrice: '650', quantity: 1 }] },
    ],
  },
  'monthly grants from January 31 at month ends (February 28, March 31), bought credits when paid': {
    startMonth: 0,
    graceDays: 0,
    taxes: NO_TAXES,
    plan: ARREAR_1000,
    setup: [
      {
        op: 'createWallet',
        priority: 1,
        rate: '0.5',
        credits: '1',
        paid: '4',
        expiration: null,
        rules: [{ trigger: 'interval', granted: '10', paid: '3', startedAt: { monthsBack: 0, day: 31, hour: 10 } }],
      },
    ],
    steps: [
      { op: 'advance', to: { months: 3 } },
      { op: 'payPurchase', purchase: 0 },
      { op: 'topUpMix', wallet: 0, granted: '1', paid: null, voidPermille: 1001 },
      { op: 'topUpMix', wallet: 0, granted: '1', paid: '2', voidPermille: 1000 },
      { op: 'setRules', wallet: 0, keep: [true], add: [{ trigger: 'threshold', threshold: '1', granted: '5', paid: null }] },
      { op: 'advance', to: { months: 1 } },
    ],
  },
  'a threshold reached exactly, a void, a purchase of 0.01 cent, a purchase paid after termination': {
    startMonth: 0,
    graceDays: 0,
    taxes: NO_TAXES,
    plan: null,
    setup: [],
    steps: [
      {
        op: 'createWallet',
        priority: 1,
        rate: '1',
        credits: '15',
        expiration: null,
        rules: [{ trigger: 'threshold', threshold: '5', granted: '1', paid: null }],
      },
      { op: 'oneOff', lines: [{ unitPrice: '1000', quantity: 1 }] },
      { op: 'topUpMix', wallet: 0, granted: null, paid: null, voidPermille: 500 },
      { op: 'oneOff', lines: [{ unitPrice: '250', quantity: 1 }] },
      { op: 'topUpMix', wallet: 0, granted: null, paid: '10', voidPermille: null },
      { op: 'payPurchase', purchase: 0 },
      { op: 'oneOff', lines: [{ unitPrice: '600', quantity: 1 }] },
      { op: 'createWallet', priority: 2, rate: '0.01', credits: '1', paid: '0.01', expiration: null },
      { op: 'topUpMix', wallet: 1, granted: null, paid: '50', voidPermille: null },
      { op: 'terminateWallet', wallet: 1 },
      { op: 'payPurchase', purchase: 0 },
    ],
  },
};

// ---- the stack ------------------------------------------------------------------------------

let stack: TestStack;
let worker: StackWorker;

beforeAll(async () => {
  stack = await createTestStack();
  worker = await startStackWorker(stack);
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
});

// ---- comparing ------------------------------------------------------------------------------

class Mismatch extends Error {
  override readonly name = 'Mismatch';
}

const d4 = (value: Money) => value.toFixed(4, Money.ROUND_HALF_UP);
const isoOrNull = (t: number | null) => (t === null ? null : new Date(t).toISOString());

function same(what: string, expected: unknown, actual: unknown): void {
  if (JSON.stringify(expected) !== JSON.stringify(actual)) {
    throw new Mismatch(`${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  }
}

/** Sorted copies, for lists whose order the API does not promise. */
const sorted = <T>(items: T[]): T[] =>
  items
    .map((i) => JSON.stringify(i))
    .sort()
    .map((s) => JSON.parse(s) as T);

interface Response<T> {
  status: number;
  body: T;
  raw: string;
}

/**
 * What the runs exercised, printed with their duration: wallet transactions by status and source,
 * and answers by outcome (`POST .../top_up 422`...), so that a generator that stops reaching a
 * feature shows.
 */
const coverage = new Map<string, number>();
const tally = (what: string, n = 1) => coverage.set(what, (coverage.get(what) ?? 0) + n);
const coverageLine = () =>
  [...coverage]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([what, n]) => `${what}: ${n}`)
    .join(', ');

/** One scenario against the API and the model side by side. */
class ScenarioRun {
  private readonly model: FinalizationModel;
  private readonly ids = new Map<object, string>();
  private readonly log: string[] = [];
  private customer!: CustomerResource;
  private clock!: TestClockResource;
  private metricCode: string | null = null;
  private plan: PlanResource | null = null;
  private subscribed = false;
  /** The request body each rule was given with, to send it back unchanged. */
  private readonly ruleBodies = new Map<ModelRule, object>();
  /** The minute of the last explicit started_at: 1 to 59, never a whole hour (every other instant is one). */
  private minute = 0;
  /** How many rule top-up transactions the service was last seen to have made, as the model did. */
  private syncedRuleTransactions = 0;

  private constructor(
    private readonly scenario: Scenario,
    private readonly org: TestOrganization,
  ) {
    const rates = (list: string[]) => list.map((r) => new Money(r));
    this.model = new FinalizationModel(
      { organization: rates(scenario.taxes.organization), customer: rates(scenario.taxes.customer), plan: rates(scenario.taxes.plan) },
      Date.UTC(2030, scenario.startMonth, 1),
      scenario.graceDays,
    );
  }

  static async run(scenario: Scenario): Promise<void> {
    worker.assertAlive();
    const org = await createOrganization(stack.app, {
      name: 'Finalization Model',
      timezone: 'UTC',
      invoice_grace_period: scenario.graceDays,
      events_rate_limit_per_minute: 1_000_000,
    });
    const run = new ScenarioRun(scenario, org);
    try {
      await run.setUp();
      for (const op of scenario.setup) await run.step(op);
      if (scenario.plan) {
        await run.subscribe(scenario.plan);
        await run.ruleTopUpsSettled();
        await run.check('subscribe');
      }
      for (const op of scenario.steps) await run.step(op);
      await run.checkTransactions();
      await run.checkSettlements();
      run.countCoverage();
    } catch (err) {
      if (err instanceof Error) err.message = `${err.message}\n  after: ${run.log.join('\n         ')}`;
      throw err;
    }
  }

  // ---- HTTP ---------------------------------------------------------------------------------

  /**
   * One request. A request the API shed under load (503 before any handler ran: the whole suite
   * shares one event loop) is asked again, whatever its method, as any client would; nothing else
   * is retried, so no refusal goes unseen.
   */
  private async call<T>(method: Method, url: string, payload?: object): Promise<Response<T>> {
    for (let attempt = 1; ; attempt++) {
      const res = await injectAs(stack.app, this.org, method, url, payload);
      if (!(res.statusCode === 503 && attempt < 10)) return { status: res.statusCode, body: res.json<T>(), raw: res.body };
      await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
    }
  }

  private async ok<T>(method: Method, url: string, payload?: object): Promise<T> {
    const res = await this.call<T>(method, url, payload);
    if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${res.raw}`);
    return res.body;
  }

  private countCoverage(): void {
    for (const wallet of this.model.wallets) {
      for (const t of wallet.transactions) {
        tally(
          `${t.status}${t.source === 'manual' ? '' : ` (${t.source})`}${t.status === 'purchased' && t.settledAt !== null ? ' settled' : ''}`,
        );
      }
      if (wallet.rules.some((r) => r.trigger === 'threshold')) tally('wallets with threshold rules');
      if (wallet.rules.some((r) => r.trigger === 'interval')) tally('wallets with interval rules');
    }
  }

  /** The answer the model predicts: a success, or this status and error code. */
  private expectOutcome(what: string, outcome: Outcome, res: Response<unknown>): void {
    tally(`${what} ${outcome.ok ? 'ok' : outcome.status}`);
    const code = (res.body as { code?: string }).code;
    if (outcome.ok) {
      if (res.status >= 300) throw new Mismatch(`${what}: expected a success, got ${res.status} ${res.raw}`);
    } else if (res.status !== outcome.status || code !== outcome.code) {
      throw new Mismatch(`${what}: expected ${outcome.status} ${outcome.code}, got ${res.status} ${res.raw}`);
    }
  }

  /** A POST action on an entity the model picked (none: the step does nothing), judged by the model's outcome. */
  private async action<T extends object>(
    what: string,
    entity: T | undefined,
    model: (entity: T) => Outcome,
    path: (id: string) => string,
  ): Promise<boolean> {
    if (!entity) return false;
    this.expectOutcome(what, model(entity), await this.call('POST', path(this.id(entity))));
    return true;
  }

  private id(entity: object): string {
    const id = this.ids.get(entity);
    if (!id) throw new Error('an entity the API never created');
    return id;
  }

  // ---- set-up -------------------------------------------------------------------------------

  private async setUp(): Promise<void> {
    const { taxes } = this.scenario;
    const tax = async (rate: string, appliedToOrganization: boolean) =>
      (
        await this.ok<TaxResource>('POST', '/v1/taxes', {
          code: `tax-${randomUUID()}`,
          name: 'Tax',
          rate,
          applied_to_organization: appliedToOrganization,
        })
      ).code;
    for (const rate of taxes.organization) await tax(rate, true);
    this.clock = await this.ok<TestClockResource>('POST', '/v1/test_clocks', {
      name: 'model',
      frozen_time: new Date(this.model.now).toISOString(),
    });
    this.customer = await this.ok<CustomerResource>('POST', '/v1/customers', {
      external_id: `cus-${randomUUID()}`,
      currency: 'USD',
      test_clock_id: this.clock.id,
    });
    for (const rate of taxes.customer) {
      await this.ok('POST', '/v1/taxes/apply', {
        tax_code: await tax(rate, false),
        taxable_type: 'customer',
        taxable_id: this.customer.id,
      });
    }
    const plan = this.scenario.plan;
    if (plan) {
      let charges: object[] = [];
      if (plan.usagePrice !== null) {
        this.metricCode = `calls-${randomUUID()}`;
        const metric = await this.ok<BillableMetricResource>('POST', '/v1/billable_metrics', {
          code: this.metricCode,
          name: 'Calls',
          aggregation_type: 'count',
        });
        charges = [{ billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: plan.usagePrice } }];
      }
      this.plan = await this.ok<PlanResource>('POST', '/v1/plans', {
        code: `plan-${randomUUID()}`,
        name: 'Plan',
        interval: 'monthly',
        amount_cents: plan.amountCents,
        currency: 'USD',
        charges,
      });
      for (const rate of taxes.plan) {
        await this.ok('POST', '/v1/taxes/apply', { tax_code: await tax(rate, false), taxable_type: 'plan', taxable_id: this.plan.id });
      }
    }
  }

  private subscriptionToCome(): boolean {
    return this.scenario.plan !== null && !this.subscribed;
  }

  private async subscribe(plan: NonNullable<Scenario['plan']>): Promise<void> {
    this.log.push('subscribe');
    this.subscribed = true;
    await this.ok<SubscriptionResource>('POST', '/v1/subscriptions', {
      external_id: `sub-${randomUUID()}`,
      customer_id: this.customer.id,
      plan_id: this.plan!.id,
      pay_in_advance: plan.payInAdvance,
    });
    this.model.subscribe({
      payInAdvance: plan.payInAdvance,
      amountCents: plan.amountCents,
      usagePrice: plan.usagePrice === null ? null : new Money(plan.usagePrice),
    });
    await this.invoicesSettled();
  }

  // ---- operations ---------------------------------------------------------------------------

  private async step(op: Op): Promise<void> {
    worker.assertAlive();
    const done = await this.perform(op);
    if (!done) return;
    this.log.push(`${new Date(this.model.now).toISOString()} ${JSON.stringify(op)}`);
    await this.ruleTopUpsSettled();
    await this.check(JSON.stringify(op));
  }

  /** Performs the operation on both sides; false when it does not apply (nothing to refer to). */
  private async perform(op: Op): Promise<boolean> {
    const m = this.model;
    const pick = <T>(list: readonly T[], index: number): T | undefined => (list.length === 0 ? undefined : list[index % list.length]);
    switch (op.op) {
      case 'createWallet': {
        const expirationAt = op.expiration === null ? null : expirationInstant(m.now, op.expiration);
        const rules = (op.rules ?? []).map((spec) => this.rule(spec, m.now, new Money(op.credits)));
        const paid = op.paid ?? null;
        const body = await this.ok<WalletResource>('POST', '/v1/wallets', {
          customer_id: this.customer.id,
          rate_amount: op.rate,
          priority: op.priority,
          [op.grantField ?? 'initial_granted_credits']: op.credits,
          ...(paid === null ? {} : { paid_credits: paid }),
          ...(rules.length === 0 ? {} : { recurring_transaction_rules: rules.map((r) => r.body) }),
          ...(expirationAt === null ? {} : { expiration_at: new Date(expirationAt).toISOString() }),
        });
        const wallet = m.createWallet({
          rate: new Money(op.rate),
          credits: new Money(op.credits),
          ...(paid === null ? {} : { paidCredits: new Money(paid) }),
          priority: op.priority,
          expirationAt,
          rules: rules.map((r) => r.input),
        });
        this.ids.set(wallet, body.id);
        this.mapRules(
          wallet,
          rules.map((r) => r.body),
          body.recurring_transaction_rules,
        );
        return true;
      }
      case 'topUpMix': {
        const wallet = pick(m.wallets, op.wallet);
        if (!wallet) return false;
        const voided = op.voidPermille === null ? null : voidedCredits(wallet, op.voidPermille);
        const res = await this.call('POST', `/v1/wallets/${this.id(wallet)}/top_up`, {
          ...(op.granted === null ? {} : { granted_credits: op.granted }),
          ...(op.paid === null ? {} : { paid_credits: op.paid }),
          ...(voided === null ? {} : { voided_credits: voided.toFixed() }),
        });
        const credits = (value: string | null) => (value === null ? null : new Money(value));
        this.expectOutcome('top-up', m.topUpMany(wallet, { granted: credits(op.granted), paid: credits(op.paid), voided }), res);
        return true;
      }
      case 'setRules': {
        const wallet = pick(m.wallets, op.wallet);
        if (!wallet) return false;
        const kept = wallet.rules.filter((_, i) => op.keep[i]);
        const held = wallet.balance.div(wallet.rate.times(100));
        const added = op.add.slice(0, 5 - kept.length).map((spec) => this.rule(spec, wallet.createdAt, held));
        const inputs: RuleInput[] = [...kept.map(ruleInput), ...added.map((r) => r.input)];
        const bodies = [...kept.map((r) => this.ruleBodies.get(r)!), ...added.map((r) => r.body)];
        const res = await this.call<WalletResource>('PUT', `/v1/wallets/${this.id(wallet)}`, { recurring_transaction_rules: bodies });
        const outcome = m.setRules(wallet, inputs);
        this.expectOutcome('wallet rules', outcome, res);
        if (outcome.ok) this.mapRules(wallet, bodies, res.body.recurring_transaction_rules);
        return true;
      }
      case 'payPurchase': {
        const unpaid = m.invoices.filter((i) => i.invoiceType === 'credit' && i.status === 'finalized');
        return this.action(
          'purchase payment',
          pick(unpaid, op.purchase),
          (i) => m.payInvoice(i),
          (id) => `/v1/invoices/${id}/pay`,
        );
      }
      case 'topUp': {
        const wallet = pick(m.wallets, op.wallet);
        if (!wallet) return false;
        const res = await this.call('POST', `/v1/wallets/${this.id(wallet)}/top_up`, { credits: op.credits });
        this.expectOutcome('top-up', m.topUp(wallet, new Money(op.credits)), res);
        return true;
      }
      case 'voidCredits': {
        const wallet = pick(m.wallets, op.wallet);
        if (!wallet) return false;
        const credits = voidedCredits(wallet, op.permille);
        const res = await this.call('POST', `/v1/wallets/${this.id(wallet)}/top_up`, { voided_credits: credits.toFixed() });
        this.expectOutcome('voided credits', m.voidCredits(wallet, credits), res);
        return true;
      }
      case 'terminateWallet': {
        const wallet = pick(m.wallets, op.wallet);
        if (!wallet) return false;
        this.expectOutcome('wallet termination', m.terminateWallet(wallet), await this.call('DELETE', `/v1/wallets/${this.id(wallet)}`));
        return true;
      }
      case 'setPriority': {
        const wallet = pick(m.wallets, op.wallet);
        if (!wallet) return false;
        this.expectOutcome(
          'wallet priority',
          m.setPriority(wallet, op.priority),
          await this.call('PUT', `/v1/wallets/${this.id(wallet)}`, { priority: op.priority }),
        );
        return true;
      }
      case 'setExpiration': {
        const wallet = pick(m.wallets, op.wallet);
        if (!wallet) return false;
        const expirationAt = op.expiration === null ? null : expirationInstant(m.now, op.expiration);
        const res = await this.call('PUT', `/v1/wallets/${this.id(wallet)}`, {
          expiration_at: expirationAt === null ? null : new Date(expirationAt).toISOString(),
        });
        this.expectOutcome('wallet expiration', m.setExpiration(wallet, expirationAt), res);
        return true;
      }
      case 'coupon': {
        const fixed = op.couponType === 'fixed_amount';
        const recurring = op.frequency === 'recurring';
        const body = await this.ok<CouponResource>('POST', '/v1/coupons', {
          code: `coupon-${randomUUID()}`,
          name: 'Coupon',
          coupon_type: op.couponType,
          ...(fixed ? { amount_cents: op.amountCents, amount_currency: 'USD' } : { percentage_rate: op.percentageRate }),
          frequency: op.frequency,
          ...(recurring ? { frequency_duration: op.frequencyDuration } : {}),
          reusable: op.reusable,
        });
        const coupon = m.createCoupon({
          couponType: op.couponType,
          amountCents: fixed ? new Money(op.amountCents) : null,
          percentageRate: fixed ? null : new Money(op.percentageRate),
          frequency: op.frequency,
          frequencyDuration: recurring ? op.frequencyDuration : null,
          reusable: op.reusable,
        });
        this.ids.set(coupon, body.id);
        await this.applyCoupon(coupon);
        return true;
      }
      case 'reapplyCoupon': {
        const coupon = pick(m.coupons, op.coupon);
        if (!coupon) return false;
        await this.applyCoupon(coupon);
        return true;
      }
      case 'updateCoupon': {
        const coupon = pick(m.coupons, op.coupon);
        if (!coupon) return false;
        const fixed = coupon.couponType === 'fixed_amount';
        const recurring = coupon.frequency === 'recurring';
        const res = await this.call('PUT', `/v1/coupons/${this.id(coupon)}`, {
          ...(fixed ? { amount_cents: op.amountCents } : { percentage_rate: op.percentageRate }),
          ...(recurring ? { frequency_duration: op.frequencyDuration } : {}),
        });
        const terms = {
          amountCents: fixed ? new Money(op.amountCents) : null,
          percentageRate: fixed ? null : new Money(op.percentageRate),
          frequencyDuration: recurring ? op.frequencyDuration : null,
        };
        this.expectOutcome('coupon update', m.updateCoupon(coupon, terms), res);
        return true;
      }
      case 'terminateCoupon': {
        const coupon = pick(m.coupons, op.coupon);
        if (!coupon) return false;
        this.expectOutcome('coupon termination', m.terminateCoupon(coupon), await this.call('DELETE', `/v1/coupons/${this.id(coupon)}`));
        return true;
      }
      case 'removeCoupon': {
        const applied = pick(m.appliedCoupons, op.applied);
        if (!applied) return false;
        this.expectOutcome(
          'coupon removal',
          m.removeAppliedCoupon(applied),
          await this.call('DELETE', `/v1/coupons/applied/${this.id(applied)}`),
        );
        return true;
      }
      case 'oneOff': {
        // Two invoice events at one instant happen in no specified order: none is let happen (a
        // subscription still to come bills its first in-advance invoice at this very instant).
        if (
          this.scenario.graceDays > 0 &&
          (this.subscriptionToCome() || m.invoiceEventAt(m.finalizationOfNew()) || m.ruleRunAt(m.finalizationOfNew()))
        )
          return false;
        const body = await this.ok<InvoiceResource>('POST', '/v1/invoices/one_off', {
          customer_id: this.customer.id,
          currency: 'USD',
          line_items: op.lines.map((line, i) => ({ description: `line-${i}`, unit_price: line.unitPrice, quantity: line.quantity })),
        });
        this.ids.set(m.oneOff(op.lines.map((line) => ({ unitPrice: new Money(line.unitPrice), quantity: line.quantity }))), body.id);
        await this.invoicesSettled();
        return true;
      }
      case 'usage': {
        if (!m.hasUsageCharge()) return false;
        const events = Array.from({ length: op.count }, () => ({
          transaction_id: `tx-${randomUUID()}`,
          external_customer_id: this.customer.external_id,
          code: this.metricCode,
        }));
        const res = await this.ok<{ ingested: number }>('POST', '/v1/events/batch', { events });
        same('events ingested', op.count, res.ingested);
        m.recordUsage(op.count);
        return true;
      }
      case 'creditNote':
        return this.createCreditNote(op);
      case 'finalizeCreditNote':
        return this.action(
          'credit note finalization',
          pick(m.creditNotes, op.note),
          (n) => m.finalizeCreditNote(n),
          (id) => `/v1/credit_notes/${id}/finalize`,
        );
      case 'voidCreditNote':
        return this.action(
          'credit note void',
          pick(m.creditNotes, op.note),
          (n) => m.voidCreditNote(n),
          (id) => `/v1/credit_notes/${id}/void`,
        );
      case 'finalizeInvoice':
        return this.action(
          'invoice finalization',
          pick(m.invoices, op.invoice),
          (i) => m.finalizeEarly(i),
          (id) => `/v1/invoices/${id}/finalize`,
        );
      case 'pay':
        return this.action(
          'payment',
          pick(m.invoices, op.invoice),
          (i) => m.payInvoice(i),
          (id) => `/v1/invoices/${id}/pay`,
        );
      case 'advance': {
        const target =
          'months' in op.to ? monthsAfter(m.now, op.to.months) : m.now + Math.max(op.to.days * DAY_MS + op.to.hours * HOUR_MS, HOUR_MS);
        const hops =
          (AVOID.invoiceEventsOutOfOrderInOneAdvance && this.scenario.graceDays > 0) ||
          (AVOID.ruleTopUpsAfterLaterInstantsOfOneAdvance && m.hasRules());
        for (let next = m.nextEvent(); hops && next < target; next = m.nextEvent()) {
          await this.advance(next);
          m.advanceTo(next);
          await this.invoicesSettled();
          await this.ruleTopUpsSettled();
        }
        await this.advance(target);
        m.advanceTo(target);
        await this.invoicesSettled();
        return true;
      }
    }
  }

  private async applyCoupon(coupon: ModelCoupon): Promise<void> {
    const res = await this.call<AppliedCouponResource>('POST', '/v1/coupons/apply', {
      coupon_code: this.id(coupon),
      customer_id: this.customer.id,
    });
    const { outcome, applied } = this.model.applyCoupon(coupon);
    this.expectOutcome('coupon application', outcome, res);
    if (applied) this.ids.set(applied, res.body.id);
  }

  /**
   * A rule as the model and the API are given it. An interval rule's started_at is some months
   * back from now (or ahead, later this month) at a minute past the hour, so that its
   * anniversaries meet no invoice event, expiration or operation (all at whole hours); it has none
   * (the wallet's creation) only when the wallet was created at an hour no invoice event has: not
   * midnight (the boundaries and their drafts' ends), and no grace period (no one-off draft ending
   * at any hour). A threshold given as a share is of `held`, the credits the wallet holds.
   */
  private rule(spec: RuleSpec, walletCreatedAt: number, held: Money): { input: RuleInput; body: Record<string, unknown> } {
    const credits = { grantedCredits: new Money(spec.granted ?? 0), paidCredits: new Money(spec.paid ?? 0) };
    const bodyCredits = {
      ...(spec.granted === null ? {} : { granted_credits: spec.granted }),
      ...(spec.paid === null ? {} : { paid_credits: spec.paid }),
    };
    if (spec.trigger === 'threshold') {
      const threshold =
        typeof spec.threshold === 'string'
          ? new Money(spec.threshold)
          : held.times(spec.threshold.permille).div(1000).toDecimalPlaces(2, Money.ROUND_DOWN);
      return {
        input: { trigger: 'threshold', interval: null, thresholdCredits: threshold, ...credits, startedAt: null },
        body: { trigger: 'threshold', threshold_credits: threshold.toFixed(), ...bodyCredits },
      };
    }
    const now = new Date(this.model.now);
    const creationAllowed = this.scenario.graceDays === 0 && new Date(walletCreatedAt).getUTCHours() !== 0;
    let startedAt: number | null = null;
    if (spec.startedAt !== null || !creationAllowed) {
      const at = spec.startedAt ?? { monthsBack: 0, day: now.getUTCDate(), hour: now.getUTCHours() };
      const month = now.getUTCMonth() - at.monthsBack;
      const lastDay = new Date(Date.UTC(now.getUTCFullYear(), month + 1, 0)).getUTCDate();
      this.minute = (this.minute % 59) + 1;
      startedAt = Date.UTC(now.getUTCFullYear(), month, Math.min(at.day, lastDay), at.hour, this.minute);
    }
    return {
      input: { trigger: 'interval', interval: 'monthly', thresholdCredits: null, ...credits, startedAt },
      body: {
        trigger: 'interval',
        interval: 'monthly',
        ...bodyCredits,
        ...(startedAt === null ? {} : { started_at: new Date(startedAt).toISOString() }),
      },
    };
  }

  /**
   * The service's ids of the wallet's rules (the model's rules and `bodies` in the order sent): a
   * rule the model kept must have kept its id.
   */
  private mapRules(wallet: ModelWallet, bodies: object[], actual: WalletResource['recurring_transaction_rules']): void {
    same(`${wallet.key} rules count`, wallet.rules.length, actual.length);
    wallet.rules.forEach((rule, i) => {
      const known = this.ids.get(rule);
      if (known === undefined) {
        this.ids.set(rule, actual[i]!.id);
        this.ruleBodies.set(rule, bodies[i]!);
      } else same(`${wallet.key} ${rule.key} (sent back unchanged) id`, known, actual[i]!.id);
    });
  }

  /**
   * Waits until the service has made the rule top-ups the model made (their transactions): the
   * wallet's workflow makes them after what caused them, maybe after the answer or the advance.
   */
  async ruleTopUpsSettled(): Promise<void> {
    const expected = this.model.wallets
      .map((wallet) => ({ wallet, count: wallet.transactions.filter((t) => t.source !== 'manual').length }))
      .filter((e) => e.count > 0);
    const total = expected.reduce((acc, e) => acc + e.count, 0);
    if (total === this.syncedRuleTransactions) return;
    const seen = new Map<string, number>();
    try {
      await eventually(
        async () => {
          worker.assertAlive();
          for (const { wallet, count } of expected) {
            const list = await this.ok<WalletTransactionResource[]>('GET', `/v1/wallets/${this.id(wallet)}/transactions?limit=1000`);
            const made = list.filter((t) => t.source !== 'manual').length;
            seen.set(wallet.key, made);
            if (made < count) return undefined;
          }
          return true;
        },
        30_000,
        'rule top-ups',
      );
    } catch {
      throw new Mismatch(
        `rule top-ups (threshold, interval transactions): expected ${JSON.stringify(
          Object.fromEntries(expected.map((e) => [e.wallet.key, e.count])),
        )}, the service had ${JSON.stringify(Object.fromEntries(seen))} after 30 s`,
      );
    }
    this.syncedRuleTransactions = total;
  }

  /**
   * The service's ids of the purchases the model made and of their credit invoices: each model
   * purchase is the service's purchased transaction of its wallet with the same source, instant
   * and amount; its credit invoice's fee is checked once.
   */
  private async resolvePurchases(): Promise<void> {
    for (const wallet of this.model.wallets) {
      const open = wallet.transactions.filter((t) => t.status === 'purchased' && !this.ids.has(t));
      if (open.length === 0) continue;
      const actual = await this.ok<WalletTransactionResource[]>('GET', `/v1/wallets/${this.id(wallet)}/transactions?limit=1000`);
      const known = new Set(this.ids.values());
      for (const t of open) {
        const found = actual.find(
          (a) =>
            a.status === 'purchased' &&
            !known.has(a.id) &&
            a.source === t.source &&
            a.created_at === new Date(t.createdAt).toISOString() &&
            a.amount === d4(t.amount),
        );
        if (!found?.invoice_id) {
          throw new Mismatch(
            `${wallet.key}: no purchased transaction of ${d4(t.amount)} cents (${t.source}, ${new Date(t.createdAt).toISOString()}) ` +
              `with a credit invoice, got ${JSON.stringify(actual.filter((a) => a.status === 'purchased'))}`,
          );
        }
        known.add(found.id);
        this.ids.set(t, found.id);
        const invoice = this.invoiceByKey(t.invoiceKey!);
        this.ids.set(invoice, found.invoice_id);
        await this.feeIds(invoice);
      }
    }
  }

  /**
   * A credit note on an earlier invoice: whole cents per item, chosen from what the model says is
   * still creditable on the fee (all of it, part of it, or a cent more than that: a 422).
   */
  private async createCreditNote(op: Extract<Op, { op: 'creditNote' }>): Promise<boolean> {
    const m = this.model;
    // Not on the credit invoice of a wallet purchase: what crediting a purchase of credits does to
    // the credits is nowhere said (Lago voids them), so it is left out.
    const invoices = m.invoices.filter((i) => i.invoiceType !== 'credit' && i.fees.some((f) => f.total.greaterThan(0)));
    if (invoices.length === 0) return false;
    const invoice = invoices[op.invoice % invoices.length]!;
    const fees = invoice.fees.filter((f) => f.total.greaterThan(0));
    const chosen = new Map<ModelFee, Money>();
    for (const item of op.items) {
      const fee = fees[item.fee % fees.length]!;
      if (chosen.has(fee)) continue;
      const room = FinalizationModel.creditable(fee);
      const amount =
        item.amount.kind === 'all' ? room : item.amount.kind === 'part' ? room.times(item.amount.permille).div(1000).floor() : room.plus(1);
      chosen.set(fee, Money.max(amount, 1));
    }
    const serviceFees = await this.feeIds(invoice);
    const items = [...chosen].map(([fee, amount]) => ({ fee, amount }));
    const res = await this.call<CreditNoteResource>('POST', '/v1/credit_notes', {
      invoice_id: this.id(invoice),
      reason: 'other',
      items: items.map((i) => ({ fee_id: serviceFees.get(i.fee.key), amount_cents: Number(i.amount.toFixed(0)) })),
    });
    const { outcome, note } = m.createCreditNote(invoice, items);
    this.expectOutcome('credit note creation', outcome, res);
    if (note) {
      this.ids.set(note, res.body.id);
      if (op.finalize) {
        this.expectOutcome(
          'credit note finalization',
          m.finalizeCreditNote(note),
          await this.call('POST', `/v1/credit_notes/${res.body.id}/finalize`),
        );
      }
    }
    return true;
  }

  /** The service's fee ids of a model invoice, checking each fee's amounts on the way. */
  private async feeIds(invoice: ModelInvoice): Promise<Map<string, string>> {
    const body = await this.ok<InvoiceResource>('GET', `/v1/invoices/${this.id(invoice)}`);
    const ids = new Map<string, string>();
    // Only fees with an amount: whether a line of zero is listed says nothing about money.
    for (const fee of invoice.fees.filter((f) => !f.amount.isZero())) {
      const found = (body.fees ?? []).filter((f) =>
        fee.feeType === 'add_on' ? f.invoice_display_name === fee.key : f.fee_type === fee.feeType,
      );
      if (found.length !== 1) throw new Mismatch(`${invoice.key}: expected one ${fee.key} fee, got ${JSON.stringify(body.fees)}`);
      const actual = found[0]!;
      same(
        `${invoice.key} ${fee.key} fee`,
        { amount: d4(fee.amount), tax: d4(fee.tax) },
        { amount: actual.amount_cents, tax: actual.taxes_amount_cents },
      );
      ids.set(fee.key, actual.id);
    }
    return ids;
  }

  /** Advances the test clock and waits until every workflow of the customer has caught up. */
  private async advance(target: number): Promise<void> {
    const iso = new Date(target).toISOString();
    const res = await this.call<TestClockResource>('POST', `/v1/test_clocks/${this.clock.id}/advance`, { frozen_time: iso });
    if (res.status !== 202) throw new Error(`advance to ${iso}: ${res.status} ${res.raw}`);
    await eventually(
      async () => {
        worker.assertAlive();
        const clock = await this.ok<TestClockResource>('GET', `/v1/test_clocks/${this.clock.id}`);
        return clock.status === 'ready' ? clock : undefined;
      },
      120_000,
      `test clock ready at ${iso}`,
    );
  }

  /**
   * Waits until the service shows as many invoices, and as many drafts, as the model: without a
   * grace period a one-off invoice is finalized by its workflow just after the answer.
   */
  private async invoicesSettled(): Promise<void> {
    const expected = this.model.invoices;
    const drafts = expected.filter((i) => i.status === 'draft').length;
    await eventually(
      async () => {
        const list = await this.invoices();
        return list.length >= expected.length && list.filter((i) => i.status === 'draft').length <= drafts ? true : undefined;
      },
      30_000,
      `${expected.length} invoices, ${drafts} of them drafts`,
    );
  }

  private invoices(): Promise<InvoiceResource[]> {
    return this.ok<InvoiceResource[]>('GET', `/v1/invoices?customer_id=${this.customer.id}&limit=1000`);
  }

  // ---- checks -------------------------------------------------------------------------------

  /** Everything the API shows of the customer against the model, to the cent. */
  private async check(after: string): Promise<void> {
    const [invoices, wallets, notes, applied, coupons] = await Promise.all([
      this.invoices(),
      this.ok<WalletResource[]>('GET', `/v1/wallets?customer_id=${this.customer.id}&limit=1000`),
      this.ok<CreditNoteResource[]>('GET', `/v1/credit_notes?customer_id=${this.customer.id}&limit=1000`),
      this.ok<AppliedCouponResource[]>('GET', `/v1/customers/${this.customer.id}/applied_coupons?limit=1000`),
      this.ok<CouponResource[]>('GET', '/v1/coupons?limit=1000'),
    ]);
    try {
      await this.resolvePurchases();
      this.checkInvoices(invoices);
      this.checkWallets(wallets);
      this.checkCreditNotes(notes);
      this.checkCoupons(applied, coupons);
    } catch (err) {
      if (err instanceof Mismatch) err.message = `after ${after} at ${new Date(this.model.now).toISOString()}: ${err.message}`;
      throw err;
    }
  }

  /**
   * Every invoice, and the order in which they were finalized: the organization's gapless number
   * sequence. The subscription's invoices are known by their creation instant (a boundary each).
   */
  private checkInvoices(actual: InvoiceResource[]): void {
    const expected = this.model.invoices;
    same('invoices', expected.map((i) => i.invoiceType).sort(), actual.map((i) => i.invoice_type).sort());
    const known = new Set(this.ids.values());
    const unmatched = actual
      .filter((i) => !known.has(i.id) && i.invoice_type === 'subscription')
      .sort((a, b) => a.created_at.localeCompare(b.created_at));
    for (const invoice of expected.filter((i) => !this.ids.has(i))) {
      const body = unmatched.shift();
      if (invoice.invoiceType !== 'subscription' || !body)
        throw new Mismatch(`${invoice.key}: no ${invoice.invoiceType} invoice of the service matches it`);
      this.ids.set(invoice, body.id);
    }
    // The credit invoices of rule top-ups made at one instant (several wallets' workflows at once)
    // are numbered in no specified order among themselves: they are compared as one group.
    const byId = new Map(expected.map((i) => [this.id(i), i]));
    const orderKey = (invoice: ModelInvoice | undefined, id: string) =>
      invoice?.purchase && invoice.purchase.transaction.source !== 'manual'
        ? `credit invoice of a rule top-up at ${new Date(invoice.createdAt).toISOString()}`
        : id;
    same(
      'invoices in finalization order',
      expected
        .filter((i) => i.sequence !== null)
        .sort((a, b) => a.sequence! - b.sequence!)
        .map((i) => orderKey(i, this.id(i))),
      actual
        .filter((i) => i.status !== 'draft')
        .sort((a, b) => a.number.localeCompare(b.number))
        .map((i) => orderKey(byId.get(i.id), i.id)),
    );
    for (const invoice of expected) {
      const body = actual.find((i) => i.id === this.id(invoice));
      if (!body) throw new Mismatch(`${invoice.key}: invoice ${this.id(invoice)} is not listed`);
      same(
        invoice.key,
        {
          status: invoice.status,
          finalized_at: isoOrNull(invoice.finalizedAt),
          payment_status: invoice.status === 'paid' ? 'succeeded' : 'pending',
          fees_amount_cents: d4(invoice.feesAmount),
          subtotal: d4(invoice.subtotal),
          tax_amount: d4(invoice.taxAmount),
          coupons_amount_cents: d4(invoice.couponsAmount),
          credit_notes_amount_cents: d4(invoice.creditNotesAmount),
          prepaid_credit_amount: d4(invoice.prepaidCredit),
          total: d4(invoice.total),
          applied_coupons: sorted(
            invoice.coupons.map((c) => ({
              applied_coupon_id: this.id(this.appliedCoupon(c.appliedCouponKey)),
              amount_cents: d4(c.amount),
            })),
          ),
        },
        {
          status: body.status,
          finalized_at: body.finalized_at,
          payment_status: body.payment_status,
          fees_amount_cents: body.fees_amount_cents,
          subtotal: body.subtotal,
          tax_amount: body.tax_amount,
          coupons_amount_cents: body.coupons_amount_cents,
          credit_notes_amount_cents: body.credit_notes_amount_cents,
          prepaid_credit_amount: body.prepaid_credit_amount,
          total: body.total,
          applied_coupons: sorted(
            body.applied_coupons.map((c) => ({ applied_coupon_id: c.applied_coupon_id, amount_cents: c.amount_cents })),
          ),
        },
      );
    }
  }

  private appliedCoupon(key: string): ModelAppliedCoupon {
    return this.model.appliedCoupons.find((a) => a.key === key)!;
  }

  /**
   * Balances to the cent. credits_balance follows from the cents (balance / (rate x 100)); the
   * service derives consumed credits by a division that need not terminate, so its 4-digit figure
   * may differ from the exact one by one unit of the last digit.
   */
  private checkWallets(actual: WalletResource[]): void {
    same('wallets', this.model.wallets.map((w) => this.id(w)).sort(), actual.map((w) => w.id).sort());
    for (const wallet of this.model.wallets) {
      const body = actual.find((w) => w.id === this.id(wallet))!;
      same(
        wallet.key,
        {
          status: wallet.status,
          terminated_at: isoOrNull(wallet.terminatedAt),
          balance_cents: d4(wallet.balance),
          priority: wallet.priority,
        },
        { status: body.status, terminated_at: body.terminated_at, balance_cents: body.balance_cents, priority: body.priority },
      );
      same(
        `${wallet.key} recurring_transaction_rules`,
        wallet.rules.map((r) => ({
          id: this.ids.get(r) ?? null,
          trigger: r.trigger,
          interval: r.interval,
          threshold_credits: r.thresholdCredits === null ? null : d4(r.thresholdCredits),
          paid_credits: d4(r.paidCredits),
          granted_credits: d4(r.grantedCredits),
          started_at: isoOrNull(r.startedAt),
          created_at: isoOrNull(r.createdAt),
        })),
        body.recurring_transaction_rules.map((r) => ({
          id: r.id,
          trigger: r.trigger,
          interval: r.interval,
          threshold_credits: r.threshold_credits,
          paid_credits: r.paid_credits,
          granted_credits: r.granted_credits,
          started_at: r.started_at,
          created_at: r.created_at,
        })),
      );
      const credits = wallet.balance.div(wallet.rate.times(100));
      if (credits.minus(body.credits_balance).abs().greaterThan('0.0001')) {
        throw new Mismatch(
          `${wallet.key} credits_balance: expected ${credits.toFixed(6)} (balance / (rate x 100)), got ${body.credits_balance}`,
        );
      }
    }
  }

  private checkCreditNotes(actual: CreditNoteResource[]): void {
    same('credit notes', this.model.creditNotes.map((n) => this.id(n)).sort(), actual.map((n) => n.id).sort());
    for (const note of this.model.creditNotes) {
      const body = actual.find((n) => n.id === this.id(note))!;
      same(
        note.key,
        {
          invoice_id: this.id(note.invoice),
          status: note.status,
          credit_amount_cents: d4(note.credit),
          balance_amount_cents: d4(note.balance),
          applications: sorted(
            note.applications.map((a) => ({ invoice_id: this.id(this.invoiceByKey(a.invoiceKey)), amount_cents: d4(a.amount) })),
          ),
        },
        {
          invoice_id: body.invoice_id,
          status: body.status,
          credit_amount_cents: body.credit_amount_cents,
          balance_amount_cents: body.balance_amount_cents,
          applications: sorted(body.applications.map((a) => ({ invoice_id: a.invoice_id, amount_cents: a.amount_cents }))),
        },
      );
    }
  }

  private invoiceByKey(key: string): ModelInvoice {
    return this.model.invoices.find((i) => i.key === key)!;
  }

  private checkCoupons(applied: AppliedCouponResource[], coupons: CouponResource[]): void {
    same('applied coupons', this.model.appliedCoupons.map((a) => this.id(a)).sort(), applied.map((a) => a.id).sort());
    for (const a of this.model.appliedCoupons) {
      const body = applied.find((b) => b.id === this.id(a))!;
      same(
        a.key,
        {
          status: a.status,
          amount_cents: a.terms.amountCents === null ? null : d4(a.terms.amountCents),
          percentage_rate: a.terms.percentageRate?.toFixed() ?? null,
          frequency_duration: a.terms.frequencyDuration,
          frequency_duration_remaining: a.remaining,
        },
        {
          status: body.status,
          amount_cents: body.amount_cents,
          percentage_rate: body.percentage_rate,
          frequency_duration: body.frequency_duration,
          frequency_duration_remaining: body.frequency_duration_remaining,
        },
      );
    }
    for (const coupon of this.model.coupons) {
      const body = coupons.find((c) => c.id === this.id(coupon));
      same(`${coupon.key} status`, coupon.status, body?.status);
    }
  }

  /**
   * Every invoice's settlements (its route's rows: the schema is not exported): each credit note
   * and wallet once, with what it gave, and the payment of what was left when it was paid.
   */
  private async checkSettlements(): Promise<void> {
    for (const invoice of this.model.invoices) {
      const actual = await this.ok<{ settlement_type: string; source_id: string; amount_cents: string }[]>(
        'GET',
        `/v1/invoices/${this.id(invoice)}/settlements?limit=1000`,
      );
      same(
        `${invoice.key} settlements`,
        sorted([
          ...invoice.creditNotes.map((c) => ({
            type: 'credit_note',
            source: this.id(this.creditNote(c.creditNoteKey)),
            amount: d4(c.amount),
          })),
          ...invoice.wallets.map((w) => ({ type: 'wallet_credit', source: this.id(this.wallet(w.walletKey)), amount: d4(w.amount) })),
          ...(invoice.payment?.greaterThan(0) ? [{ type: 'payment', source: null, amount: d4(invoice.payment) }] : []),
        ]),
        sorted(
          actual.map((a) => ({
            type: a.settlement_type,
            source: a.settlement_type === 'payment' ? null : a.source_id,
            amount: a.amount_cents,
          })),
        ),
      );
    }
  }

  private creditNote(key: string): ModelCreditNote {
    return this.model.creditNotes.find((n) => n.key === key)!;
  }

  private wallet(key: string): ModelWallet {
    return this.model.wallets.find((w) => w.key === key)!;
  }

  /**
   * Every wallet's transactions: each grant, purchase and void once, each consumption once per
   * invoice, each rule top-up once per run or crossing, nothing else; with their source, instant,
   * credits, and settled_at (a purchase's when its invoice was paid, else null).
   */
  async checkTransactions(): Promise<void> {
    await this.resolvePurchases();
    for (const wallet of this.model.wallets) {
      const actual = await this.ok<WalletTransactionResource[]>('GET', `/v1/wallets/${this.id(wallet)}/transactions?limit=1000`);
      same(
        `${wallet.key} transactions`,
        sorted(
          wallet.transactions.map((t) => ({
            status: t.status,
            source: t.source,
            amount: d4(t.amount),
            credits: t.credits?.toFixed() ?? null,
            invoice_id: t.invoiceKey === null ? null : this.id(this.invoiceByKey(t.invoiceKey)),
            created_at: isoOrNull(t.createdAt),
            settled_at: isoOrNull(t.settledAt),
          })),
        ),
        sorted(
          actual.map((t) => ({
            status: t.status,
            source: t.source,
            amount: t.amount,
            credits: t.status === 'invoiced' ? null : new Money(t.credit_amount).toFixed(),
            invoice_id: t.invoice_id,
            created_at: t.created_at,
            settled_at: t.settled_at,
          })),
        ),
      );
    }
  }
}

/** The instant `months` month boundaries after `t`. */
function monthsAfter(t: number, months: number): number {
  let at = t;
  for (let i = 0; i < months; i++) at = nextMonthStart(at);
  return at;
}

/**
 * Voided credits of a share (per mille) of what the wallet holds. Credits have at most 4 decimals
 * on input; the smallest is voided rather than nothing.
 */
function voidedCredits(wallet: ModelWallet, permille: number): Money {
  const held = wallet.balance.div(wallet.rate.times(100));
  return Money.max(held.times(permille).div(1000).toDecimalPlaces(4, Money.ROUND_DOWN), '0.0001');
}

const ruleInput = (rule: ModelRule): RuleInput => ({
  trigger: rule.trigger,
  interval: rule.interval,
  thresholdCredits: rule.thresholdCredits,
  grantedCredits: rule.grantedCredits,
  paidCredits: rule.paidCredits,
  startedAt: rule.startedAt,
});

function expirationInstant(now: number, expiration: Expiration): number {
  return 'boundaries' in expiration ? monthsAfter(now, expiration.boundaries) : now + expiration.hours * HOUR_MS;
}

// ---- running --------------------------------------------------------------------------------

/** Runs the scenarios CONCURRENCY at a time; stops starting new ones at the first failure. */
async function runConcurrently(scenarios: Scenario[]): Promise<{ index: number; error: unknown }[]> {
  const failures: { index: number; error: unknown }[] = [];
  let next = 0;
  const lane = async () => {
    while (next < scenarios.length && failures.length === 0) {
      const index = next++;
      try {
        await ScenarioRun.run(scenarios[index]!);
      } catch (error) {
        failures.push({ index, error });
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  return failures.sort((a, b) => a.index - b.index);
}

const property = fc.asyncProperty(scenarioArb, (scenario) => ScenarioRun.run(scenario));

/** fast-check replays run `path` of the seed alone and shrinks it (for at most SHRINK_MS). */
async function replay(path: string): Promise<void> {
  await fc.assert(property, {
    seed: SEED,
    path,
    numRuns: 1,
    includeErrorInReport: true,
    plugins: [fc.interruptAfterTimeLimit(SHRINK_MS)],
  } as fc.Parameters<[Scenario]>);
}

describe('invoice finalization against the reference model', () => {
  it.concurrent.each(Object.entries(REGRESSIONS))('%s', async (_name, scenario) => ScenarioRun.run(scenario), 120_000);
  it.concurrent.each(Object.entries(EXAMPLES))('%s', async (_name, scenario) => ScenarioRun.run(scenario), 120_000);

  it(
    `applies coupons, taxes, credit notes and wallets as the model does (${RUNS} runs, seed ${SEED})`,
    async () => {
      if (PATH !== undefined) {
        console.log(`replaying FC_SEED=${SEED} FC_PATH=${PATH}`);
        await replay(PATH);
        return;
      }
      const started = Date.now();
      const scenarios = fc.sample(scenarioArb, { seed: SEED, numRuns: RUNS });
      const failures = await runConcurrently(scenarios);
      console.log(`${RUNS} runs (seed ${SEED}, ${CONCURRENCY} at a time): ${((Date.now() - started) / 1000).toFixed(1)} s`);
      console.log(`exercised: ${coverageLine()}`);
      if (failures.length === 0) return;
      const { index, error } = failures[0]!;
      console.log(`run ${index} failed (replay: FC_SEED=${SEED} FC_PATH=${index}): ${String(error)}\nshrinking...`);
      try {
        await replay(String(index));
      } catch (shrunk) {
        throw new Error(`FC_SEED=${SEED} FC_PATH=${index}\n${String(shrunk instanceof Error ? shrunk.message : shrunk)}`);
      }
      throw new Error(`FC_SEED=${SEED} FC_PATH=${index} failed but did not fail again when replayed alone:\n${String(error)}`);
    },
    3 * 60 * 60_000,
  );
});
