// A model-based test of subscription billing (issue 12, item 2): fast-check generates sequences of
// operations on one subscription (create with any interval, billing time, timing, trial and time
// zone; usage events; upgrades, downgrades, back to the current plan, a plan in another currency;
// cancel; terminate with each on_termination_action; the test clock moving by hours, to a
// boundary, by days, across periods, around the trial end), runs them through the public API on
// test clocks, and after every step compares every invoice, fee and credit note the service issued
// with the reference model of subscription-model.ts (billing-rules.md, lago-reference.md §3).
//
// The catalog's `usage` family (plans change only within their family) adds usage charges paid in
// advance on a count and a sum (each event billed when it arrives), on the recurring `seats`
// (carried units billed at each period start), prorated in advance and prorated in arrear
// (api-contract.md, Invoices; lago-reference.md §2.10; docs/usage-charges.md). Left out of it:
// trials (whether a trial holds back usage billed in advance is not specified), and, behind
// AVOID.upgradesWithChargesInAdvance, upgrades inside a period from or to a plan with charges in
// advance, and plans with a prorated charge in arrear (see AVOID). Downgrades (at a boundary),
// cancellations and terminations are generated.
//
// Runs: MODEL_RUNS (default 200) scenarios generated from one seed, several at a time (each has
// its own clock and customer, so they are independent). The first failing one is replayed through
// fc.assert with its seed and path, which shrinks it. To replay: FC_SEED=<seed> (the same runs), or
// FC_SEED=<seed> FC_PATH=<path> (one counterexample, shrunk further). MODEL_CONCURRENCY sets how
// many scenarios run at once.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrganization, createTestStack, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';
import {
  CATALOG,
  createCatalog,
  hasProratedInArrear,
  runScenario,
  type CreateSpec,
  type DriverContext,
  type Scenario,
  type Step,
} from './subscription-driver';
import type { TerminationAction } from './subscription-model';

/**
 * Patterns left out of generation while the service bug they trigger is open; set to false once
 * it is fixed (the model then holds the service to what it expects of them).
 */
const AVOID = {
  /**
   * Left out again: the re-billing is fixed (the close bills missed in-advance events of the plan's
   * own segment only; the regression below runs), but which events a recurring in-advance charge
   * of the new plan bills is open: a seat whose event arrived before an upgrade at its own instant
   * (seed 1960456449, path 78) is billed by the service for the new plan's segment, not by the
   * model. An upgrade inside a period from or to a plan with charges paid in advance (the driver skips
   * the change step). The period's close bills "missed" in-advance events of the new plan's
   * charges from the period start, not from the upgrade: events before the upgrade (already billed
   * by the old plan, in advance or in arrear) are billed a second time. Also unspecified: which of
   * the period's events before the upgrade a recurring in-advance charge of the new plan counts.
   */
  upgradesWithChargesInAdvance: true,
  /**
   * Fixed (a fee's units are stored to Decimal128's 34 significant digits). Plans with a prorated charge in arrear (never created, the driver skips changes to them). Its
   * fee's units are exact (api-contract.md: only the fee is rounded), so a non-terminating ratio
   * (+1 seat for 21 of 31 days: 0.67741935…) has 40 significant digits, which Decimal128 refuses
   * ("inexact rounding", src/db/decimal.ts toDecimal128 from feeRecord): the billing step fails
   * on every retry, the subscription's workflow never gets past it (the clock never ready, a plan
   * change never answered). A fixed case below whose units all terminate covers them meanwhile.
   */
  proratedInArrear: false,
  /**
   * Fixed (an invoice command that finds no workflow starts it and asks again). Paying an in-advance event's invoice the moment it shows finalized (the driver pays it again
   * a moment later): createInvoice finalizes the document before it starts the invoice's
   * workflow, and POST /v1/invoices/{id}/pay in between answers 500 (WorkflowNotFoundError
   * invoice/<id>). The clock's readiness covers the other invoices; an event's is issued by the
   * subscription's workflow on the events API's signal, outside it.
   */
  payingAnEventInvoiceAsItIsIssued: false,
};

const RUNS = Number(process.env.MODEL_RUNS ?? 200);
const SEED = process.env.FC_SEED !== undefined ? Number(process.env.FC_SEED) : Math.floor(Math.random() * 2 ** 31);
const PATH = process.env.FC_PATH;
// The service, its MongoDB stand-in and Temporal share two cores: more at once only queues.
const CONCURRENCY = Number(process.env.MODEL_CONCURRENCY ?? 8);
/** How long shrinking a counterexample may take (each attempt replays a whole scenario). */
const SHRINK_MS = 10 * 60_000;

