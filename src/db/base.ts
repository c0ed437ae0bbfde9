import { Schema, type SchemaOptions } from 'mongoose';
import { v7 as uuidv7 } from 'uuid';

/**
 * Options shared by every collection: UUID string ids, snake_case timestamps, no __v, and no
 * automatic index builds (indexes are created explicitly at start-up; mongodb-stand-in.md).
 */
export function collectionOptions<T>(collection: string): SchemaOptions<T> {
  return {
    collection,
    versionKey: false,
    autoIndex: false,
    autoCreate: true,
    timestamps: { createdAt: 'created_at', updatedAt: 'updated_at' },
  } as SchemaOptions<T>;
}

/**
 * A new document id: a UUID string, version 7 (time-ordered: its first 48 bits are the creation
 * millisecond, then random bits, monotonic within the process). Ids made one after the other sort
 * one after the other, so inserts land at the end of the `_id` index instead of on a random page:
 * the MongoDB stand-in's H2 store rewrote most of an events collection's pages every second with
 * random ids (docs/performance.md, "Time-ordered ids"), and MongoDB's own B-tree keeps its right
 * edge in cache. An id says when its document was made, to the millisecond, and nothing else.
 */
export const newId = (): string => uuidv7();

export const uuidId = { type: String, default: newId } as const;

/** Money and quantities: Decimal128 in MongoDB, decimal.js in code (architecture.md rule 5). */
export const Decimal128 = Schema.Types.Decimal128;

/** Every document carries these. */
export interface BaseDoc {
  _id: string;
  created_at: Date;
  updated_at: Date;
}
