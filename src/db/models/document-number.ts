import { Schema } from 'mongoose';
import { collectionOptions, type BaseDoc } from '../base';

/**
 * Taken document numbers. A number is taken by inserting its row: (organization, kind, sequence)
 * is unique, so two finalizations never share one, and (organization, kind, document) is unique,
 * so a retried finalization finds the number it already took. Numbers are only ever inserted at
 * the current maximum + 1, so the sequence has no gaps.
 */
export interface DocumentNumberDoc extends BaseDoc {
  organization_id: string;
  /** `invoice`, or `credit_note:<YYYYMMDD>` for the daily credit note sequence. */
  kind: string;
  sequence: number;
  document_id: string;
}

export const documentNumberSchema = new Schema<DocumentNumberDoc>(
  {
    _id: { type: String, required: true },
    organization_id: { type: String, required: true },
    kind: { type: String, required: true },
    sequence: { type: Number, required: true },
    document_id: { type: String, required: true },
  },
  collectionOptions<DocumentNumberDoc>('document_numbers'),
);

documentNumberSchema.index({ organization_id: 1, kind: 1, sequence: 1 }, { unique: true });
documentNumberSchema.index({ organization_id: 1, kind: 1, document_id: 1 }, { unique: true });
