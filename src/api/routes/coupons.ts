import type Decimal from 'decimal.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { isDuplicateKeyError } from '../../db';
import { newId } from '../../db/base';
import { COUPON_FREQUENCIES, COUPON_TYPES, type CouponDoc } from '../../db/models/coupon';
import type { CouponFrequency, CouponType } from '../../domain/coupons';
import { BadRequest, Conflict, type FieldError, NotFound, Validation } from '../../errors';
import { listPage, uniqueWrite } from '../catalog';
import { decimalInput } from '../decimal';
import { toDecimal128 } from '../../db/decimal';
import { currencyCode, idParams, isoDateTimeInput, listQuery, responses } from '../http';
import { appliedCouponResource, couponResource, toAppliedCouponResource, toCouponResource } from '../../resources/coupon';
import { customerLookup } from '../../db/models/customer';

const code = z.string().trim().min(1).max(255);

const positiveAmount = decimalInput({ min: 0 }).refine((v) => v.gt(0), 'must be greater than 0');
const percentageRate = decimalInput({ min: 0, max: 100 }).refine((v) => v.gt(0), 'must be greater than 0');

const couponFields = {
  name: z.string().trim().min(1).max(255),
  description: z.string().max(2000).nullable(),
  coupon_type: z.enum(COUPON_TYPES),
  amount_cents: positiveAmount.nullable().describe('fixed_amount: cents of amount_currency per invoice, Decimal(12,4)'),
  amount_currency: currencyCode.nullable().describe('fixed_amount: ISO 4217'),
  percentage_rate: percentageRate.nullable().describe('percentage: 20 = 20 %, more than 0 and at most 100'),
  frequency: z.enum(COUPON_FREQUENCIES),
  frequency_duration: z.number().int().min(1).nullable().describe('recurring: the number of billing periods'),
  reusable: z.boolean().describe('false: applied to one customer at a time'),
  expiration_at: isoDateTimeInput.nullable().describe('after it, the coupon cannot be applied any more'),
};

const createCouponBody = z.strictObject({
  code,
  name: couponFields.name,
  description: couponFields.description.optional(),
  coupon_type: couponFields.coupon_type,
  amount_cents: couponFields.amount_cents.optional(),
  amount_currency: couponFields.amount_currency.optional(),
  percentage_rate: couponFields.percentage_rate.optional(),
  frequency: couponFields.frequency.default('once'),
  frequency_duration: couponFields.frequency_duration.optional(),
  reusable: couponFields.reusable.default(true),
  expiration_at: couponFields.expiration_at.optional(),
});

const updateCouponBody = z.strictObject({
  code: code.optional(),
  name: couponFields.name.optional(),
  description: couponFields.description.optional(),
  coupon_type: couponFields.coupon_type.optional(),
  amount_cents: couponFields.amount_cents.optional(),
  amount_currency: couponFields.amount_currency.optional(),
  percentage_rate: couponFields.percentage_rate.optional(),
  frequency: couponFields.frequency.optional(),
  frequency_duration: couponFields.frequency_duration.optional(),
  reusable: couponFields.reusable.optional(),
  expiration_at: couponFields.expiration_at.optional(),
});

const applyCouponBody = z.strictObject({
  coupon_code: code.describe('the code (or id) of an active coupon'),
  customer_id: z.string().trim().min(1).max(255).describe('id or external_id of the customer'),
  amount_cents: positiveAmount.nullable().optional().describe("fixed_amount: replaces the coupon's amount for this customer"),
  amount_currency: currencyCode.nullable().optional().describe("fixed_amount: replaces the coupon's currency"),
  percentage_rate: percentageRate.nullable().optional().describe("percentage: replaces the coupon's rate"),
  frequency_duration: z.number().int().min(1).nullable().optional().describe("recurring: replaces the coupon's number of periods"),
});

const statusQuery = z.enum(['active', 'terminated']).optional();

interface CouponTerms {
  coupon_type: CouponType;
  amount_cents: unknown;
  amount_currency: string | null;
  percentage_rate: unknown;
  frequency: CouponFrequency;
  frequency_duration: number | null;
}

