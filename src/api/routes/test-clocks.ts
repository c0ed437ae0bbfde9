// Test clocks: simulated time for an organization's test customers. A customer created with a
// `test_clock_id` (customers.ts) lives at the clock's `frozen_time` instead of real time; an advance
// moves the clock forward and drives its customers' workflows through what falls due
// (src/test-clocks/advance.ts). Nothing of a clock ever touches a real customer.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { TestClockDoc } from '../../db/models/test-clock';
import { BadRequest, InvalidTransition, Validation } from '../../errors';
import { deleteTestClock, startClockAdvance } from '../../test-clocks/advance';
import { findLive, listPage, live } from '../catalog';
import { idParams, isoDateTimeInput, listQuery, responses } from '../http';
import { iso } from '../../resources/format';
import { testClockResource, toTestClockResource } from '../../resources/test-clock';

const createTestClockBody = z.strictObject({
  name: z.string().max(255).nullable().optional(),
  frozen_time: isoDateTimeInput.describe('the simulated present the clock starts at'),
});

const advanceTestClockBody = z.strictObject({
  frozen_time: isoDateTimeInput.describe("the clock's new time: later than its current frozen_time"),
});

export const testClockRoutes: FastifyPluginAsyncZod = async (app) => {
  const { db, temporal } = app.deps;
  const { Customer, Subscription, TestClock } = db.models;
  const tags = ['test clocks'];

  function findClock(organizationId: string, id: string): Promise<TestClockDoc> {
    return findLive(TestClock, organizationId, id, { name: 'Test clock', code: 'test_clock_not_found' });
  }

  app.post(
    '/test_clocks',
    { schema: { tags, summary: 'Create a test clock', body: createTestClockBody, response: responses({ 201: testClockResource }) } },
    async (request, reply) => {
      const { name, frozen_time } = request.body;
      const clock = await TestClock.create({ organization_id: request.organizationId, name: name ?? null, frozen_time, status: 'ready' });
      return reply.status(201).send(toTestClockResource(clock.toObject()));
    },
  );

  app.get(
    '/test_clocks',
    {
      schema: {
        tags,
        summary: 'List test clocks, newest first',
        querystring: listQuery,
        response: responses({ 200: z.array(testClockResource) }),
      },
    },
    async (request, reply) => listPage(reply, TestClock, live(request.organizationId), request.query, toTestClockResource),
  );

  app.get(
    '/test_clocks/:id',
    { schema: { tags, summary: 'Get a test clock', params: idParams, response: responses({ 200: testClockResource }) } },
    async (request) => toTestClockResource(await findClock(request.organizationId, request.params.id)),
  );

  app.delete(
    '/test_clocks/:id',
    {
      schema: {
        tags,
        summary: "Delete a test clock: its customers' workflows are terminated and its customers deleted",
        description:
          'Refused (400 test_clock_in_use) while a customer of the clock has a pending or active subscription, and (400 test_clock_advancing) while the clock advances.',
        params: idParams,
        response: responses({ 200: testClockResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const clock = await findClock(organizationId, request.params.id);
      // Deleting terminates workflows an advance is driving: wait until the clock is ready.
      if (clock.status === 'advancing')
        throw new BadRequest('The test clock is advancing; delete it once it is ready', 'test_clock_advancing');
      const customerIds = (await Customer.find({ organization_id: organizationId, test_clock_id: clock._id }, { _id: 1 }).lean()).map(
        (c) => c._id,
      );
      if (customerIds.length > 0) {
        const busy = await Subscription.exists({
          organization_id: organizationId,
          customer_id: { $in: customerIds },
          status: { $in: ['pending', 'active', 'paused'] },
        });
        if (busy)
          throw new BadRequest(
            'A customer of the test clock has a pending or active subscription; terminate it first',
            'test_clock_in_use',
          );
      }
      const at = app.deps.now();
      await deleteTestClock({ db, temporal }, clock, at);
      const deleted = await TestClock.findById(clock._id).lean();
      return toTestClockResource(deleted ?? { ...clock, deleted_at: at });
    },
  );

  app.post(
    '/test_clocks/:id/advance',
    {
      schema: {
        tags,
        summary: 'Advance a test clock',
        description:
          'Answers 202 at once with status advancing; the clock is ready again once every workflow of its customers processed what fell due up to the new frozen_time. 400 while another advance is under way.',
        params: idParams,
        body: advanceTestClockBody,
        response: responses({ 202: testClockResource }),
      },
    },
    async (request, reply) => {
      const clock = await findClock(request.organizationId, request.params.id);
      // An advance under way is refused whatever the target: until it ends, frozen_time is its target.
      if (clock.status === 'advancing') throw new InvalidTransition('The test clock is advancing; wait until it is ready');
      const target = request.body.frozen_time;
      if (target.getTime() <= clock.frozen_time.getTime()) {
        throw Validation.field('frozen_time', `must be later than the clock's frozen_time (${iso(clock.frozen_time)})`);
      }
      const advancing = await startClockAdvance({ db, temporal }, clock, target);
      return reply.status(202).send(toTestClockResource(advancing));
    },
  );
};
