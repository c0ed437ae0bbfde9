// Deletes a bench organization's events and daily usage. Not with one deleteMany: the stand-in
// reads every matched document into its 1 GiB heap first, and a million ran it out of memory.
// Events go by windows of their created_at from `since` (the bench's start: every event it made
// was stored after it) to now, a range on the second key of the (organization_id, created_at,
// _id) index, a few thousand per window; what is left (and daily usage) goes 20,000 at a time.
const WINDOW_MS = 2_000;

export async function dropOrganizationUsage(nativeDb, organizationId, since) {
  const started = Date.now();
  const filter = { organization_id: organizationId };
  const events = nativeDb.collection('events');
  let eventsDeleted = 0;
  for (let from = since.getTime(); from <= Date.now(); from += WINDOW_MS) {
    const window = { $gte: new Date(from), $lt: new Date(from + WINDOW_MS) };
    eventsDeleted += (await events.deleteMany({ ...filter, created_at: window })).deletedCount;
  }
  eventsDeleted += await deleteInRounds(events, filter);
  const dailyDeleted = await deleteInRounds(nativeDb.collection('daily_usage'), filter);
  return { events_deleted: eventsDeleted, daily_usage_deleted: dailyDeleted, delete_seconds: Math.round((Date.now() - started) / 1000) };
}

async function deleteInRounds(collection, filter, chunk = 20_000) {
  let deleted = 0;
  for (;;) {
    const ids = (
      await collection
        .find(filter, { projection: { _id: 1 } })
        .limit(chunk)
        .toArray()
    ).map((d) => d._id);
    if (ids.length === 0) return deleted;
    deleted += (await collection.deleteMany({ _id: { $in: ids } })).deletedCount;
  }
}
