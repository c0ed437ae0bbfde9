import { ApplicationFailure } from '@temporalio/activity';
import type { Db } from '../src/db';
import type { InvoiceDoc } from '../src/db/models/invoice';
import { toInvoiceResource, type InvoiceResource } from '../src/resources/invoice';
import {
  deleteDraftInvoice,
  finalizeInvoice,
  invoiceOverdueAt,
  type InvoiceDeps,
  markInvoiceOverdue,
  markPaidIfSettled,
  payInvoice,
  voidInvoice,
} from '../src/billing/invoices';

export interface InvoiceStepResult {
  invoice: InvoiceResource;
  deleted?: boolean;
  /** When the invoice becomes overdue if unpaid: the end of its due date in the customer's zone. */
  overdueAt?: string | null;
}

/**
 * The invoiceWorkflow's steps. Each receives the instant it acts for from the workflow (workflow
 * or test-clock time), so a retried step computes the same dates.
 */
export function createInvoiceActivities(db: Db, deps: InvoiceDeps) {
  async function load(invoiceId: string): Promise<InvoiceDoc> {
    const invoice = await db.models.Invoice.findById(invoiceId).lean();
    if (!invoice) throw ApplicationFailure.nonRetryable(`invoice ${invoiceId} not found`, 'NotFound');
    return invoice;
  }

  async function withFees(invoice: InvoiceDoc): Promise<InvoiceResource> {
    const fees = await db.models.Fee.find({ invoice_id: invoice._id }).sort({ key: 1 }).lean();
    return toInvoiceResource(invoice, fees);
  }

  const step = async (invoice: InvoiceDoc): Promise<InvoiceStepResult> => ({
    invoice: await withFees(invoice),
    overdueAt: await invoiceOverdueAt(db, invoice),
  });

  return {
    async readInvoice(invoiceId: string): Promise<InvoiceResource> {
      return withFees(await load(invoiceId));
    },
    async finalizeInvoiceActivity(invoiceId: string, at: string): Promise<InvoiceStepResult> {
      return step(await finalizeInvoice(db, deps, invoiceId, new Date(at)));
    },
    async payInvoiceActivity(invoiceId: string, at: string): Promise<InvoiceStepResult> {
      return step(await payInvoice(db, deps, invoiceId, new Date(at)));
    },
    async voidInvoiceActivity(invoiceId: string, at: string): Promise<InvoiceStepResult> {
      return step(await voidInvoice(db, deps, invoiceId, new Date(at)));
    },
    async deleteInvoiceActivity(invoiceId: string, at: string): Promise<InvoiceStepResult> {
      const invoice = await deleteDraftInvoice(db, invoiceId, new Date(at));
      return { invoice: await withFees(invoice), deleted: invoice.deleted_at !== null };
    },
    /** Drafts of one-off invoices have nothing to recompute; subscription drafts re-price usage (subscriptions issue). */
    async refreshInvoiceActivity(invoiceId: string, _at: string): Promise<InvoiceStepResult> {
      return step(await load(invoiceId));
    },
    async markInvoiceOverdueActivity(invoiceId: string, at: string): Promise<InvoiceStepResult> {
      return step(await markInvoiceOverdue(db, deps, invoiceId, new Date(at)));
    },
    async settleInvoiceActivity(invoiceId: string, at: string): Promise<InvoiceStepResult> {
      return step(await markPaidIfSettled(db, deps, invoiceId, new Date(at)));
    },
  };
}
