import type { Db } from '../src/db';

/**
 * The cleanup of `Idempotency-Key` answers (src/api/plugins/idempotency.ts), run by
 * sweepIdempotencyKeysWorkflow on the `sweep-idempotency-keys` schedule: the stand-in has no TTL
 * indexes (mongodb-stand-in.md), so expired rows are removed here. Until then an expired row is
 * treated as absent by the API, so how often this runs changes only the collection's size.
 */
export function createIdempotencyKeyActivities(deps: { db: Db; now?: () => Date }) {
  const { IdempotencyKey } = deps.db.models;
  const now = deps.now ?? (() => new Date());
  return {
    async deleteExpiredIdempotencyKeys(): Promise<{ deleted: number }> {
      const result = await IdempotencyKey.deleteMany({ expires_at: { $lte: now() } });
      return { deleted: result.deletedCount };
    },
  };
}