// ---- generators -----------------------------------------------------------------------------

const ORG_TIMEZONE = 'Europe/Paris';
// Whole and half-hour offsets on both sides of UTC, DST in both hemispheres, a 30-minute DST
// shift, a midnight that does not exist (Santiago), and null for the organization's zone.
const TIMEZONES = [
  'UTC',
  'America/New_York',
  'Asia/Tokyo',
  'Australia/Lord_Howe',
  'Asia/Kathmandu',
  'America/Santiago',
  'Pacific/Kiritimati',
  'Pacific/Pago_Pago',
  null,
];
const ACTIONS: TerminationAction[] = ['generate_invoice', 'generate_credit_note', 'skip'];

const actionArb = fc.option(fc.constantFrom(...ACTIONS), { nil: null });

const usagePlans = new Set(CATALOG.filter((p) => p.family === 'usage').map((p) => p.key));
const createdPlans = (family: 'classic' | 'usage') =>
  CATALOG.filter((p) => p.currency === 'USD' && p.family === family && !(AVOID.proratedInArrear && hasProratedInArrear(p))).map(
    (p) => p.key,
  );

const createArb = (family: 'classic' | 'usage'): fc.Arbitrary<CreateSpec> =>
  fc
    .record({
      plan: fc.constantFrom(...createdPlans(family)),
      billingTime: fc.constantFrom('calendar' as const, 'anniversary' as const),
      payInAdvance: fc.boolean(),
      trialDays: fc.oneof(
        { weight: 2, arbitrary: fc.constant(null) },
        { weight: 3, arbitrary: fc.constant(0) },
        { weight: 2, arbitrary: fc.integer({ min: 1, max: 40 }) },
      ),
      timezone: fc.constantFrom(...TIMEZONES),
      start: fc.oneof(
        fc.record({
          year: fc.integer({ min: 2030, max: 2032 }),
          month: fc.integer({ min: 1, max: 12 }),
          // Month ends (clamped anniversaries), first days (calendar boundaries) and anything else.
          day: fc.oneof(fc.constantFrom(1, 28, 29, 30, 31), fc.integer({ min: 1, max: 31 })),
          hour: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 23 })),
          minute: fc.constantFrom(0, 30, 59),
        }),
        // Days around DST changes (New York, Santiago's missing midnight) and a leap day.
        fc
          .record({
            date: fc.constantFrom(
              { year: 2030, month: 3, day: 9 },
              { year: 2030, month: 11, day: 2 },
              { year: 2030, month: 9, day: 7 },
              { year: 2030, month: 9, day: 8 },
              { year: 2030, month: 4, day: 6 },
              { year: 2032, month: 2, day: 29 },
              { year: 2031, month: 12, day: 31 },
            ),
            hour: fc.integer({ min: 0, max: 23 }),
            minute: fc.constantFrom(0, 30),
          })
          .map(({ date, hour, minute }) => ({ ...date, hour, minute })),
      ),
      startOffsetHours: fc.oneof(
        { weight: 6, arbitrary: fc.constant(0) },
        { weight: 1, arbitrary: fc.integer({ min: -24 * 70, max: -1 }) },
        { weight: 1, arbitrary: fc.integer({ min: 1, max: 72 }) },
      ),
      onTerminationAction: actionArb,
    })
    // The usage plans have no trial, and none is asked for them (left out: see the file's header).
    .map((spec) => (usagePlans.has(spec.plan) ? { ...spec, trialDays: 0 } : spec));

// Seats (no plan of the classic family charges them) mostly on the usage family.
const eventArb = (seatsWeight: number) =>
  fc.record({
    metric: fc.oneof(
      { weight: 3, arbitrary: fc.constant('calls' as const) },
      { weight: 3, arbitrary: fc.constant('gb' as const) },
      { weight: seatsWeight, arbitrary: fc.constant('seats' as const) },
    ),
    // The segment's first instant and the present are edges of their own.
    position: fc.oneof(
      fc.constantFrom(0, 1),
      fc.integer({ min: 0, max: 1000 }).map((n) => n / 1000),
    ),
    gb: fc.constantFrom('1', '2.5', '0.3333', '10', '0'),
    // Seats added, and removed (never below 0 in all: the driver holds the total there).
    seats: fc.constantFrom(1, 1, 2, 3, -1, -2),
  });

