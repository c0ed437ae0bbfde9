// What the payment-request and dunning tests set up through the API: an organization paid through
// the manual provider, and finalized one-off invoices.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { CustomerResource } from '../../src/resources/customer';
import type { InvoiceResource } from '../../src/resources/invoice';
import { injectAs, ok } from './http';
import { createOrganization, type TestOrganization } from './stack';

/** A new organization (UTC) with a manual payment integration whose notifications are signed with `secret`. */
export async function manualOrganization(app: FastifyInstance, name: string, secret: string): Promise<TestOrganization> {
  const org = await createOrganization(app, { name: `${name} ${randomUUID().slice(0, 6)}`, timezone: 'UTC' });
  ok(
    await injectAs(app, org, 'POST', '/v1/integrations', {
      integration_type: 'payment_provider',
      provider_type: 'manual',
      settings: { webhook_secret: secret },
    }),
    201,
  );
  return org;
}

/** A finalized one-off invoice of `cents` (one line) for the customer. */
export async function finalizedOneOff(
  app: FastifyInstance,
  org: TestOrganization,
  customerId: string,
  cents: number,
  currency?: string,
): Promise<InvoiceResource> {
  const draft = ok<InvoiceResource>(
    await injectAs(app, org, 'POST', '/v1/invoices/one_off', {
      customer_id: customerId,
      ...(currency ? { currency } : {}),
      line_items: [{ description: 'x', unit_price: String(cents) }],
    }),
    201,
  );
  return draft.status === 'finalized' ? draft : ok<InvoiceResource>(await injectAs(app, org, 'POST', `/v1/invoices/${draft.id}/finalize`));
}

/** A manual organization, a USD customer paying through it, and one finalized invoice per amount. */
export async function manualCustomerWithInvoices(
  app: FastifyInstance,
  secret: string,
  amounts: number[],
): Promise<{ org: TestOrganization; customer: CustomerResource; invoices: InvoiceResource[] }> {
  const org = await manualOrganization(app, 'Requests', secret);
  const customer = ok<CustomerResource>(
    await injectAs(app, org, 'POST', '/v1/customers', { external_id: `cus_${randomUUID()}`, currency: 'USD', payment_provider: 'manual' }),
    201,
  );
  const invoices: InvoiceResource[] = [];
  for (const cents of amounts) invoices.push(await finalizedOneOff(app, org, customer.id, cents));
  return { org, customer, invoices };
}
