import { Schema } from 'mongoose';
import { collectionOptions, uuidId, type BaseDoc } from '../base';
import { ORGANIZATION_READ_FLAGS, readFlagFields, type OrganizationReadFlags } from '../read-flags';

export interface OrganizationDoc extends BaseDoc, OrganizationReadFlags {
  name: string;
  default_currency: string;
  timezone: string;
  net_payment_term: number;
  invoice_grace_period: number;
  document_number_prefix: string;
  email: string | null;
  legal_name: string | null;
  address_line1: string | null;
  address_line2: string | null;
  city: string | null;
  zipcode: string | null;
  state: string | null;
  country: string | null;
  events_rate_limit_per_minute: number;
}

const optionalString = { type: String, default: null };

export const organizationSchema = new Schema<OrganizationDoc>(
  {
    _id: uuidId,
    name: { type: String, required: true },
    default_currency: { type: String, required: true },
    timezone: { type: String, required: true },
    net_payment_term: { type: Number, required: true },
    invoice_grace_period: { type: Number, required: true },
    document_number_prefix: { type: String, required: true },
    email: optionalString,
    legal_name: optionalString,
    address_line1: optionalString,
    address_line2: optionalString,
    city: optionalString,
    zipcode: optionalString,
    state: optionalString,
    country: optionalString,
    events_rate_limit_per_minute: { type: Number, required: true },
    // Whether it ever had a tax, a webhook endpoint (src/db/read-flags.ts).
    ...readFlagFields(ORGANIZATION_READ_FLAGS),
  },
  collectionOptions<OrganizationDoc>('organizations'),
);
