import type { EventInput, IngestOutcome, Ingestor } from './ingest';

/**
 * Group commit of single events (issue 17): POST /v1/events calls arriving together for one
 * organization are stored by ONE Ingestor.ingest (one insertMany, one set of catalog reads, one
 * roll-up), the group closing `maxWaitMs` after its first event or at `maxEvents`. Each caller still
 * gets its own outcome, after the group's write: an event is durable before its answer, as before.
 * A group's failure fails each of its callers (each answers as it would have alone).
 *
 * The events of a group share the instant of its first: the default timestamp and created_at of
 * an event without one are at most maxWaitMs earlier than if it had been written alone.
 */
export class EventGroups {
  private readonly open = new Map<string, Group>();

  constructor(
    private readonly ingestor: Pick<Ingestor, 'ingest'>,
    private readonly options: { maxWaitMs: number; maxEvents: number } = { maxWaitMs: 2, maxEvents: 100 },
  ) {}

  /** Ingests one event with its neighbours; resolves to its own outcome once the group is stored. */
  ingestOne(organization: { _id: string; timezone: string }, input: EventInput, now: Date): Promise<IngestOutcome> {
    let group = this.open.get(organization._id);
    if (!group) {
      const created: Group = { organization, now, inputs: [], waiters: [], timer: null };
      created.timer = setTimeout(() => this.close(organization._id, created), this.options.maxWaitMs);
      this.open.set(organization._id, created);
      group = created;
    }
    const outcome = new Promise<IngestOutcome>((resolve, reject) => group.waiters.push({ resolve, reject }));
    group.inputs.push(input);
    if (group.inputs.length >= this.options.maxEvents) this.close(organization._id, group);
    return outcome;
  }

  /** How many groups are collecting events now (0 when idle). */
  get openGroups(): number {
    return this.open.size;
  }

  private close(organizationId: string, group: Group): void {
    if (this.open.get(organizationId) === group) this.open.delete(organizationId);
    if (group.timer) clearTimeout(group.timer);
    group.timer = null;
    if (group.waiters.length === 0) return;
    const waiters = group.waiters.splice(0);
    this.ingestor.ingest(group.organization, group.inputs, group.now).then(
      (outcomes) => waiters.forEach((w, i) => w.resolve(outcomes[i]!)),
      (err: unknown) => waiters.forEach((w) => w.reject(err)),
    );
  }
}

interface Group {
  organization: { _id: string; timezone: string };
  now: Date;
  inputs: EventInput[];
  waiters: { resolve: (outcome: IngestOutcome) => void; reject: (err: unknown) => void }[];
  timer: NodeJS.Timeout | null;
}
