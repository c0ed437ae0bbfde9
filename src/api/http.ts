import type { FastifyReply } from 'fastify';
import { IANAZone } from 'luxon';
import { z } from 'zod';

/** The uniform error body of api-contract.md. */
export const errorBody = z
  .object({
    status: z.number().int(),
    code: z.string(),
    message: z.string(),
    errors: z.array(z.object({ path: z.string(), message: z.string() })),
    request_id: z.string().optional(),
  })
  .loose()
  .meta({ id: 'Error' });

/** Error statuses every authenticated route may answer. */
const commonErrors = { 400: errorBody, 401: errorBody, 404: errorBody, 409: errorBody, 422: errorBody, 500: errorBody };

/** Adds the uniform error body for every error status to a route's success responses. */
export function responses<T extends Record<number, z.ZodType>>(success: T): T & typeof commonErrors {
  return { ...commonErrors, ...success };
}

export const listQuery = z.object({
  skip: z.coerce.number().int().min(0).default(0).describe('Records to skip (>= 0).'),
  limit: z.coerce.number().int().min(1).max(1000).default(100).describe('Page size, 1 to 1000.'),
});

export const idParams = z.strictObject({ id: z.string().min(1).max(255) });

/** Sends a page of a list: the bare array, with the total in X-Total-Count. */
export function sendList<T>(reply: FastifyReply, items: T[], total: number): T[] {
  void reply.header('X-Total-Count', String(total));
  return items;
}

const currencies = new Set(Intl.supportedValuesOf('currency'));
export const currencyCode = z
  .string()
  .length(3)
  .transform((s) => s.toUpperCase())
  .refine((c) => currencies.has(c), 'unknown ISO 4217 currency code');

export const ianaTimezone = z
  .string()
  .max(50)
  .refine((tz) => IANAZone.isValidZone(tz), 'unknown IANA time zone');

/** An ISO 8601 timestamp with an offset (or Z), parsed to a Date. */
export const isoDateTimeInput = z.iso.datetime({ offset: true }).transform((s) => new Date(s));

export const email = z.email().max(255);