// About as many commands as waits, so that changes meet trial ends, boundaries and each other.
// On the usage family, twice as many events steps (billed as they arrive, across boundaries).
const stepArb = (family: 'classic' | 'usage'): fc.Arbitrary<Step> =>
  fc.oneof(
    { weight: 3, arbitrary: fc.record({ op: fc.constant('wait_hours' as const), hours: fc.integer({ min: 1, max: 36 }) }) },
    // At the boundary instant itself, or some hours into its first day (when usage can follow).
    {
      weight: 4,
      arbitrary: fc.record({
        op: fc.constant('wait_boundary' as const),
        hours: fc.oneof({ weight: 1, arbitrary: fc.constant(0) }, { weight: 2, arbitrary: fc.integer({ min: 1, max: 23 }) }),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        op: fc.constant('wait_days' as const),
        days: fc.integer({ min: 1, max: 10 }),
        hour: fc.integer({ min: 0, max: 23 }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        op: fc.constant('wait_periods' as const),
        periods: fc.integer({ min: 2, max: 4 }),
        hours: fc.integer({ min: 0, max: 12 }),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        op: fc.constant('wait_trial_end' as const),
        minutes: fc.oneof(fc.constant(0), fc.integer({ min: -180, max: 180 })),
      }),
    },
    {
      weight: family === 'usage' ? 12 : 6,
      arbitrary: fc.record({
        op: fc.constant('events' as const),
        events: fc.array(eventArb(family === 'usage' ? 4 : 1), { minLength: 1, maxLength: 6 }),
      }),
    },
    { weight: 6, arbitrary: fc.record({ op: fc.constant('change' as const), plan: fc.nat({ max: 11 }) }) },
    { weight: 1, arbitrary: fc.constant({ op: 'change_currency' as const }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('cancel' as const), action: actionArb }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('terminate' as const), action: actionArb }) },
  );

const scenarioOf = (family: 'classic' | 'usage'): fc.Arbitrary<Scenario> =>
  fc.record({ create: createArb(family), steps: fc.array(stepArb(family), { minLength: 2, maxLength: 20 }) });

// A third of the runs on the usage family.
const scenarioArb: fc.Arbitrary<Scenario> = fc.oneof(
  { weight: 2, arbitrary: scenarioOf('classic') },
  { weight: 1, arbitrary: scenarioOf('usage') },
);

// ---- fixed cases ----------------------------------------------------------------------------

const at = (year: number, month: number, day: number, hour = 0, minute = 0) => ({ year, month, day, hour, minute });
const base: CreateSpec = {
  plan: 'm-basic',
  billingTime: 'calendar',
  payInAdvance: false,
  trialDays: 0,
  timezone: 'UTC',
  start: at(2030, 1, 1),
  startOffsetHours: 0,
  onTerminationAction: null,
};

/**
 * Cases kept whatever the seed: the issue's examples, edges that random runs reach rarely, and the
 * bugs the model found. One with `open` reproduces a bug still open: it runs once AVOID[open] is false.
 */