/** The cross-field rules of a coupon: each type has its own terms, and only recurring has a duration. */
function termsErrors(terms: CouponTerms): FieldError[] {
  const errors: FieldError[] = [];
  const has = (v: unknown) => v !== null && v !== undefined;
  if (terms.coupon_type === 'fixed_amount') {
    if (!has(terms.amount_cents)) errors.push({ path: 'amount_cents', message: 'is required for a fixed_amount coupon' });
    if (!has(terms.amount_currency)) errors.push({ path: 'amount_currency', message: 'is required for a fixed_amount coupon' });
    if (has(terms.percentage_rate)) errors.push({ path: 'percentage_rate', message: 'is only for a percentage coupon' });
  } else {
    if (!has(terms.percentage_rate)) errors.push({ path: 'percentage_rate', message: 'is required for a percentage coupon' });
    if (has(terms.amount_cents)) errors.push({ path: 'amount_cents', message: 'is only for a fixed_amount coupon' });
    if (has(terms.amount_currency)) errors.push({ path: 'amount_currency', message: 'is only for a fixed_amount coupon' });
  }
  if (terms.frequency === 'recurring') {
    if (!has(terms.frequency_duration)) errors.push({ path: 'frequency_duration', message: 'is required for a recurring coupon' });
  } else if (has(terms.frequency_duration)) {
    errors.push({ path: 'frequency_duration', message: 'is only for a recurring coupon' });
  }
  return errors;
}

const decimalOrNull = (value: Decimal | null | undefined) => (value === null || value === undefined ? null : toDecimal128(value));

const couponNotFound = (idOrCode: string) => new NotFound(`Coupon "${idOrCode}" not found`, 'coupon_not_found');

