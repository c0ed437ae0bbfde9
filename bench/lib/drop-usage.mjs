// Deletes a bench organization's events and daily usage, 20,000 at a time: a single
// deleteMany of a million events makes the stand-in read them all into its 1 GiB heap first
// (it ran out of memory so). Each round of events takes the newest through the organization's
// (organization_id, created_at, _id) index, as GET /v1/events lists them, and deletes them by id.
export async function dropOrganizationUsage(nativeDb, organizationId, chunk = 20_000) {
  const started = Date.now();
  const filter = { organization_id: organizationId };
  const eventsDeleted = await deleteInRounds(nativeDb.collection('events'), filter, { created_at: -1, _id: -1 }, chunk);
  const dailyDeleted = await deleteInRounds(nativeDb.collection('daily_usage'), filter, null, chunk);
  return { events_deleted: eventsDeleted, daily_usage_deleted: dailyDeleted, delete_seconds: Math.round((Date.now() - started) / 1000) };
}

async function deleteInRounds(collection, filter, sort, chunk) {
  let deleted = 0;
  for (;;) {
    const cursor = collection.find(filter, { projection: { _id: 1 } });
    const ids = (await (sort ? cursor.sort(sort) : cursor).limit(chunk).toArray()).map((d) => d._id);
    if (ids.length === 0) return deleted;
    deleted += (await collection.deleteMany({ _id: { $in: ids } })).deletedCount;
  }
}