const REGRESSIONS: { name: string; scenario: Scenario; open?: keyof typeof AVOID }[] = [
  {
    name: 'issue 12: an upgrade on the start day in advance credits the first fee and bills the new plan (800, then 1600)',
    scenario: { create: { ...base, payInAdvance: true, start: at(2030, 1, 24, 9) }, steps: [{ op: 'change', plan: 1 }] },
  },
  {
    name: 'issue 12: a termination credit note is whole cents (10000 x 21/31 = 6774)',
    scenario: {
      create: { ...base, plan: 'm-max', trialDays: 0, payInAdvance: true, start: at(2031, 3, 1) },
      steps: [
        { op: 'wait_days', days: 9, hour: 12 },
        { op: 'terminate', action: 'generate_credit_note' },
      ],
    },
  },
  {
    name: 'issue 12: two upgrades in one day in advance, each credited and billed',
    scenario: {
      create: { ...base, plan: 'm-free', payInAdvance: true, start: at(2030, 1, 10) },
      steps: [
        { op: 'wait_days', days: 10, hour: 8 },
        { op: 'change', plan: 0 },
        { op: 'wait_hours', hours: 7 },
        { op: 'change', plan: 1 },
      ],
    },
  },
  {
    name: 'edge: trial ending exactly on a boundary, in advance',
    scenario: {
      create: { ...base, payInAdvance: true, trialDays: 31, start: at(2030, 1, 1) },
      steps: [
        { op: 'wait_boundary', hours: 0 },
        { op: 'wait_boundary', hours: 3 },
      ],
    },
  },
  {
    name: 'edge: a weekly trial longer than the first period, in advance, with an upgrade inside it',
    scenario: {
      create: { ...base, plan: 'w-basic', payInAdvance: true, trialDays: 10, start: at(2030, 1, 3, 15) },
      steps: [
        { op: 'wait_boundary', hours: 2 },
        { op: 'change', plan: 1 },
        { op: 'wait_trial_end', minutes: 30 },
        { op: 'events', events: [{ metric: 'calls', position: 0.5, gb: '1' }] },
        { op: 'wait_boundary', hours: 0 },
      ],
    },
  },
  {
    name: 'edge: a downgrade during a trial that crosses the boundary, in advance',
    scenario: {
      create: { ...base, plan: 'm-pro', payInAdvance: true, trialDays: 20, start: at(2030, 1, 20, 10) },
      steps: [
        { op: 'change', plan: 3 },
        { op: 'wait_boundary', hours: 0 },
        { op: 'wait_trial_end', minutes: 0 },
        { op: 'wait_boundary', hours: 0 },
      ],
    },
  },
  {
    name: 'edge: a termination at the boundary instant, in advance, with a credit note',
    scenario: {
      create: { ...base, payInAdvance: true, start: at(2030, 1, 10, 10) },
      steps: [
        { op: 'events', events: [{ metric: 'calls', position: 0.5, gb: '1' }] },
        { op: 'wait_boundary', hours: 0 },
        { op: 'terminate', action: 'generate_credit_note' },
      ],
    },
  },
  {
    name: 'edge: a termination at the boundary instant, in arrear',
    scenario: {
      create: { ...base, start: at(2030, 1, 10, 10) },
      steps: [
        { op: 'wait_hours', hours: 5 },
        { op: 'events', events: [{ metric: 'calls', position: 0.5, gb: '1' }] },
        { op: 'wait_boundary', hours: 0 },
        { op: 'terminate', action: null },
      ],
    },
  },
  {
    name: 'edge: an upgrade right after a downgrade executed at a boundary, in advance',
    scenario: {
      create: { ...base, plan: 'm-pro', payInAdvance: true, start: at(2030, 1, 10, 10) },
      steps: [
        { op: 'change', plan: 0 },
        { op: 'wait_boundary', hours: 1 },
        { op: 'change', plan: 1 },
        { op: 'wait_boundary', hours: 0 },
      ],
    },
  },
  {
    name: 'edge: a start 40 days back with a trial, in advance',
    scenario: {
      create: { ...base, payInAdvance: true, trialDays: 7, start: at(2030, 3, 15, 12), startOffsetHours: -40 * 24 },
      steps: [{ op: 'wait_boundary', hours: 0 }],
    },
  },
  {
    name: 'edge: a pending subscription: its plan replaced and a cancel refused before its start, then its trial',
    scenario: {
      create: { ...base, payInAdvance: true, trialDays: 3, start: at(2030, 3, 15, 12), startOffsetHours: 30 },
      steps: [
        { op: 'change', plan: 1 },
        { op: 'cancel', action: null },
        { op: 'wait_boundary', hours: 1 },
        { op: 'wait_trial_end', minutes: 0 },
        { op: 'wait_boundary', hours: 0 },
      ],
    },
  },
  {
    name: 'edge: a pending subscription terminated',
    scenario: {
      create: { ...base, start: at(2030, 3, 15, 12), startOffsetHours: 30 },
      steps: [
        { op: 'terminate', action: null },
        { op: 'wait_boundary', hours: 1 },
      ],
    },
  },
  {
    name: 'edge: a weekly anniversary in Santiago across the missing midnight',
    scenario: {
      create: {
        ...base,
        plan: 'w-pro',
        billingTime: 'anniversary',
        timezone: 'America/Santiago',
        payInAdvance: true,
        start: at(2030, 9, 1, 0, 30),
      },
      steps: [
        { op: 'wait_days', days: 6, hour: 12 },
        { op: 'change', plan: 1 },
        { op: 'wait_boundary', hours: 0 },
        { op: 'wait_days', days: 1, hour: 0 },
        { op: 'terminate', action: 'generate_credit_note' },
      ],
    },
  },
  {
    name: 'bug: a termination inside the trial, on the day it would have ended, bills nothing',
    scenario: {
      create: { ...base, trialDays: 10, start: at(2030, 1, 5, 18) },
      steps: [
        { op: 'wait_trial_end', minutes: -120 },
        { op: 'terminate', action: 'generate_invoice' },
      ],
    },
  },
  {
    name: 'usage: a count and a sum in advance, each event on an invoice of its own, a 0 GB event a fee without one, nothing again at the period end',
    scenario: {
      create: { ...base, plan: 'm-adv', start: at(2030, 3, 1) },
      steps: [
        { op: 'wait_days', days: 9, hour: 10 },
        {
          op: 'events',
          events: [
            { metric: 'gb', position: 0.7, gb: '0.3333' },
            { metric: 'calls', position: 0.5, gb: '1' },
            { metric: 'gb', position: 0.2, gb: '0' },
            { metric: 'gb', position: 1, gb: '0.3333' },
          ],
        },
        { op: 'wait_boundary', hours: 2 },
      ],
    },
  },
  {
    name: 'usage: seats in advance, +2 +1 -1 +1 (not billed twice), the carried seats billed in full on the boundary invoice',
    scenario: {
      create: { ...base, plan: 'm-seats', payInAdvance: true, start: at(2030, 3, 1, 9) },
      steps: [
        { op: 'wait_days', days: 10, hour: 12 },
        {
          op: 'events',
          events: [
            { metric: 'seats', position: 0, gb: '1', seats: 2 },
            { metric: 'seats', position: 0.5, gb: '1', seats: 1 },
            { metric: 'seats', position: 0.7, gb: '1', seats: -1 },
            { metric: 'seats', position: 0.9, gb: '1', seats: 1 },
            { metric: 'gb', position: 1, gb: '10' },
          ],
        },
        { op: 'wait_boundary', hours: 3 },
        { op: 'events', events: [{ metric: 'seats', position: 1, gb: '1', seats: 1 }] },
        { op: 'wait_boundary', hours: 0 },
      ],
    },
  },
  {
    name: 'usage: prorated seats in advance for the days left, then a downgrade: the carried seats on an invoice of their own at the switch',
    scenario: {
      create: { ...base, plan: 'm-aseats', timezone: 'America/New_York', start: at(2030, 3, 11, 8) },
      steps: [
        { op: 'events', events: [{ metric: 'seats', position: 1, gb: '1', seats: 2 }] },
        { op: 'wait_days', days: 5, hour: 23 },
        { op: 'events', events: [{ metric: 'seats', position: 1, gb: '1', seats: 1 }] },
        { op: 'change', plan: 3 },
        { op: 'wait_boundary', hours: 1 },
        { op: 'events', events: [{ metric: 'seats', position: 1, gb: '1', seats: 3 }] },
        { op: 'wait_boundary', hours: 1 },
      ],
    },
  },
  {
    // Every ratio terminates (15 of April's 30 days, whole periods, 15 of June's 30), so the fees
    // are stored despite the bug AVOID.proratedInArrear names.
    name: 'usage: prorated seats in arrear, weighted by their days across an upgrade, a boundary and a termination',
    scenario: {
      create: { ...base, plan: 'm-pseats', start: at(2030, 4, 1) },
      allow: { proratedInArrear: true },
      steps: [
        // 2 seats from April 1 (30 of 30 days), 1 call.
        {
          op: 'events',
          events: [
            { metric: 'seats', position: 0, gb: '1', seats: 2 },
            { metric: 'calls', position: 0, gb: '1' },
          ],
        },
        // Upgraded on April 16: the old segment has 2 x 15/30 = 1 seat.
        { op: 'wait_days', days: 15, hour: 10 },
        { op: 'change', plan: 2 },
        // +2 -1 on April 16: (2 x 15 + 2 x 15 - 1 x 15) / 30 = 1.5 seats on the new plan.
        {
          op: 'events',
          events: [
            { metric: 'seats', position: 1, gb: '1', seats: 2 },
            { metric: 'seats', position: 1, gb: '1', seats: -1 },
          ],
        },
        { op: 'wait_boundary', hours: 0 },
        // May: 3 carried seats, the whole month.
        { op: 'wait_boundary', hours: 0 },
        // Terminated on June 15: 3 x 15/30 = 1.5 seats.
        { op: 'wait_days', days: 14, hour: 12 },
        { op: 'terminate', action: 'generate_invoice' },
      ],
    },
  },
  {
    // Expected: at April 1 one invoice, base fee 2000 and seats 21/31 = 0.6774 units (events 1),
    // 333.33 x 21/31 = 225.8042. Seen: the boundary step fails on every retry (BSONError
    // "0.6774193548387096774193548387096774193548" is not a valid Decimal128 string - inexact
    // rounding), the clock never gets ready.
    name: 'bug (fixed): a prorated seat in arrear for 21 of 31 days is invoiced at the period end',
    scenario: {
      create: { ...base, plan: 'm-pseats', start: at(2030, 3, 1) },
      steps: [
        { op: 'wait_days', days: 10, hour: 10 },
        { op: 'events', events: [{ metric: 'seats', position: 1, gb: '1', seats: 1 }] },
        { op: 'wait_boundary', hours: 0 },
      ],
    },
  },
  {
    // Expected: the call of March 3 is billed once, in arrear on the old plan's segment invoice at
    // the upgrade (1.0000); the call of March 10 in advance (2.5000); April 1 bills no call again.
    name: 'bug (fixed): an upgrade to a plan charging calls in advance; the period close bills the calls before it again',
    scenario: {
      create: { ...base, plan: 'm-pseats', start: at(2030, 3, 1) },
      steps: [
        { op: 'wait_days', days: 4, hour: 10 },
        { op: 'events', events: [{ metric: 'calls', position: 0.5, gb: '1' }] },
        { op: 'wait_days', days: 5, hour: 10 },
        { op: 'change', plan: 1 },
        { op: 'events', events: [{ metric: 'calls', position: 1, gb: '1' }] },
        { op: 'wait_boundary', hours: 0 },
      ],
    },
  },
  {
    // Expected: a seat removed on March 9 (2 of 7 days) and added on March 10 (1 day) weigh -1/7 of
    // a seat: no negative fee, so 0 units for 0 (the service showed -0.1429 units). Seed 1184302574.
    name: 'bug (fixed): prorated seats in arrear weighing less than zero bill 0 units, not negative ones',
    scenario: {
      create: { ...base, plan: 'w-pseats', start: at(2030, 3, 9, 11, 30) },
      steps: [
        { op: 'wait_hours', hours: 24 },
        {
          op: 'events',
          events: [
            { metric: 'seats', position: 0.53, gb: '1', seats: 1 },
            { metric: 'seats', position: 0.17, gb: '1', seats: -1 },
          ],
        },
        { op: 'wait_days', days: 9, hour: 20 },
      ],
    },
  },
  {
    // Seed 688593322: terminated at the very instant its new week began, the termination day was
    // billed its base fee but not the seat carried in from the week before (the usage read of an
    // empty range was skipped, and an empty read weighed no day).
    name: 'bug (fixed): a termination at the first instant of a period bills the seats carried in for its day',
    scenario: {
      create: { ...base, plan: 'w-pseats', start: at(2030, 3, 9, 0, 0) },
      steps: [
        { op: 'events', events: [{ metric: 'seats', position: 0, gb: '1', seats: 1 }] },
        { op: 'wait_boundary', hours: 0 },
        { op: 'terminate', action: null },
      ],
    },
  },
];

