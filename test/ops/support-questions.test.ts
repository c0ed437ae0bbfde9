// docs/operations.md, "Finding a customer's workflows" and "Support questions": every `$T …` line of
// those sections' code blocks is read from the doc, its example values (cus_8412, sub_8412_pro,
// pro_monthly, ACME-000042, ACME-DRAFT-3f0e2c1a, <customer id>, …) replaced by this file's, and run
// as it is written (bash, with $T the project's temporal CLI and TEMPORAL_ADDRESS the run's dev
// server) against a real stack: the API in process and a worker running the workflows.
//
// The stack: an organization whose invoices wait 3 days as drafts, one customer, a monthly plan;
// two subscriptions of the customer on that plan billing their base fee in advance (each leaves a
// draft), a third whose workflow was terminated; a one-off invoice finalized and left unpaid, with
// a manual checkout pending on it; a one-off invoice paid. The dev server's visibility is
// eventually consistent, so each command is retried until its output holds or a deadline passes.
//
// The doc and this file are held together both ways: each question of the doc has its checks here,
// and the commands checked under a question are exactly those the doc lists under it.
import { execFile, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { CustomerResource } from '../../src/resources/customer';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { PlanResource } from '../../src/resources/plan';
import type { SubscriptionResource } from '../../src/resources/subscription';
import { workflowIds } from '../../src/temporal/workflow-ids';
import { injectAs, ok, sleep, type Method } from '../support/http';
import { paths } from '../support/servers';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

const run = promisify(execFile);
const DAY = 86_400_000;
const GRACE_DAYS = 3;
const ISSUED_CENTS = 150_000;

// ---------------------------------------------------------------------------------------------
// The doc's commands, by question.

const DOC_PATH = join(__dirname, '..', '..', 'docs', 'operations.md');
const FINDING = "Finding a customer's workflows";
const SUPPORT = 'Support questions';

/** The `$T …` lines of a text's fenced code blocks. */
function commandsIn(text: string): string[] {
  const commands: string[] = [];
  for (const block of text.matchAll(/^```[a-z]*\n([\s\S]*?)^```$/gm)) {
    for (const line of block[1]!.split('\n')) if (line.startsWith('$T ')) commands.push(line);
  }
  return commands;
}

/** The text of `## title` up to the next `## ` heading. */
function section(doc: string, title: string): string {
  const start = doc.indexOf(`\n## ${title}\n`);
  if (start < 0) throw new Error(`docs/operations.md has no section "## ${title}"`);
  const end = doc.indexOf('\n## ', start + 1);
  return doc.slice(start, end < 0 ? undefined : end);
}

/** The commands of "Finding a customer's workflows", and those of each `###` question of "Support questions". */
function docCommands(): Map<string, string[]> {
  const doc = readFileSync(DOC_PATH, 'utf8');
  const byHeading = new Map<string, string[]>([[FINDING, commandsIn(section(doc, FINDING))]]);
  const support = section(doc, SUPPORT);
  const parts = support.split(/^### /m);
  expect(commandsIn(parts[0]!), 'commands of "Support questions" before its first question').toEqual([]);
  for (const part of parts.slice(1)) {
    const newline = part.indexOf('\n');
    byHeading.set(part.slice(0, newline).trim(), commandsIn(part.slice(newline)));
  }
  return byHeading;
}

// ---------------------------------------------------------------------------------------------
// The stack and what it holds.

let stack: TestStack;
let worker: StackWorker;

interface Fixture {
  org: TestOrganization;
  customer: CustomerResource;
  plan: PlanResource;
  /** The subscription the questions are about, and its twin on the same plan. */
  sub: SubscriptionResource;
  twin: SubscriptionResource;
  /** A subscription whose workflow was terminated. */
  ended: SubscriptionResource;
  /** The drafts the two subscriptions' advance fees left. */
  draft: InvoiceResource;
  twinDraft: InvoiceResource;
  /** A finalized one-off invoice, unpaid, with a pending manual payment; its number while it was a draft. */
  issued: InvoiceResource;
  issuedDraftNumber: string;
  /** The manual checkout of the issued invoice, pending. */
  payment: { id: string; expiresAt: string };
  /** A one-off invoice paid. */
  paid: InvoiceResource;
}

let f: Fixture;

async function buildFixture(): Promise<Fixture> {
  const tag = randomUUID().replaceAll('-', '').slice(0, 8);
  const org = await createOrganization(stack.app, {
    name: `Support ${tag}`,
    timezone: 'UTC',
    default_currency: 'USD',
    invoice_grace_period: GRACE_DAYS,
    document_number_prefix: `S${tag.slice(0, 6).toUpperCase()}`,
  });
  const call = (method: Method, url: string, body?: unknown) => injectAs(stack.app, org, method, url, body);
  ok(
    await call('POST', '/v1/integrations', {
      integration_type: 'payment_provider',
      provider_type: 'manual',
      settings: { webhook_secret: `secret-${tag}` },
    }),
    201,
  );
  const metric = ok<{ id: string }>(
    await call('POST', '/v1/billable_metrics', { code: `calls_${tag}`, name: 'API calls', aggregation_type: 'count' }),
    201,
  );
  const customer = ok<CustomerResource>(await call('POST', '/v1/customers', { external_id: `cus_${tag}`, currency: 'USD' }), 201);
  const plan = ok<PlanResource>(
    await call('POST', '/v1/plans', {
      code: `pro_${tag}`,
      name: 'Pro',
      interval: 'monthly',
      amount_cents: 3000,
      currency: 'USD',
      charges: [{ billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: '5' } }],
    }),
    201,
  );
  const subscribe = async (externalId: string, payInAdvance: boolean) => {
    worker.assertAlive();
    return ok<SubscriptionResource>(
      await call('POST', '/v1/subscriptions', {
        external_id: externalId,
        customer_id: customer.external_id,
        plan_id: plan.id,
        pay_in_advance: payInAdvance,
      }),
      201,
    );
  };
  const advanceDraft = async (subscription: SubscriptionResource) => {
    const invoices = ok<InvoiceResource[]>(await call('GET', `/v1/invoices?subscription_id=${subscription.id}`));
    expect(invoices.map((i) => i.status)).toEqual(['draft']);
    return invoices[0]!;
  };
  const oneOff = async (cents: number) =>
    ok<InvoiceResource>(
      await call('POST', '/v1/invoices/one_off', {
        customer_id: customer.id,
        line_items: [{ description: 'Setup', unit_price: String(cents) }],
      }),
      201,
    );

  const sub = await subscribe(`sub_${tag}_pro`, true);
  const twin = await subscribe(`sub_${tag}_twin`, true);
  const ended = await subscribe(`sub_${tag}_ended`, false);
  await stack.temporal.client.workflow.getHandle(workflowIds.subscription(ended.id)).terminate('support-questions test');

  const issuedDraft = await oneOff(ISSUED_CENTS);
  expect(issuedDraft.status).toBe('draft');
  const issued = ok<InvoiceResource>(await call('POST', `/v1/invoices/${issuedDraft.id}/finalize`));
  expect(issued.status).toBe('finalized');
  const checkout = ok<{ payment_id: string; expires_at: string }>(
    await call('POST', '/v1/payments/checkout', {
      invoice_id: issued.id,
      provider: 'manual',
      success_url: 'https://shop.example/paid',
      cancel_url: 'https://shop.example/canceled',
    }),
  );
  const toPay = await oneOff(700);
  ok(await call('POST', `/v1/invoices/${toPay.id}/finalize`));
  const paid = ok<InvoiceResource>(await call('POST', `/v1/invoices/${toPay.id}/pay`));
  expect(paid.status).toBe('paid');

  return {
    org,
    customer,
    plan,
    sub,
    twin,
    ended,
    draft: await advanceDraft(sub),
    twinDraft: await advanceDraft(twin),
    issued,
    issuedDraftNumber: issuedDraft.number,
    payment: { id: checkout.payment_id, expiresAt: checkout.expires_at },
    paid,
  };
}

beforeAll(async () => {
  stack = await createTestStack();
  worker = await startStackWorker(stack);
  f = await buildFixture();
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
});

// ---------------------------------------------------------------------------------------------
// Running a doc command.

/** Which of the fixture's invoices `<invoice id>` stands for in a check (default: the issued one). */
type InvoiceRole = 'draft' | 'issued';

/** The doc's example values and placeholders, and what stands for them here. */
function examples(invoice: InvoiceRole): [string, string][] {
  return [
    ['cus_8412', f.customer.external_id],
    ['sub_8412_pro', f.sub.external_id],
    ['pro_monthly', f.plan.code],
    ['ACME-DRAFT-3f0e2c1a', f.draft.number],
    ['ACME-000042', f.issued.number],
    ['<customer id>', f.customer.id],
    ['<organization id>', f.org.id],
    ['<subscription id>', f.sub.id],
    ['<invoice id>', invoice === 'draft' ? f.draft.id : f.issued.id],
    ['<payment id>', f.payment.id],
  ];
}

function instantiate(command: string, invoice: InvoiceRole): string {
  let line = command;
  for (const [example, value] of examples(invoice)) line = line.replaceAll(example, value);
  expect(line, `a placeholder of "${command}" has no value`).not.toMatch(/<[a-z ]+>/);
  return line;
}

async function shell(line: string): Promise<string> {
  const { stdout } = await run('bash', ['-o', 'pipefail', '-c', line], {
    env: { ...process.env, T: paths.temporalCli, TEMPORAL_ADDRESS: inject('temporalAddress'), TEMPORAL_NAMESPACE: 'default' },
    timeout: 30_000,
  });
  return stdout;
}

interface Check {
  /** Exactly as in the doc. */
  command: string;
  invoice?: InvoiceRole;
  /** Throws (expect) while the output does not hold yet. */
  holds: (stdout: string) => void;
}

/** Runs the command until its output holds (visibility lags the workflows a little), 30 s at most. */
async function runCheck(check: Check): Promise<void> {
  const line = instantiate(check.command, check.invoice ?? 'issued');
  const deadline = Date.now() + 30_000;
  for (;;) {
    worker.assertAlive();
    let stdout = '';
    try {
      stdout = await shell(line);
      check.holds(stdout);
      return;
    } catch (err) {
      if (Date.now() > deadline) {
        throw new Error(`${line}\n--- printed:\n${stdout}\n--- ${err instanceof Error ? err.message : String(err)}`, { cause: err });
      }
    }
    await sleep(250);
  }
}

const usesJq = (check: Check) => / \| jq /.test(check.command);
const hasJq = spawnSync('jq', ['--version']).status === 0;

// ---------------------------------------------------------------------------------------------
// Reading the CLI's output.

const wf = {
  sub: () => workflowIds.subscription(f.sub.id),
  twin: () => workflowIds.subscription(f.twin.id),
  ended: () => workflowIds.subscription(f.ended.id),
  draft: () => workflowIds.invoice(f.draft.id),
  twinDraft: () => workflowIds.invoice(f.twinDraft.id),
  issued: () => workflowIds.invoice(f.issued.id),
  paid: () => workflowIds.invoice(f.paid.id),
  payment: () => workflowIds.payment(f.payment.id),
};
type Known = keyof typeof wf;

/** `workflow list` (text) names exactly `these` of the fixture's workflows. */
function lists(...these: Known[]): (stdout: string) => void {
  return (stdout) => {
    const listed = (Object.keys(wf) as Known[]).filter((k) => stdout.includes(wf[k]()));
    expect(listed.sort()).toEqual([...these].sort());
  };
}

/** `workflow count` (text). */
function counts(n: number): (stdout: string) => void {
  return (stdout) => expect(/Total: (\d+)/.exec(stdout)?.[1]).toBe(String(n));
}

/** `workflow query` (text): the JSON after `QueryResult`. */
function queryResult(stdout: string): Record<string, unknown> {
  const json = /QueryResult\s+(\{.*\})/.exec(stdout)?.[1];
  expect(json, 'a QueryResult').toBeDefined();
  return JSON.parse(json!) as Record<string, unknown>;
}

/** `2026-12-01 00:00 UTC`: how the details print an instant of a UTC customer. */
function utcMinute(instant: string | number): string {
  const iso = new Date(instant).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

const cents = (invoice: InvoiceResource) => Math.round(Number(invoice.total));
const subscriptionSummary = () => `Subscription ${f.sub.external_id} of customer ${f.customer.external_id}`;
const paymentLabel = () => `Payment of ${ISSUED_CENTS} cents USD for invoice ${f.issued.number} through manual`;
const nextBilling = () => `Next: waiting for the period end ${utcMinute(f.sub.current_period_ending_at!)} to invoice`;

/** The TSV lines of the doc's "steps of a workflow" jq: time, event type, activity, summary. */
function steps(stdout: string): string[][] {
  return stdout
    .trim()
    .split('\n')
    .map((l) => l.split('\t'));
}

// ---------------------------------------------------------------------------------------------
// The checks, by heading of the doc.

const STEPS_JQ = `$T workflow show --workflow-id subscription/<subscription id> -o json | jq -r '.events[] | select(.userMetadata.summary or .activityTaskScheduledEventAttributes) | [.eventTime, .eventType, .activityTaskScheduledEventAttributes.activityType.name, (if .userMetadata.summary then .userMetadata.summary.data | @base64d | fromjson else "" end)] | @tsv'`;
const stepsHold = (stdout: string) => {
  const rows = steps(stdout);
  expect(rows.find((r) => r[1] === 'EVENT_TYPE_WORKFLOW_EXECUTION_STARTED')?.[3]).toBe(subscriptionSummary());
  expect(rows.find((r) => r[1] === 'EVENT_TYPE_MARKER_RECORDED')?.[3]).toMatch(/^activate at \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$/);
  // The pending timer: the boundary step it will run, with the period it invoices.
  expect(rows.at(-1)?.[1]).toBe('EVENT_TYPE_TIMER_STARTED');
  expect(rows.at(-1)?.[3]).toBe(
    `invoice ${f.sub.current_period_started_at!.slice(0, 10)} – ${utcMinute(Date.parse(f.sub.current_period_ending_at!) - 1).slice(0, 10)}`,
  );
};

const checks: Record<string, Check[]> = {
  [FINDING]: [
    {
      command: `$T workflow list --query "BillingCustomerExternalId = 'cus_8412'"`,
      holds: lists('sub', 'twin', 'ended', 'draft', 'twinDraft', 'issued', 'paid', 'payment'),
    },
    { command: `$T workflow list --query "BillingSubscriptionExternalId = 'sub_8412_pro'"`, holds: lists('sub') },
    // The invoice and its payment.
    { command: `$T workflow list --query "BillingInvoiceNumber = 'ACME-000042'"`, holds: lists('issued', 'payment') },
    {
      command: `$T workflow list --query "BillingCustomerId = '<customer id>'"`,
      holds: lists('sub', 'twin', 'ended', 'draft', 'twinDraft', 'issued', 'paid', 'payment'),
    },
    {
      command: `$T workflow count --query "BillingOrganizationId = '<organization id>' AND BillingEntityType = 'invoice' AND BillingStatus = 'draft'"`,
      holds: counts(2),
    },
    {
      command: `$T workflow list --query "BillingOrganizationId = '<organization id>' AND BillingEntityType = 'subscription' AND ExecutionStatus IN ('Failed', 'Terminated', 'TimedOut')"`,
      holds: lists('ended'),
    },
    {
      command: '$T workflow describe --workflow-id subscription/<subscription id>',
      holds: (stdout) => {
        expect(stdout).toContain(`StaticSummary  "${subscriptionSummary()}"`);
        expect(stdout).toContain(`StaticDetails  "Plan ${f.plan.code} (monthly, USD), billed calendar, base fee in advance.`);
        expect(stdout).toContain(`Ids: subscription ${f.sub.id}, customer ${f.customer.id}, organization ${f.org.id}.`);
        expect(stdout).toMatch(/Pending Activities: 0/);
      },
    },
    {
      command: '$T workflow metadata --workflow-id subscription/<subscription id>',
      holds: (stdout) => {
        expect(stdout).toContain('Current Details:');
        expect(stdout).toContain(`Subscription active on plan ${f.plan.code} (monthly, USD)`);
        expect(stdout).toContain(nextBilling());
      },
    },
    {
      command: '$T workflow query --workflow-id subscription/<subscription id> --type state',
      holds: (stdout) => {
        const state = queryResult(stdout);
        expect(state.status).toBe('active');
        expect(state.currentPeriod).toEqual({ from: f.sub.current_period_started_at, to: f.sub.current_period_ending_at });
      },
    },
    {
      command: '$T workflow show --workflow-id subscription/<subscription id>',
      holds: (stdout) => {
        expect(stdout).toContain('WorkflowExecutionStarted');
        expect(stdout).toContain('TimerStarted');
      },
    },
    {
      command: `$T workflow describe --workflow-id subscription/<subscription id> -o json | jq '.workflowExecutionInfo.searchAttributes.indexedFields | map_values(.data | @base64d | fromjson)'`,
      holds: (stdout) => {
        expect(JSON.parse(stdout)).toMatchObject({
          BillingOrganizationId: f.org.id,
          BillingCustomerId: f.customer.id,
          BillingCustomerExternalId: f.customer.external_id,
          BillingSubscriptionExternalId: f.sub.external_id,
          BillingPlanCode: f.plan.code,
          BillingEntityType: 'subscription',
          BillingStatus: 'active',
        });
      },
    },
    { command: STEPS_JQ, holds: stepsHold },
  ],

  'Why was this customer charged twice?': [
    {
      command: `$T workflow list --query "BillingCustomerExternalId = 'cus_8412' AND BillingEntityType = 'subscription'"`,
      holds: lists('sub', 'twin', 'ended'),
    },
    {
      command: `$T workflow list --query "BillingCustomerExternalId = 'cus_8412' AND BillingEntityType = 'invoice'" -o json | jq -r '.[] | (.searchAttributes.indexedFields | map_values(.data | @base64d | fromjson)) as $a | [.startTime, .execution.workflowId, $a.BillingInvoiceNumber, $a.BillingStatus, $a.BillingAmountDueCents] | @tsv'`,
      holds: (stdout) => {
        const rows = stdout
          .trim()
          .split('\n')
          .map((l) => l.split('\t'))
          .map(([startTime, workflowId, ...rest]) => {
            expect(Date.parse(startTime!)).not.toBeNaN();
            return [workflowId, ...rest];
          })
          .sort((a, b) => a[0]!.localeCompare(b[0]!));
        const row = (invoice: InvoiceResource, status: string, due: number) => [
          workflowIds.invoice(invoice.id),
          invoice.number,
          status,
          String(due),
        ];
        expect(rows).toEqual(
          [
            row(f.draft, 'draft', cents(f.draft)),
            row(f.twinDraft, 'draft', cents(f.twinDraft)),
            row(f.issued, 'finalized', ISSUED_CENTS),
            row(f.paid, 'paid', 0),
          ].sort((a, b) => a[0]!.localeCompare(b[0]!)),
        );
      },
    },
    {
      command: '$T workflow describe --workflow-id invoice/<invoice id>',
      holds: (stdout) => {
        // Started as a draft: its summary keeps the draft's number (the search attribute has the final one).
        expect(stdout).toContain(`StaticSummary  "Invoice ${f.issuedDraftNumber} of customer ${f.customer.external_id}"`);
        expect(stdout).toContain(
          `StaticDetails  "Total ${ISSUED_CENTS} cents USD, created ${f.issued.created_at}, grace period ${GRACE_DAYS} day(s).`,
        );
        expect(stdout).toContain(`Ids: invoice ${f.issued.id}, customer ${f.customer.id}, organization ${f.org.id}.`);
      },
    },
    { command: STEPS_JQ, holds: stepsHold },
    {
      command: `$T workflow list --query "BillingInvoiceNumber = 'ACME-000042' AND BillingEntityType = 'payment'"`,
      holds: lists('payment'),
    },
  ],

  'Why is this invoice still a draft?': [
    { command: `$T workflow list --query "BillingInvoiceNumber = 'ACME-DRAFT-3f0e2c1a'"`, invoice: 'draft', holds: lists('draft') },
    {
      command: `$T workflow list --query "BillingCustomerExternalId = 'cus_8412' AND BillingEntityType = 'invoice' AND BillingStatus = 'draft'"`,
      holds: lists('draft', 'twinDraft'),
    },
    {
      command: '$T workflow metadata --workflow-id invoice/<invoice id>',
      invoice: 'draft',
      holds: (stdout) => {
        expect(stdout).toContain(`Invoice ${f.draft.number} draft, total ${cents(f.draft)} cents USD.`);
        const graceEnd = utcMinute(Date.parse(f.draft.created_at) + GRACE_DAYS * DAY);
        expect(stdout).toContain(
          `Next: waiting for the grace period end ${graceEnd} to finalize it (or a finalize, delete or refresh request)`,
        );
      },
    },
    {
      command: '$T workflow describe --workflow-id invoice/<invoice id>',
      invoice: 'draft',
      holds: (stdout) => {
        expect(stdout).toContain(`StaticSummary  "Invoice ${f.draft.number} of customer ${f.customer.external_id}"`);
        expect(stdout).toContain(`grace period ${GRACE_DAYS} day(s).`);
        expect(stdout).toMatch(/Pending Activities: 0/);
      },
    },
  ],

  'When will this subscription bill next?': [
    { command: `$T workflow list --query "BillingSubscriptionExternalId = 'sub_8412_pro'"`, holds: lists('sub') },
    {
      command: '$T workflow metadata --workflow-id subscription/<subscription id>',
      holds: (stdout) => {
        expect(stdout).toContain(nextBilling());
        // The wake-up: the period end plus the subscription's billing-day offset, as an instant.
        const runsAt = /\(runs at (\S+), its billing-day offset\)/.exec(stdout)?.[1];
        if (runsAt !== undefined) {
          const offset = Date.parse(runsAt) - Date.parse(f.sub.current_period_ending_at!);
          expect(offset).toBeGreaterThan(0);
          expect(offset).toBeLessThan(120_000);
        }
      },
    },
    {
      command: '$T workflow query --workflow-id subscription/<subscription id> --type state',
      holds: (stdout) => {
        const state = queryResult(stdout) as { currentPeriod: { to: string }; jitterMs: number };
        expect(state.currentPeriod.to).toBe(f.sub.current_period_ending_at);
        expect(state.jitterMs).toBeGreaterThanOrEqual(0);
      },
    },
  ],

  'Which invoices of this customer are unpaid, and how much?': [
    {
      command: `$T workflow list --query "BillingCustomerExternalId = 'cus_8412' AND BillingEntityType = 'invoice' AND BillingStatus = 'finalized' AND BillingAmountDueCents > 0"`,
      holds: lists('issued'),
    },
    {
      command: `$T workflow list --query "BillingCustomerExternalId = 'cus_8412' AND BillingEntityType = 'invoice' AND BillingStatus = 'finalized' AND BillingAmountDueCents > 0" -o json | jq '[.[].searchAttributes.indexedFields.BillingAmountDueCents.data | @base64d | tonumber] | add // 0'`,
      holds: (stdout) => expect(stdout.trim()).toBe(String(ISSUED_CENTS)),
    },
    {
      command: `$T workflow count --query "BillingCustomerExternalId = 'cus_8412' AND BillingEntityType = 'invoice' AND BillingAmountDueCents > 0"`,
      holds: (stdout) => counts(1 + [f.draft, f.twinDraft].filter((d) => cents(d) > 0).length)(stdout),
    },
    {
      command: '$T workflow query --workflow-id invoice/<invoice id> --type state',
      holds: (stdout) => {
        const state = queryResult(stdout);
        expect(state.status).toBe('finalized');
        expect(typeof state.paymentOverdue).toBe('boolean');
      },
    },
    {
      command: `$T workflow list --query "BillingOrganizationId = '<organization id>' AND BillingEntityType = 'invoice' AND BillingStatus = 'finalized' AND BillingAmountDueCents >= 100000"`,
      holds: lists('issued'),
    },
  ],

  'Is this payment still waiting for the provider?': [
    {
      command: `$T workflow list --query "BillingCustomerExternalId = 'cus_8412' AND BillingEntityType = 'payment' AND ExecutionStatus = 'Running'"`,
      holds: lists('payment'),
    },
    {
      command: '$T workflow metadata --workflow-id payment/<payment id>',
      holds: (stdout) => {
        expect(stdout).toContain(`${paymentLabel()} pending (checkout open).`);
        expect(stdout).toContain(
          `Next: waiting for manual's notification, or the checkout expiry ${utcMinute(f.payment.expiresAt)} to cancel the payment`,
        );
      },
    },
    {
      command: '$T workflow describe --workflow-id payment/<payment id>',
      holds: (stdout) => {
        expect(stdout).toContain(`StaticSummary  "${paymentLabel()} (customer ${f.customer.external_id})"`);
        expect(stdout).toContain(`Ids: payment ${f.payment.id}, invoice ${f.issued.id}, customer ${f.customer.id}`);
        expect(stdout).toMatch(/Pending Activities: 0/);
      },
    },
  ],

  'Which subscriptions are on this plan?': [
    {
      command: `$T workflow list --query "BillingOrganizationId = '<organization id>' AND BillingPlanCode = 'pro_monthly' AND ExecutionStatus = 'Running'"`,
      holds: lists('sub', 'twin'),
    },
    {
      command: `$T workflow count --query "BillingOrganizationId = '<organization id>' AND BillingPlanCode = 'pro_monthly' AND ExecutionStatus = 'Running'"`,
      holds: counts(2),
    },
  ],
};

// ---------------------------------------------------------------------------------------------

it('the doc lists, under each heading, exactly the commands checked here', () => {
  const doc = docCommands();
  expect([...doc.keys()].sort()).toEqual(Object.keys(checks).sort());
  for (const [heading, commands] of doc) {
    expect([...new Set(commands)].sort(), heading).toEqual([...new Set(checks[heading]!.map((c) => c.command))].sort());
  }
});

for (const [heading, list] of Object.entries(checks)) {
  describe(heading, () => {
    it('answers with the temporal CLI', async () => {
      for (const check of list.filter((c) => !usesJq(c))) await runCheck(check);
    }, 120_000);

    if (list.some(usesJq)) {
      it.skipIf(!hasJq)(
        'answers with the temporal CLI and jq',
        async () => {
          for (const check of list.filter(usesJq)) await runCheck(check);
        },
        120_000,
      );
    }
  });
}
