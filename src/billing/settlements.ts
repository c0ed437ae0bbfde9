import type Decimal from 'decimal.js';
import type { Db } from '../db';
import { isDuplicateKeyError } from '../db';
import type { InvoiceDoc } from '../db/models/invoice';
import type { InvoiceSettlementDoc, SettlementType } from '../db/models/invoice-settlement';
import { fromDecimal128, toDecimal128 } from '../db/decimal';
import { Dec } from '../domain/money';

/**
 * Records that `amountCents` of an invoice was settled by a payment, a credit note or a wallet.
 * Idempotent: (invoice, type, source) is unique, so a retried activity finds its own settlement
 * and the amount recorded the first time stands.
 */
export async function recordSettlement(
  db: Db,
  input: { organizationId: string; invoiceId: string; type: SettlementType; sourceId: string; amountCents: Decimal },
): Promise<{ created: boolean }> {
  try {
    await db.models.InvoiceSettlement.create({
      organization_id: input.organizationId,
      invoice_id: input.invoiceId,
      settlement_type: input.type,
      source_id: input.sourceId,
      amount_cents: toDecimal128(input.amountCents),
    });
    return { created: true };
  } catch (err) {
    if (isDuplicateKeyError(err)) return { created: false };
    throw err;
  }
}

/** Everything settled on an invoice so far, all types together. */
export async function settledAmount(db: Db, invoiceId: string): Promise<Decimal> {
  const rows = await db.models.InvoiceSettlement.find({ invoice_id: invoiceId }, { amount_cents: 1 }).lean();
  return rows.reduce((acc, r) => acc.plus(fromDecimal128(r.amount_cents) ?? 0), new Dec(0));
}

/**
 * What a payment settled: one row per invoice (a payment request's payment: several). Read at each
 * step of the payment's workflow, by the (source_id, settlement_type) index.
 */
export function paymentSettlements(
  db: Db,
  paymentId: string,
): Promise<Pick<InvoiceSettlementDoc, '_id' | 'invoice_id' | 'amount_cents'>[]> {
  return db.models.InvoiceSettlement.find({ source_id: paymentId, settlement_type: 'payment' }, { invoice_id: 1, amount_cents: 1 }).lean();
}

/** The gross amount that settlements must cover: the total before credit notes and wallets. */
export function amountToSettle(invoice: Pick<InvoiceDoc, 'total' | 'credit_notes_amount_cents' | 'prepaid_credit_amount'>): Decimal {
  return (fromDecimal128(invoice.total) ?? new Dec(0))
    .plus(fromDecimal128(invoice.credit_notes_amount_cents) ?? 0)
    .plus(fromDecimal128(invoice.prepaid_credit_amount) ?? 0);
}
