// Group commit of single events (src/usage/group-commit.ts; issue 17): single events arriving
// together for one organization are stored by one Ingestor.ingest (one insertMany), at most 100 per
// group, each caller getting its own outcome after the write; and through POST /v1/events, many
// concurrent single events are each stored once and answered as alone (201, then 409 for a
// duplicate), against the run's MongoDB.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventResource } from '../../src/resources/event';
import { CatalogView } from '../../src/usage/catalog-view';
import { EventGroups } from '../../src/usage/group-commit';
import { type EventInput, Ingestor } from '../../src/usage/ingest';
import { ok } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

let stack: TestStack;
let org: TestOrganization;
let customerExternalId: string;
const code = `calls-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  stack = await createTestStack();
  org = await createOrganization(stack.app, { events_rate_limit_per_minute: 1_000_000 });
  customerExternalId = `cus-${randomUUID()}`;
  const call = (url: string, payload: object) => stack.app.inject({ method: 'POST', url, headers: org.headers, payload });
  ok(await call('/v1/customers', { external_id: customerExternalId }), 201);
  ok(await call('/v1/billable_metrics', { code, name: 'Calls', aggregation_type: 'count' }), 201);
}, 120_000);

afterAll(async () => {
  await stack?.close();
});

/** The real ingestor, counting its writes (one per ingest call). */
class CountingIngestor extends Ingestor {
  calls: number[] = [];
  override async ingest(...args: Parameters<Ingestor['ingest']>) {
    this.calls.push(args[1].length);
    return super.ingest(...args);
  }
}

const event = (transactionId = `tx-${randomUUID()}`): EventInput => ({
  transaction_id: transactionId,
  external_customer_id: customerExternalId,
  code,
  properties: {},
});

describe('EventGroups', () => {
  const organization = () => ({ _id: org.id, timezone: 'UTC' });

  it('stores concurrent single events with one write per 100, each answered with its own outcome', async () => {
    const ingestor = new CountingIngestor(stack.db, new CatalogView(stack.db));
    const groups = new EventGroups(ingestor);
    const inputs = Array.from({ length: 250 }, () => event());
    const outcomes = await Promise.all(inputs.map((input) => groups.ingestOne(organization(), input, new Date())));
    expect(ingestor.calls).toEqual([100, 100, 50]);
    expect(outcomes.map((o) => (o.status === 'created' ? o.event.transaction_id : o.status))).toEqual(inputs.map((i) => i.transaction_id));
    const stored = await stack.db.models.Event.countDocuments({
      organization_id: org.id,
      transaction_id: { $in: inputs.map((i) => i.transaction_id) },
    });
    expect(stored).toBe(250);
    expect(groups.openGroups).toBe(0);
  });

  it('a duplicate in the same group is a duplicate of the first; a lone event is written within the wait', async () => {
    const ingestor = new CountingIngestor(stack.db, new CatalogView(stack.db));
    const groups = new EventGroups(ingestor, { maxWaitMs: 2, maxEvents: 100 });
    const tx = `tx-${randomUUID()}`;
    const [first, second] = await Promise.all([
      groups.ingestOne(organization(), event(tx), new Date()),
      groups.ingestOne(organization(), event(tx), new Date()),
    ]);
    expect(ingestor.calls).toEqual([2]);
    expect(first!.status).toBe('created');
    expect(second).toEqual({ status: 'duplicate', existingEventId: first!.status === 'created' ? first!.event._id : null });

    const alone = await groups.ingestOne(organization(), event(), new Date());
    expect(alone.status).toBe('created');
    expect(ingestor.calls).toEqual([2, 1]);
  });

  it('keeps organizations apart: one group each', async () => {
    const other = await createOrganization(stack.app, { events_rate_limit_per_minute: 1_000_000 });
    const ingestor = new CountingIngestor(stack.db, new CatalogView(stack.db));
    const groups = new EventGroups(ingestor);
    const outcomes = await Promise.all([
      groups.ingestOne(organization(), event(), new Date()),
      groups.ingestOne({ _id: other.id, timezone: 'UTC' }, event(), new Date()),
      groups.ingestOne(organization(), event(), new Date()),
    ]);
    expect(ingestor.calls.sort()).toEqual([1, 2]);
    // The other organization has no such customer: its event alone is refused.
    expect(outcomes.map((o) => o.status)).toEqual(['created', 'invalid', 'created']);
  });
});

describe('POST /v1/events, many at once', () => {
  it('stores each event once and answers each as alone: 201, and 409 for a repeated transaction_id', async () => {
    const inputs = Array.from({ length: 120 }, () => event());
    const post = (input: EventInput) =>
      stack.app.inject({ method: 'POST', url: '/v1/events', headers: org.headers, payload: input as unknown as Record<string, unknown> });
    const answers = await Promise.all([...inputs, inputs[0]!].map(post));
    const statuses = answers.map((a) => a.statusCode);
    expect(statuses.filter((s) => s === 201)).toHaveLength(120);
    expect(statuses.filter((s) => s === 409)).toHaveLength(1);
    const created = answers.filter((a) => a.statusCode === 201).map((a) => a.json<EventResource>().transaction_id);
    expect(created.sort()).toEqual(inputs.map((i) => i.transaction_id).sort());
    expect(
      await stack.db.models.Event.countDocuments({ organization_id: org.id, transaction_id: { $in: inputs.map((i) => i.transaction_id) } }),
    ).toBe(120);
  });
});
