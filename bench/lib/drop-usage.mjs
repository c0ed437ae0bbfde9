// Deletes a bench organization's events and daily usage, 20,000 at a time: a single
// deleteMany of a million events makes the stand-in read them all into its 1 GiB heap first
// (it ran out of memory so). Each round takes the newest events through the organization's
// (organization_id, created_at, _id) index, as GET /v1/events lists them, and deletes them by id.
export async function dropOrganizationUsage(nativeDb, organizationId, chunk = 20_000) {
  const started = Date.now();
  const events = nativeDb.collection('events');
  let eventsDeleted = 0;
  for (;;) {
    const ids = (
      await events
        .find({ organization_id: organizationId }, { projection: { _id: 1 } })
        .sort({ created_at: -1, _id: -1 })
        .limit(chunk)
        .toArray()
    ).map((d) => d._id);
    if (ids.length === 0) break;
    eventsDeleted += (await events.deleteMany({ _id: { $in: ids } })).deletedCount;
  }
  const daily = nativeDb.collection('daily_usage');
  let dailyDeleted = 0;
  for (;;) {
    const ids = (
      await daily
        .find({ organization_id: organizationId }, { projection: { _id: 1 } })
        .limit(chunk)
        .toArray()
    ).map((d) => d._id);
    if (ids.length === 0) break;
    dailyDeleted += (await daily.deleteMany({ _id: { $in: ids } })).deletedCount;
  }
  return { events_deleted: eventsDeleted, daily_usage_deleted: dailyDeleted, delete_seconds: Math.round((Date.now() - started) / 1000) };
}