// ---- the stack ------------------------------------------------------------------------------

let stack: TestStack;
let worker: StackWorker;
let ctx: DriverContext;

beforeAll(async () => {
  // A 500 is logged with its cause (the answer only carries a request id).
  stack = await createTestStack({ logLevel: 'error' });
  worker = await startStackWorker(stack);
  const org = await createOrganization(stack.app, {
    name: 'Model',
    default_currency: 'USD',
    timezone: ORG_TIMEZONE,
    events_rate_limit_per_minute: 1_000_000,
  });
  ctx = {
    app: stack.app,
    headers: org.headers,
    orgTimezone: ORG_TIMEZONE,
    ...(await createCatalog(stack.app, org.headers)),
    leaveOut: { ...AVOID },
    assertAlive: () => worker.assertAlive(),
  };
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
});

/** Runs `scenarios` `concurrency` at a time; stops starting new ones at the first failure, returns the earliest. */
async function runAll(scenarios: Scenario[], concurrency: number) {
  let next = 0;
  const failures: { index: number; error: unknown }[] = [];
  const totals = { invoices: 0, fees: 0, creditNotes: 0 };
  /** How many runs went through each situation. */
  const situations = new Map<string, number>();
  const lane = async () => {
    while (failures.length === 0 && next < scenarios.length) {
      const index = next++;
      try {
        const stats = await runScenario(ctx, scenarios[index]!);
        totals.invoices += stats.invoices;
        totals.fees += stats.fees;
        totals.creditNotes += stats.creditNotes;
        for (const situation of stats.situations) situations.set(situation, (situations.get(situation) ?? 0) + 1);
      } catch (error) {
        failures.push({ index, error });
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  return { totals, situations, failure: failures.sort((a, b) => a.index - b.index)[0] ?? null };
}

describe('subscription billing against its reference model', () => {
  const property = fc.asyncProperty(scenarioArb, async (scenario) => {
    await runScenario(ctx, scenario);
  });

  /** Replays one run through fc.assert, which shrinks it, and throws the shrunk case with its diff. */
  async function shrink(path: string): Promise<void> {
    try {
      await fc.assert(property, { seed: SEED, path, interruptAfterTimeLimit: SHRINK_MS });
    } catch (shrunk) {
      // fast-check keeps the shrunk case's own error (the diff) as the cause.
      const cause = (shrunk as Error).cause;
      throw new Error(
        `seed ${SEED}, path ${path}: replay the runs with FC_SEED=${SEED}, the shrunk case with FC_SEED=${SEED} FC_PATH=<the path below>\n` +
          `${(shrunk as Error).message}\n\n${cause instanceof Error ? cause.message : String(cause)}`,
      );
    }
  }

  // Concurrent with the fixed cases below: every scenario has its own clock and customer.
  it.concurrent(
    `issues exactly the model's invoices, fees and credit notes (${RUNS} runs, seed ${SEED}${PATH ? `, path ${PATH}` : ''})`,
    async () => {
      if (PATH !== undefined) return shrink(PATH);
      const scenarios = fc.sample(scenarioArb, { seed: SEED, numRuns: RUNS });
      const started = Date.now();
      const cpu = process.cpuUsage();
      const { totals, situations, failure } = await runAll(scenarios, CONCURRENCY);
      const seconds = (Date.now() - started) / 1000;
      // The API and the worker run in this process: its CPU time is a measure a shared machine's load does not blur.
      const { user, system } = process.cpuUsage(cpu);
      if (failure) {
        // The same run through fc.assert: its seed and path give the same scenario.
        await shrink(String(failure.index));
        throw new Error(
          `seed ${SEED}, run ${failure.index} failed but passed when replayed (FC_SEED=${SEED} FC_PATH=${failure.index}):\n${String(failure.error)}`,
        );
      }
      console.log(
        `model: ${RUNS} runs in ${seconds.toFixed(1)} s (${((seconds / RUNS) * 1000).toFixed(0)} ms a run, ${CONCURRENCY} at once; ` +
          `${((user + system) / 1e6).toFixed(1)} s of CPU in this process), seed ${SEED}; ` +
          `${totals.invoices} invoices, ${totals.fees} fees, ${totals.creditNotes} credit notes compared\n` +
          `runs per situation: ${[...situations]
            .sort()
            .map(([name, runs]) => `${name} ${runs}`)
            .join('; ')}`,
      );
    },
    Math.max(30 * 60_000, RUNS * 3_000) + SHRINK_MS,
  );

  // Beside the generated runs on a busy machine, a long case takes more than vitest's default minute.
  // The regressions run every step they list: nothing of theirs is left out.
  const noneLeftOut = Object.fromEntries(Object.keys(AVOID).map((k) => [k, false])) as typeof AVOID;
  it.concurrent.each(REGRESSIONS.filter((r) => r.open === undefined || !AVOID[r.open]))(
    '$name',
    async ({ scenario }) => {
      await runScenario({ ...ctx, leaveOut: noneLeftOut }, scenario);
    },
    5 * 60_000,
  );

  it('generates every kind of step (a check of the generators, not of the service)', () => {
    const kinds = new Set(fc.sample(scenarioArb, { seed: SEED, numRuns: 200 }).flatMap((s) => s.steps.map((step) => step.op)));
    expect([...kinds].sort()).toEqual([
      'cancel',
      'change',
      'change_currency',
      'events',
      'terminate',
      'wait_boundary',
      'wait_days',
      'wait_hours',
      'wait_periods',
      'wait_trial_end',
    ]);
  });
});
