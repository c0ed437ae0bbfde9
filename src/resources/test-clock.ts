// The test clock resource as the API returns it.
import { z } from 'zod';
import type { TestClockDoc } from '../db/models/test-clock';
import { iso, nullableTimestamp, timestamp } from './format';

export const testClockResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    name: z.string().nullable(),
    frozen_time: timestamp,
    status: z
      .enum(['ready', 'advancing'])
      .describe('advancing: an advance is under way; ready: every workflow of the clock caught up with frozen_time'),
    created_at: timestamp,
    updated_at: timestamp,
    deleted_at: nullableTimestamp,
  })
  .meta({ id: 'TestClock' });

export type TestClockResource = z.output<typeof testClockResource>;

export function toTestClockResource(doc: TestClockDoc): TestClockResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    name: doc.name ?? null,
    frozen_time: iso(doc.frozen_time),
    status: doc.status,
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
    deleted_at: iso(doc.deleted_at),
  };
}
