// "Now" for a customer: its test clock's frozen time when it is on one, else real time. Everything
// that defaults or validates against the present for a customer (event timestamps, started_at,
// current usage, API-driven transitions) asks here.
import type { Db } from '../db';

export interface ClockRef {
  id: string;
  /** The clock's frozen time, ISO. */
  now: string;
}

/**
 * The customer's test clock (live, not deleted) at its present, or null for a real customer. While
 * an advance runs, the present is the instant its workflows have been brought to.
 */
export async function clockOfCustomer(db: Db, customer: { test_clock_id?: string | null }): Promise<ClockRef | null> {
  if (!customer.test_clock_id) return null;
  const clock = await db.models.TestClock.findOne(
    { _id: customer.test_clock_id, deleted_at: null },
    { frozen_time: 1, workflows_time: 1 },
  ).lean();
  return clock ? { id: clock._id, now: (clock.workflows_time ?? clock.frozen_time).toISOString() } : null;
}

/** The clock of the customer with this id (see clockOfCustomer); null for a real or unknown customer. */
export async function clockOfCustomerId(db: Db, customerId: string | null | undefined): Promise<ClockRef | null> {
  if (!customerId) return null;
  const customer = await db.models.Customer.findById(customerId, { test_clock_id: 1 }).lean();
  return customer ? clockOfCustomer(db, customer) : null;
}

/** The present of the customer with this id: its clock's frozen time, or `realNow`. */
export async function customerNowById(db: Db, customerId: string | null | undefined, realNow: Date): Promise<Date> {
  const clock = await clockOfCustomerId(db, customerId);
  return clock ? new Date(clock.now) : realNow;
}

/** The present for this customer: the clock's frozen time, or `realNow`. */
export async function customerNow(db: Db, customer: { test_clock_id?: string | null }, realNow: Date): Promise<Date> {
  const clock = await clockOfCustomer(db, customer);
  return clock ? new Date(clock.now) : realNow;
}
