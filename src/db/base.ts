import { randomUUID } from 'node:crypto';
import { Schema, type SchemaOptions } from 'mongoose';

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

export const uuidId = { type: String, default: () => randomUUID() } as const;

export const newId = (): string => randomUUID();

/** Money and quantities: Decimal128 in MongoDB, decimal.js in code (architecture.md rule 5). */
export const Decimal128 = Schema.Types.Decimal128;

/** Every document carries these. */
export interface BaseDoc {
  _id: string;
  created_at: Date;
  updated_at: Date;
}
