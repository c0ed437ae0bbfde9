// The four levels of taxes that may apply to a customer's fees (billing-rules.md, Invoice
// pipeline, 3): the organization's default taxes, and those applied to the customer, the plan,
// each charge and each add-on. Read from the taxes and applied_taxes collections.
import type { Db } from '../db';
import { fromDecimal128 } from '../db/decimal';
import type { OrganizationTax, Tax, TaxSets } from '../domain/taxes';

interface TaxRow {
  _id: string;
  code: string;
  rate: unknown;
  applied_to_organization?: boolean;
}

export async function loadTaxSets(
  db: Db,
  scope: { organizationId: string; customerId: string; planId?: string | null; chargeIds?: string[]; addOnIds?: string[] },
): Promise<TaxSets> {
  const taxables = [
    { taxable_type: 'customer', taxable_id: scope.customerId },
    ...(scope.planId ? [{ taxable_type: 'plan', taxable_id: scope.planId }] : []),
    ...(scope.chargeIds ?? []).map((id) => ({ taxable_type: 'charge', taxable_id: id })),
    ...(scope.addOnIds ?? []).map((id) => ({ taxable_type: 'add_on', taxable_id: id })),
  ];
  const applied = await db.connection
    .collection<{ tax_id: string; taxable_type: string; taxable_id: string }>('applied_taxes')
    .find({ organization_id: scope.organizationId, $or: taxables })
    .toArray();
  const taxes = await db.connection
    .collection<TaxRow>('taxes')
    .find({
      organization_id: scope.organizationId,
      deleted_at: null,
      $or: [{ applied_to_organization: true }, { _id: { $in: applied.map((a) => a.tax_id) } }],
    })
    .toArray();
  const byId = new Map(taxes.map((t) => [t._id, t]));
  const toTax = (t: TaxRow): Tax => ({ id: t._id, code: t.code, rate: fromDecimal128(t.rate)! });
  const level = (type: string, id: string): Tax[] =>
    applied
      .filter((a) => a.taxable_type === type && a.taxable_id === id)
      .flatMap((a) => (byId.has(a.tax_id) ? [toTax(byId.get(a.tax_id)!)] : []));
  return {
    organization: taxes
      .filter((t) => t.applied_to_organization)
      .map((t): OrganizationTax => ({ ...toTax(t), applied_to_organization: true })),
    customer: level('customer', scope.customerId),
    plan: scope.planId ? level('plan', scope.planId) : [],
    charges: Object.fromEntries((scope.chargeIds ?? []).map((id) => [id, level('charge', id)])),
    add_ons: Object.fromEntries((scope.addOnIds ?? []).map((id) => [id, level('add_on', id)])),
  };
}
