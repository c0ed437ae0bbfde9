// Reading the lifecycle events (webhook outbox) of one object in tests. Many are written by an
// activity right after the state a test waits for (a request's status, then its event), so a
// test polls for the events it expects instead of reading them once.
import type { Db } from '../../src/db';
import { eventually } from './http';

/** The types of the lifecycle events recorded for one object (its `id`), sorted. */
export async function eventTypesOf(db: Db, organizationId: string, objectId: string): Promise<string[]> {
  const events = await db.models.LifecycleEvent.find({ organization_id: organizationId }).lean();
  return events
    .filter((e) => (e.object as { id?: unknown }).id === objectId)
    .map((e) => e.type as string)
    .sort();
}

/** Waits until the object's events include every type of `expected`; then all its types, sorted. */
export function waitForEventTypes(
  db: Db,
  organizationId: string,
  objectId: string,
  expected: string[],
  timeoutMs = 20_000,
): Promise<string[]> {
  return eventually(
    async () => {
      const types = await eventTypesOf(db, organizationId, objectId);
      return expected.every((type) => types.includes(type)) ? types : undefined;
    },
    timeoutMs,
    `events ${expected.join(', ')} of ${objectId}`,
  );
}