export const couponRoutes: FastifyPluginAsyncZod = async (app) => {
  const { AppliedCoupon, Coupon, Customer } = app.deps.db.models;
  const tags = ['coupons'];

  /**
   * A coupon of the organization by id or code. Terminated coupons stay readable, and since a
   * terminated coupon's code may be used again, a code names its active coupon first, else the
   * latest terminated one.
   */
  async function findCoupon(organizationId: string, idOrCode: string): Promise<CouponDoc> {
    const coupon = await Coupon.findOne({ organization_id: organizationId, deleted_at: null, $or: [{ _id: idOrCode }, { code: idOrCode }] })
      .sort({ terminated_at: 1, created_at: -1 })
      .lean();
    if (!coupon) throw couponNotFound(idOrCode);
    return coupon;
  }

  function checkExpiration(expiration: Date | null | undefined): void {
    if (expiration && expiration.getTime() <= app.deps.now().getTime()) throw Validation.field('expiration_at', 'must be in the future');
  }

  app.post(
    '/coupons',
    { schema: { tags, summary: 'Create a coupon', body: createCouponBody, response: responses({ 201: couponResource }) } },
    async (request, reply) => {
      const body = request.body;
      const errors = termsErrors({
        coupon_type: body.coupon_type,
        amount_cents: body.amount_cents,
        amount_currency: body.amount_currency ?? null,
        percentage_rate: body.percentage_rate,
        frequency: body.frequency,
        frequency_duration: body.frequency_duration ?? null,
      });
      if (errors.length) throw new Validation(errors);
      checkExpiration(body.expiration_at);
      const coupon = await uniqueWrite(
        () =>
          Coupon.create({
            ...body,
            amount_cents: decimalOrNull(body.amount_cents),
            percentage_rate: decimalOrNull(body.percentage_rate),
            organization_id: request.organizationId,
          }),
        `An active coupon with code "${body.code}" already exists`,
      );
      return reply.status(201).send(toCouponResource(coupon.toObject()));
    },
  );

  app.get(
    '/coupons',
    {
      schema: {
        tags,
        summary: 'List coupons, newest first (terminated ones included)',
        querystring: listQuery.extend({ status: statusQuery }),
        response: responses({ 200: z.array(couponResource) }),
      },
    },
    async (request, reply) => {
      const { skip, limit, status } = request.query;
      const filter: Record<string, unknown> = { organization_id: request.organizationId, deleted_at: null };
      if (status !== undefined) filter.status = status;
      return listPage(reply, Coupon, filter, { skip, limit }, toCouponResource);
    },
  );

  app.get(
    '/coupons/:id',
    { schema: { tags, summary: 'Get a coupon by id or code', params: idParams, response: responses({ 200: couponResource }) } },
    async (request) => toCouponResource(await findCoupon(request.organizationId, request.params.id)),
  );

  app.put(
    '/coupons/:id',
    {
      schema: {
        tags,
        summary: 'Update an active coupon (customers it was applied to keep the terms they got)',
        params: idParams,
        body: updateCouponBody,
        response: responses({ 200: couponResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const current = await findCoupon(organizationId, request.params.id);
      if (current.status === 'terminated') throw new BadRequest('The coupon is terminated and can no longer change', 'coupon_terminated');
      const body = request.body;
      const changes: Record<string, unknown> = Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined));
      // Switching the type (or leaving recurring) drops the terms of the old one unless given.
      if (body.coupon_type === 'percentage' && body.coupon_type !== current.coupon_type) {
        changes.amount_cents ??= null;
        changes.amount_currency ??= null;
      }
      if (body.coupon_type === 'fixed_amount' && body.coupon_type !== current.coupon_type) changes.percentage_rate ??= null;
      if (body.frequency !== undefined && body.frequency !== 'recurring') changes.frequency_duration ??= null;
      const merged = { ...current, ...changes } as CouponTerms;
      const errors = termsErrors(merged);
      if (errors.length) throw new Validation(errors);
      if (body.expiration_at !== undefined) checkExpiration(body.expiration_at);
      if (body.amount_cents !== undefined) changes.amount_cents = decimalOrNull(body.amount_cents);
      if (body.percentage_rate !== undefined) changes.percentage_rate = decimalOrNull(body.percentage_rate);
      const updated = await uniqueWrite(
        () =>
          Coupon.findOneAndUpdate(
            { _id: current._id, organization_id: organizationId, deleted_at: null, status: 'active' },
            { $set: changes },
            { returnDocument: 'after' },
          ).lean(),
        `An active coupon with code "${String(body.code)}" already exists`,
      );
      if (!updated) throw couponNotFound(request.params.id);
      return toCouponResource(updated);
    },
  );

  app.delete(
    '/coupons/:id',
    {
      schema: {
        tags,
        summary: 'Terminate a coupon: it stays readable and can no longer be applied; its code is free again',
        params: idParams,
        response: responses({ 200: couponResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const current = await findCoupon(organizationId, request.params.id);
      if (current.status === 'terminated') return toCouponResource(current);
      const now = app.deps.now();
      const terminated = await Coupon.findOneAndUpdate(
        { _id: current._id, organization_id: organizationId, status: 'active' },
        { $set: { status: 'terminated', terminated_at: now } },
        { returnDocument: 'after' },
      ).lean();
      // Terminated meanwhile by someone else: the answer is the same.
      return toCouponResource(terminated ?? (await findCoupon(organizationId, current._id)));
    },
  );

  app.post(
    '/coupons/apply',
    {
      schema: {
        tags,
        summary: 'Apply a coupon to a customer, optionally with its own terms',
        body: applyCouponBody,
        response: responses({ 201: appliedCouponResource }),
      },
    },
    async (request, reply) => {
      const organizationId = request.organizationId;
      const body = request.body;
      const coupon = await findCoupon(organizationId, body.coupon_code);
      const customer = await Customer.findOne(customerLookup(organizationId, body.customer_id)).lean();
      if (!customer) throw new NotFound(`Customer "${body.customer_id}" not found`, 'customer_not_found');
      if (coupon.status === 'terminated') throw new BadRequest(`The coupon "${coupon.code}" is terminated`, 'coupon_terminated');
      if (coupon.expiration_at && coupon.expiration_at.getTime() <= app.deps.now().getTime()) {
        throw new BadRequest(`The coupon "${coupon.code}" expired at ${coupon.expiration_at.toISOString()}`, 'coupon_expired');
      }

      // Overrides must be terms of this coupon's type and frequency.
      const errors: FieldError[] = [];
      const given = (v: unknown) => v !== undefined && v !== null;
      if (coupon.coupon_type === 'fixed_amount' && given(body.percentage_rate)) {
        errors.push({ path: 'percentage_rate', message: `"${coupon.code}" is a fixed_amount coupon` });
      }
      if (coupon.coupon_type === 'percentage') {
        for (const field of ['amount_cents', 'amount_currency'] as const) {
          if (given(body[field])) errors.push({ path: field, message: `"${coupon.code}" is a percentage coupon` });
        }
      }
      if (coupon.frequency !== 'recurring' && given(body.frequency_duration)) {
        errors.push({ path: 'frequency_duration', message: `"${coupon.code}" is not a recurring coupon` });
      }
      if (errors.length) throw new Validation(errors);

      const fixed = coupon.coupon_type === 'fixed_amount';
      const amountCurrency = fixed ? (body.amount_currency ?? coupon.amount_currency) : null;
      // billing-rules.md, Invoice pipeline 4: a fixed amount in another currency is refused here.
      if (fixed && amountCurrency !== customer.currency) {
        throw Validation.field(
          'amount_currency',
          `the coupon amount is in ${String(amountCurrency)}, the customer is billed in ${customer.currency}`,
        );
      }
      const frequencyDuration = coupon.frequency === 'recurring' ? (body.frequency_duration ?? coupon.frequency_duration) : null;

      if (!coupon.reusable) {
        const active = await AppliedCoupon.exists({ organization_id: organizationId, coupon_id: coupon._id, status: 'active' });
        if (active) throw new Conflict(`The coupon "${coupon.code}" is not reusable and is already applied`);
      }
      const id = newId();
      const create = () =>
        AppliedCoupon.create({
          _id: id,
          organization_id: organizationId,
          coupon_id: coupon._id,
          coupon_code: coupon.code,
          coupon_type: coupon.coupon_type,
          customer_id: customer._id,
          amount_cents: fixed ? (body.amount_cents != null ? toDecimal128(body.amount_cents) : coupon.amount_cents) : null,
          amount_currency: amountCurrency,
          percentage_rate: fixed ? null : body.percentage_rate != null ? toDecimal128(body.percentage_rate) : coupon.percentage_rate,
          frequency: coupon.frequency,
          frequency_duration: frequencyDuration,
          frequency_duration_remaining: frequencyDuration,
          status: 'active',
          exclusive_key: coupon.reusable ? id : coupon._id,
        });
      try {
        const applied = await create();
        return reply.status(201).send(toAppliedCouponResource(applied.toObject()));
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
        // The coupon's key is held. By an active application: a true duplicate. By one that was
        // terminated without releasing it (an invoice used it up): release it and try once more.
        const holder = await AppliedCoupon.findOne({ exclusive_key: coupon._id }, { status: 1 }).lean();
        const released =
          holder?.status === 'terminated' &&
          (await AppliedCoupon.updateOne({ _id: holder._id, exclusive_key: coupon._id }, { $set: { exclusive_key: holder._id } }))
            .modifiedCount === 1;
        if (released) {
          const applied = await uniqueWrite(create, `The coupon "${coupon.code}" is not reusable and is already applied`);
          return reply.status(201).send(toAppliedCouponResource(applied.toObject()));
        }
        throw new Conflict(`The coupon "${coupon.code}" is not reusable and is already applied`);
      }
    },
  );

  app.get(
    '/customers/:id/applied_coupons',
    {
      schema: {
        tags,
        summary: "List a customer's applied coupons, newest first",
        params: idParams,
        querystring: listQuery.extend({ status: statusQuery }),
        response: responses({ 200: z.array(appliedCouponResource) }),
      },
    },
    async (request, reply) => {
      const organizationId = request.organizationId;
      const customer = await Customer.findOne(customerLookup(organizationId, request.params.id), { _id: 1 }).lean();
      if (!customer) throw new NotFound('Customer not found', 'customer_not_found');
      const { skip, limit, status } = request.query;
      const filter: Record<string, unknown> = { organization_id: organizationId, customer_id: customer._id };
      if (status !== undefined) filter.status = status;
      return listPage(reply, AppliedCoupon, filter, { skip, limit }, toAppliedCouponResource);
    },
  );

  app.delete(
    '/coupons/applied/:id',
    {
      schema: {
        tags,
        summary: 'Remove a coupon from a customer (the applied coupon is terminated)',
        params: idParams,
        response: responses({ 200: appliedCouponResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const current = await AppliedCoupon.findOne({ _id: request.params.id, organization_id: organizationId }).lean();
      if (!current) throw new NotFound('Applied coupon not found', 'applied_coupon_not_found');
      if (current.status === 'terminated') return toAppliedCouponResource(current);
      // Releasing the exclusive key lets a coupon that is not reusable be applied again.
      const terminated = await AppliedCoupon.findOneAndUpdate(
        { _id: current._id, organization_id: organizationId, status: 'active' },
        { $set: { status: 'terminated', terminated_at: app.deps.now(), exclusive_key: current._id } },
        { returnDocument: 'after' },
      ).lean();
      return toAppliedCouponResource(terminated ?? (await AppliedCoupon.findById(current._id).lean()) ?? current);
    },
  );
};
