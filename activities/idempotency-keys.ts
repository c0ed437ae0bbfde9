import type { Db } from '../src/db';

/** Expired rows removed per round: one bounded read of ids and one delete by them. */
const SWEEP_ROUND = 5_000;

/**
 * The cleanup of `Idempotency-Key` answers (src/api/plugins/idempotency.ts), run by
 * sweepIdempotencyKeysWorkflow on the `sweep-idempotency-keys` schedule: the stand-in has no TTL
 * indexes (mongodb-stand-in.md), so expired rows are removed here. Until then an expired row is
 * treated as absent by the API, so how often this runs changes only the collection's size.
 *
 * In rounds of at most `sweepRound` rows (the oldest first, on the expires_at index): the stand-in
 * reads every document a deleteMany matches into its bounded heap before deleting, so one delete
 * of a busy day's keys could exhaust it. A row whose key was used again meanwhile (a later
 * expires_at) is not deleted.
 */
export function createIdempotencyKeyActivities(deps: { db: Db; now?: () => Date; sweepRound?: number }) {
  const { IdempotencyKey } = deps.db.models;
  const now = deps.now ?? (() => new Date());
  const round = deps.sweepRound ?? SWEEP_ROUND;
  return {
    async deleteExpiredIdempotencyKeys(): Promise<{ deleted: number }> {
      const expired = { expires_at: { $lte: now() } };
      let deleted = 0;
      for (;;) {
        const ids = (await IdempotencyKey.find(expired, { _id: 1 }).sort({ expires_at: 1 }).limit(round).lean()).map((row) => row._id);
        if (ids.length > 0) deleted += (await IdempotencyKey.deleteMany({ _id: { $in: ids }, ...expired })).deletedCount;
        if (ids.length < round) return { deleted };
      }
    },
  };
}
