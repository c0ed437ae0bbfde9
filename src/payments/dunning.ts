// Dunning (api-contract.md, Dunning campaigns and payment requests; lago-reference.md §7.2): which
// campaign governs a customer, telling it of an overdue invoice, and its check: the customer's
// overdue unpaid invoices of a currency that no open request holds, totalled against the
// campaign's threshold, become a payment request.
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Db } from '../db';
import type { CustomerDoc } from '../db/models/customer';
import type { InvoiceDoc } from '../db/models/invoice';
import { fromDecimal128 } from '../db/decimal';
import { dec, sum } from '../domain/money';
import type { TemporalClient } from '../temporal/client';
import { workflowIds } from '../temporal/workflow-ids';
import { signalInvoiceOverdue, stopCampaignUpdate } from '../../workflows/dunning-campaign.messages';
import { requestInvoicesChangedSignal } from '../../workflows/payment-request.messages';
import { createPaymentRequest, openInvoices, type PaymentRequestDeps } from './payment-requests';

type Governed = Pick<CustomerDoc, '_id' | 'organization_id' | 'applied_dunning_campaign_id' | 'exclude_from_dunning_campaign'>;

/** The live campaign that governs a customer: its own, else the organization's default; none when excluded. */
export async function campaignOf(db: Db, customer: Governed) {
  if (customer.exclude_from_dunning_campaign) return null;
  const { DunningCampaign } = db.models;
  if (customer.applied_dunning_campaign_id) {
    const own = await DunningCampaign.findOne({ _id: customer.applied_dunning_campaign_id, deleted_at: null }).lean();
    if (own) return own;
  }
  return DunningCampaign.findOne({ organization_id: customer.organization_id, applied_to_organization: true, deleted_at: null }).lean();
}

/** An invoice became overdue: the campaign governing its customer hears of it (started if needed). */
export async function notifyOverdue(
  db: Db,
  temporal: TemporalClient,
  invoice: Pick<InvoiceDoc, '_id' | 'customer_id' | 'currency'>,
): Promise<void> {
  const customer = await db.models.Customer.findById(invoice.customer_id).lean();
  if (!customer) return;
  const campaign = await campaignOf(db, customer);
  if (!campaign) return;
  await signalInvoiceOverdue(
    temporal,
    { campaignId: campaign._id, organizationId: campaign.organization_id, labels: { code: campaign.code, name: campaign.name } },
    { customerId: customer._id, currency: invoice.currency, invoiceId: invoice._id, customerExternalId: customer.external_id },
  );
}

/** An invoice was paid or voided by other means: the open requests holding it look at what is left. */
export async function notifyInvoiceLeft(db: Db, temporal: TemporalClient, invoice: Pick<InvoiceDoc, '_id' | 'customer_id'>): Promise<void> {
  const requests = await db.models.PaymentRequest.find({ customer_id: invoice.customer_id, status: 'pending' }, { invoice_ids: 1 }).lean();
  for (const request of requests.filter((r) => r.invoice_ids.includes(invoice._id))) {
    await temporal.client.workflow
      .getHandle(workflowIds.paymentRequest(request._id))
      .signal(requestInvoicesChangedSignal)
      .catch(() => undefined);
  }
}

/** Ends a deleted campaign's workflow when it runs (a campaign that never chased anyone has none). */
export async function stopCampaign(temporal: TemporalClient, campaignId: string): Promise<void> {
  await temporal.client.workflow
    .getHandle(workflowIds.dunningCampaign(campaignId))
    .executeUpdate(stopCampaignUpdate)
    .catch((err: unknown) => {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    });
}

/**
 * A customer's overdue finalized invoices in one currency, oldest first. Tenant-scoped: the
 * invoices' (organization_id, customer_id, status, currency) index answers it.
 */
export function overdueInvoices(
  db: Db,
  customer: Pick<CustomerDoc, '_id' | 'organization_id'>,
  currency: string,
): Promise<Pick<InvoiceDoc, '_id' | 'created_at'>[]> {
  return db.models.Invoice.find(
    {
      organization_id: customer.organization_id,
      customer_id: customer._id,
      currency,
      status: 'finalized',
      payment_overdue: true,
      deleted_at: null,
    },
    { _id: 1, created_at: 1 },
  )
    .sort({ created_at: 1, _id: 1 })
    .lean();
}

/**
 * The campaign's check for one customer and currency (check_dunning). Idempotent: the request's id
 * is derived from the campaign and the invoices it holds, so a retried check finds its request.
 */
export async function checkDunning(
  deps: PaymentRequestDeps,
  campaignId: string,
  customerId: string,
  currency: string,
): Promise<{ campaignDeleted: boolean; paymentRequestId: string | null }> {
  const { db } = deps;
  const campaign = await db.models.DunningCampaign.findById(campaignId).lean();
  if (!campaign || campaign.deleted_at) return { campaignDeleted: true, paymentRequestId: null };
  const customer = await db.models.Customer.findById(customerId).lean();
  if (!customer || customer.deleted_at) return { campaignDeleted: false, paymentRequestId: null };
  // The customer may have moved to another campaign (or been excluded) since the invoice was overdue.
  if ((await campaignOf(db, customer))?._id !== campaignId) return { campaignDeleted: false, paymentRequestId: null };
  const threshold = campaign.thresholds.find((t) => t.currency === currency);
  if (!threshold) return { campaignDeleted: false, paymentRequestId: null };

  const [overdue, held] = await Promise.all([
    overdueInvoices(db, customer, currency),
    db.models.PaymentRequest.find({ customer_id: customerId, status: 'pending' }, { invoice_ids: 1 }).lean(),
  ]);
  const heldIds = new Set(held.flatMap((r) => r.invoice_ids));
  const candidates = await openInvoices(
    db,
    overdue.map((i) => i._id).filter((id) => !heldIds.has(id)),
  );
  if (candidates.length === 0) return { campaignDeleted: false, paymentRequestId: null };
  const total = sum(candidates.map((c) => c.left));
  // A threshold is reached when the total is at least its amount.
  if (total.lessThan(fromDecimal128(threshold.amount_cents) ?? dec(threshold.amount_cents as unknown as number))) {
    return { campaignDeleted: false, paymentRequestId: null };
  }
  const request = await createPaymentRequest(deps, {
    organizationId: customer.organization_id,
    customerId,
    currency,
    invoices: candidates,
    dunningCampaignId: campaignId,
    maxAttempts: campaign.max_attempts,
    daysBetweenAttempts: campaign.days_between_attempts,
    idempotencyKey: `dunning/${campaignId}/${candidates.map((c) => c.invoice._id).join(',')}`,
    customerExternalId: customer.external_id,
  });
  return { campaignDeleted: false, paymentRequestId: request._id };
}
