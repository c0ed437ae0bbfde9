// Credit notes: creation (the API's and the subscription workflows' one path), finalization, void,
// and application of finalized balances to the customer's later invoices at their finalization.
//
// Without multi-document transactions, every money-moving step is one atomic single-document
// update that carries its own guard and idempotency marker:
// - a fee's credited amount rises by `$inc` guarded by `credited <= total - amount` and by the
//   credit note item's id not yet in the fee's `credit_note_item_ids` (the item id is pushed in the
//   same update, and pulled again by the same kind of update when the credit is given back);
// - a note's balance falls by `$inc` guarded by `balance >= amount` and by the invoice not yet in
//   `applied_invoice_ids` (pushed in the same update, with the amount in `applications`).
import type Decimal from 'decimal.js';
import { DateTime } from 'luxon';
import type { Types } from 'mongoose';
import { fromDecimal128, toDecimal128 } from '../db/decimal';
import type { Db } from '../db';
import { isDuplicateKeyError } from '../db';
import { newId } from '../db/base';
import type { CreditNoteDoc, CreditNoteReason } from '../db/models/credit-note';
import { customerLookup } from '../db/models/customer';
import type { FeeDoc } from '../db/models/fee';
import { Dec, ZERO } from '../domain/money';
import type { WebhookEventType } from '../domain/webhook-schedule';
import { InvalidTransition, NotFound, Validation, type FieldError } from '../errors';
import { deterministicId } from '../ids';
import { toCreditNoteResource } from '../resources/credit-note';
import type { TemporalClient } from '../temporal/client';
import { emitEvent } from '../webhooks/emit-event';
import { takeDocumentNumber } from './document-numbers';
import { recordSettlement } from './settlements';

export interface CreditNoteDeps {
  temporal: TemporalClient;
  /**
   * Where a failed event emission is reported when the caller cannot retry it (an API request:
   * the note exists, and a retried request would create a second one). Callers with an
   * idempotency key (workflows) get the failure thrown instead, and their retry emits again.
   */
  log?: { error(obj: object, msg: string): void };
}

export interface NewCreditNote {
  organizationId: string;
  invoiceId: string;
  /** The invoice's customer, by id or external_id; optional, checked when given. */
  customerId?: string | null;
  reason: CreditNoteReason;
  description?: string | null;
  /** Amounts in cents, > 0, at most 4 fractional digits. */
  items: { fee_id: string; amount_cents: Decimal.Value }[];
  /** When it is created: the number's date (in the organization's time zone) and `created_at`. */
  at: Date;
  /** Makes creation idempotent (subscription workflows): a retry returns the same note. */
  idempotencyKey?: string;
}

/** `CN-<YYYYMMDD>-<4 digits>` (a 10,000th note on one day simply gets 5 digits). */
export function creditNoteNumber(localDate: string, sequence: number): string {
  return `CN-${localDate}-${String(sequence).padStart(4, '0')}`;
}

const amount = (value: unknown): Decimal => fromDecimal128(value) ?? new Dec(0);

/** The fee fields this module reads, plus the idempotency markers kept outside the fee schema. */
type CreditableFee = Pick<FeeDoc, '_id' | 'invoice_id' | 'total_amount_cents' | 'credited_amount_cents'> & {
  credit_note_item_ids?: string[];
};

// The markers are not part of the fee schema (src/db/models/fee.ts): `strict: false` lets the
// update write them, and they stay invisible to the fee resource.
const MARKER_WRITE = { strict: false } as const;

/**
 * How far credits may go past a fee's total: a whole-cent item may credit what is left of the fee
 * rounded half up, as its invoice's total was (a fee of 5483.8710 was paid as 5484 and can be
 * credited 5484); an item with a fraction of a cent never goes past the total.
 */
function roundingAllowance(value: Decimal): Decimal {
  return value.isInteger() ? new Dec(0.5) : ZERO;
}

/** Raises a fee's credited amount once per credit note item; false when it would exceed the total. */
async function creditFee(db: Db, organizationId: string, fee: CreditableFee, itemId: string, value: Decimal): Promise<boolean> {
  const limit = amount(fee.total_amount_cents).plus(roundingAllowance(value)).minus(value);
  const result = await db.models.Fee.updateOne(
    {
      _id: fee._id,
      organization_id: organizationId,
      credited_amount_cents: { $lte: toDecimal128(limit) },
      credit_note_item_ids: { $ne: itemId },
    },
    { $inc: { credited_amount_cents: toDecimal128(value) }, $push: { credit_note_item_ids: itemId } },
    MARKER_WRITE,
  );
  if (result.matchedCount === 1) return true;
  // A retried creation whose first attempt credited this item already.
  return (await db.models.Fee.exists({ _id: fee._id, credit_note_item_ids: itemId })) !== null;
}

/** Gives `value` of an item's credit back to its fee, once (the marker goes with it). */
async function releaseFeeCredit(db: Db, organizationId: string, feeId: string, itemId: string, value: Decimal): Promise<void> {
  await db.models.Fee.updateOne(
    { _id: feeId, organization_id: organizationId, credit_note_item_ids: itemId },
    { $inc: { credited_amount_cents: toDecimal128(value.negated()) }, $pull: { credit_note_item_ids: itemId } },
    MARKER_WRITE,
  );
}

async function announce(
  db: Db,
  deps: CreditNoteDeps,
  note: CreditNoteDoc,
  type: Extract<WebhookEventType, 'credit_note.created' | 'credit_note.finalized'>,
  occurredAt: Date,
  rethrow: boolean,
): Promise<void> {
  try {
    await emitEvent(
      { models: db.models, temporal: deps.temporal },
      {
        organizationId: note.organization_id,
        type,
        idempotencyKey: `credit_note/${note._id}/${type.split('.')[1]!}`,
        object: toCreditNoteResource(note),
        occurredAt,
        customerId: note.customer_id,
      },
    );
  } catch (err) {
    if (rethrow) throw err;
    deps.log?.error({ err, creditNoteId: note._id }, `could not emit ${type}`);
  }
}

/**
 * Creates a draft credit note on a finalized or paid invoice, crediting the given fees. Each item
 * raises its fee's `credited_amount_cents` atomically, so concurrent notes can never credit a fee
 * beyond its `total_amount_cents`; when one item is refused, the items already credited are given
 * back and nothing else is written (no number is taken). The number is taken last, from the
 * organization's daily sequence of the creation date in its time zone. Emits credit_note.created.
 */
export async function createCreditNote(db: Db, deps: CreditNoteDeps, input: NewCreditNote): Promise<CreditNoteDoc> {
  const { CreditNote, Customer, Fee, Invoice, Organization } = db.models;
  const organizationId = input.organizationId;
  const noteId = input.idempotencyKey ? deterministicId(`credit_note/${organizationId}/${input.idempotencyKey}`) : newId();
  const strict = input.idempotencyKey !== undefined;

  if (strict) {
    const existing = await CreditNote.findOne({ _id: noteId, organization_id: organizationId }).lean();
    if (existing) {
      await announce(db, deps, existing, 'credit_note.created', existing.created_at, true);
      return existing;
    }
  }

  const invoice = await Invoice.findOne({ _id: input.invoiceId, organization_id: organizationId, deleted_at: null }).lean();
  if (!invoice) throw new NotFound(`Invoice "${input.invoiceId}" not found`, 'invoice_not_found');

  if (input.customerId !== undefined && input.customerId !== null) {
    const customer = await Customer.findOne(customerLookup(organizationId, input.customerId), { _id: 1 }).lean();
    if (!customer) throw new NotFound(`Customer "${input.customerId}" not found`, 'customer_not_found');
    if (customer._id !== invoice.customer_id) throw Validation.field('customer_id', "is not the invoice's customer");
  }

  if (invoice.status !== 'finalized' && invoice.status !== 'paid') {
    throw new InvalidTransition(`A credit note needs a finalized or paid invoice (this one is ${invoice.status})`);
  }
  // A wallet purchase's credits are in the wallet (or will be, once paid): a credit note on top
  // would give its value twice. Credits bought are taken back with a top-up's voided_credits.
  if (invoice.invoice_type === 'credit') {
    throw Validation.field('invoice_id', "is a wallet purchase (invoice_type credit): take credits back with the wallet's voided_credits");
  }

  // The items: shape first, all errors at once.
  if (input.items.length === 0) throw Validation.field('items', 'at least one item is required');
  const errors: FieldError[] = [];
  const items = input.items.map((raw, index) => {
    const id = deterministicId(`credit_note_item/${noteId}/${index}`);
    let value: Decimal = ZERO;
    try {
      value = new Dec(raw.amount_cents);
    } catch {
      errors.push({ path: `items.${index}.amount_cents`, message: 'must be a decimal number' });
      return { id, index, feeId: raw.fee_id, value };
    }
    if (!value.isFinite() || value.lessThanOrEqualTo(0)) {
      errors.push({ path: `items.${index}.amount_cents`, message: 'must be greater than 0 (a credit of zero is never created)' });
    } else if (value.decimalPlaces() > 4) {
      errors.push({ path: `items.${index}.amount_cents`, message: 'at most 4 fractional digits' });
    }
    if (input.items.findIndex((other) => other.fee_id === raw.fee_id) !== index) {
      errors.push({ path: `items.${index}.fee_id`, message: 'credits the same fee as an earlier item' });
    }
    return { id, index, feeId: raw.fee_id, value };
  });
  if (errors.length > 0) throw new Validation(errors);

  // Checks that every fee is the invoice's and has room for its item; throws the 422 otherwise.
  const checkRoom = async (): Promise<Map<string, CreditableFee>> => {
    const fees = await Fee.find({ _id: { $in: items.map((i) => i.feeId) }, organization_id: organizationId }).lean<CreditableFee[]>();
    const feesById = new Map(fees.map((f) => [f._id, f]));
    const problems: FieldError[] = [];
    for (const item of items) {
      const fee = feesById.get(item.feeId);
      if (!fee) throw new NotFound(`Fee "${item.feeId}" not found`, 'fee_not_found');
      if (fee.invoice_id !== invoice._id) {
        problems.push({ path: `items.${item.index}.fee_id`, message: `is not a fee of invoice ${invoice._id}` });
        continue;
      }
      // A retried creation finds its own credit on the fee already.
      const own = fee.credit_note_item_ids?.includes(item.id) ? item.value : ZERO;
      const creditable = amount(fee.total_amount_cents).minus(amount(fee.credited_amount_cents)).plus(own);
      if (item.value.greaterThan(creditable.plus(roundingAllowance(item.value)))) {
        problems.push({
          path: `items.${item.index}.amount_cents`,
          message: `exceeds what remains creditable on the fee (${creditable.toFixed(4)})`,
        });
      }
    }
    if (problems.length > 0) throw new Validation(problems);
    return feesById;
  };
  let feesById = await checkRoom();
  const total = items.reduce((acc, i) => acc.plus(i.value), new Dec(0));
  if (total.lessThanOrEqualTo(0)) throw Validation.field('items', 'a credit note of zero is never created');

  // Credit the fees in one global order (by fee id), so that concurrent notes over the same fees
  // cannot all take one fee each and all be refused on the next. When a guard refuses (another
  // note took the room meanwhile), give back what this note took, look again, and try again while
  // the room is there.
  const ordered = [...items].sort((x, y) => (x.feeId < y.feeId ? -1 : x.feeId > y.feeId ? 1 : 0));
  for (let attempt = 1; ; attempt++) {
    let refused: (typeof items)[number] | null = null;
    try {
      for (const item of ordered) {
        if (!(await creditFee(db, organizationId, feesById.get(item.feeId)!, item.id, item.value))) {
          refused = item;
          break;
        }
      }
    } catch (err) {
      for (const item of ordered) await releaseFeeCredit(db, organizationId, item.feeId, item.id, item.value);
      throw err;
    }
    if (!refused) break;
    for (const item of ordered) await releaseFeeCredit(db, organizationId, item.feeId, item.id, item.value);
    if (attempt >= 5) {
      throw Validation.field(
        `items.${refused.index}.amount_cents`,
        'exceeds what remains creditable on the fee (other credit notes are crediting it)',
      );
    }
    feesById = await checkRoom();
  }

  const organization = await Organization.findById(organizationId, { timezone: 1 }).lean();
  const local = DateTime.fromJSDate(input.at, { zone: organization?.timezone ?? 'UTC' });
  const day = local.toFormat('yyyyLLdd');
  const sequence = await takeDocumentNumber(db, { organizationId, kind: `credit_note:${day}`, documentId: noteId });

  let note: CreditNoteDoc;
  try {
    note = (
      await CreditNote.create({
        _id: noteId,
        organization_id: organizationId,
        customer_id: invoice.customer_id,
        invoice_id: invoice._id,
        number: creditNoteNumber(day, sequence),
        sequential_id: sequence,
        issuing_date: local.toISODate()!,
        currency: invoice.currency,
        status: 'draft',
        credit_note_type: 'credit',
        reason: input.reason,
        description: input.description ?? null,
        items: items.map((i) => ({ _id: i.id, fee_id: i.feeId, amount_cents: toDecimal128(i.value), released_amount_cents: null })),
        credit_amount_cents: toDecimal128(total),
        balance_amount_cents: toDecimal128(total),
        applied_invoice_ids: [],
        applications: [],
        finalized_at: null,
        voided_at: null,
        created_at: input.at,
      })
    ).toObject();
  } catch (err) {
    if (!isDuplicateKeyError(err)) throw err;
    // A concurrent retry with the same idempotency key inserted it first.
    const existing = await CreditNote.findById(noteId).lean();
    if (!existing) throw err;
    note = existing;
  }
  await announce(db, deps, note, 'credit_note.created', note.created_at, strict);
  return note;
}

async function findNote(db: Db, organizationId: string, creditNoteId: string): Promise<CreditNoteDoc> {
  const note = await db.models.CreditNote.findOne({ _id: creditNoteId, organization_id: organizationId }).lean();
  if (!note) throw new NotFound('Credit note not found', 'credit_note_not_found');
  return note;
}

/**
 * draft -> finalized; from then on its balance goes to the customer's later invoices. Emits
 * credit_note.finalized. `idempotent` (workflow retries): an already finalized note is returned
 * (and its event emitted again, which is a no-op) instead of refused.
 */
export async function finalizeCreditNote(
  db: Db,
  deps: CreditNoteDeps,
  input: { organizationId: string; creditNoteId: string; at: Date; idempotent?: boolean },
): Promise<CreditNoteDoc> {
  const finalized = await db.models.CreditNote.findOneAndUpdate(
    { _id: input.creditNoteId, organization_id: input.organizationId, status: 'draft' },
    { $set: { status: 'finalized', finalized_at: input.at } },
    { returnDocument: 'after' },
  ).lean();
  let note: CreditNoteDoc | null = finalized;
  if (!note) {
    const current = await findNote(db, input.organizationId, input.creditNoteId);
    if (!(input.idempotent === true && current.status === 'finalized')) {
      throw new InvalidTransition(`Only a draft credit note can be finalized (this one is ${current.status})`);
    }
    note = current;
  }
  await announce(db, deps, note, 'credit_note.finalized', note.finalized_at ?? input.at, input.idempotent === true);
  return note;
}

/**
 * What each item gives back to its fee when a note with `balance` left is voided: the unconsumed
 * balance, attributed to the items in their order (each at most its own amount). The part already
 * applied to invoices stays credited on the fees: that money was given.
 */
export function releasePlan(items: readonly { amount_cents: unknown }[], balance: Decimal): Decimal[] {
  let left = balance;
  return items.map((item) => {
    const give = Dec.max(0, Dec.min(amount(item.amount_cents), left));
    left = left.minus(give);
    return give;
  });
}

/**
 * draft or finalized -> voided. The balance becomes 0 (a voided note is never applied) and the
 * unconsumed balance is given back to the fees' creditable amounts. Voiding a voided note is an
 * invalid transition; it first finishes any give-back a crash interrupted (each is idempotent).
 */
export async function voidCreditNote(
  db: Db,
  _deps: CreditNoteDeps,
  input: { organizationId: string; creditNoteId: string; at: Date },
): Promise<CreditNoteDoc> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const current = await findNote(db, input.organizationId, input.creditNoteId);
    if (current.status === 'voided') {
      await releaseVoided(db, current);
      throw new InvalidTransition('The credit note is already voided');
    }
    const plan = releasePlan(current.items, amount(current.balance_amount_cents));
    const set: Record<string, unknown> = { status: 'voided', voided_at: input.at, balance_amount_cents: toDecimal128(0) };
    plan.forEach((give, i) => (set[`items.${i}.released_amount_cents`] = toDecimal128(give)));
    // The balance only ever changes together with applied_invoice_ids, so an unchanged status and
    // count of applications means the balance read above is the balance being voided.
    const voided = await db.models.CreditNote.findOneAndUpdate(
      {
        _id: current._id,
        organization_id: input.organizationId,
        status: current.status,
        applied_invoice_ids: { $size: current.applied_invoice_ids.length },
      },
      { $set: set },
      { returnDocument: 'after' },
    ).lean();
    if (!voided) continue; // finalized or applied meanwhile: look again
    await releaseVoided(db, voided);
    return voided;
  }
  throw new Error(`could not void credit note ${input.creditNoteId}: it kept changing`);
}

async function releaseVoided(db: Db, note: CreditNoteDoc): Promise<void> {
  for (const item of note.items) {
    await releaseFeeCredit(db, note.organization_id, item.fee_id, item._id, amount(item.released_amount_cents));
  }
}

export interface CreditNoteApplication {
  creditNoteId: string;
  amountCents: Decimal;
}

/**
 * Applies the customer's finalized credit notes in `currency` to an invoice being finalized, oldest
 * note first, up to `amountCents`; notes issued on this invoice are not applied to it. Each
 * application is one atomic update of the note (balance guard, invoice marker) followed by an
 * InvoiceSettlement of type credit_note. Idempotent: on a retry, a note already applied to this
 * invoice contributes what it contributed the first time. Concurrent finalizations of other
 * invoices never take a balance below zero (the guard refuses, the note is read again).
 */
export async function applyCreditNotesToInvoice(
  db: Db,
  input: { organizationId: string; customerId: string; currency: string; invoiceId: string; amountCents: Decimal; at: Date },
): Promise<{ totalCents: Decimal; applications: CreditNoteApplication[] }> {
  const { CreditNote } = db.models;
  const scope = {
    organization_id: input.organizationId,
    customer_id: input.customerId,
    currency: input.currency,
    invoice_id: { $ne: input.invoiceId },
  };
  const oldestFirst = { created_at: 1, sequential_id: 1, _id: 1 } as const;
  const applications: CreditNoteApplication[] = [];
  let totalCents: Decimal = new Dec(0);

  const settle = async (creditNoteId: string, value: Decimal) => {
    await recordSettlement(db, {
      organizationId: input.organizationId,
      invoiceId: input.invoiceId,
      type: 'credit_note',
      sourceId: creditNoteId,
      amountCents: value,
    });
    applications.push({ creditNoteId, amountCents: value });
    totalCents = totalCents.plus(value);
  };

  // One query for both kinds, so that a note a concurrent attempt applies to this invoice while
  // we read cannot slip between two queries: it matches before and after that update.
  const notes = await CreditNote.find({
    ...scope,
    $or: [{ applied_invoice_ids: input.invoiceId }, { status: 'finalized', balance_amount_cents: { $gt: toDecimal128(0) } }],
  })
    .sort(oldestFirst)
    .lean();
  // A retried finalization: what was applied stands (whatever the notes' status is now).
  const fresh: CreditNoteDoc[] = [];
  for (const note of notes) {
    if (note.applied_invoice_ids.includes(input.invoiceId)) await settle(note._id, appliedAmount(note, input.invoiceId));
    else fresh.push(note);
  }
  for (const candidate of fresh) {
    const remaining = input.amountCents.minus(totalCents);
    if (remaining.lessThanOrEqualTo(0)) break;
    const value = await applyOne(db, candidate, input.invoiceId, remaining, input.at);
    if (value.greaterThan(0)) await settle(candidate._id, value);
  }
  return { totalCents, applications };
}

function appliedAmount(note: CreditNoteDoc, invoiceId: string): Decimal {
  const application = note.applications.find((a) => a.invoice_id === invoiceId);
  return amount(application?.amount_cents);
}

/** Applies min(balance, remaining) of one note to the invoice, once; returns what it applied. */
async function applyOne(db: Db, candidate: CreditNoteDoc, invoiceId: string, remaining: Decimal, at: Date): Promise<Decimal> {
  let note: CreditNoteDoc | null = candidate;
  for (let attempt = 0; attempt < 100 && note; attempt++) {
    if (note.applied_invoice_ids.includes(invoiceId)) return appliedAmount(note, invoiceId);
    const balance = amount(note.balance_amount_cents);
    if (note.status !== 'finalized' || balance.lessThanOrEqualTo(0)) return ZERO;
    const value = Dec.min(balance, remaining);
    const decimal128: Types.Decimal128 = toDecimal128(value);
    const updated = await db.models.CreditNote.findOneAndUpdate(
      {
        _id: note._id,
        organization_id: note.organization_id,
        status: 'finalized',
        balance_amount_cents: { $gte: decimal128 },
        applied_invoice_ids: { $ne: invoiceId },
      },
      {
        $inc: { balance_amount_cents: toDecimal128(value.negated()) },
        $push: { applied_invoice_ids: invoiceId, applications: { invoice_id: invoiceId, amount_cents: decimal128, applied_at: at } },
      },
      { returnDocument: 'after' },
    ).lean();
    if (updated) return value;
    // Another finalization took part of the balance, or this one was voided: read it again.
    note = await db.models.CreditNote.findById(note._id).lean();
  }
  if (!note) return ZERO;
  throw new Error(`could not apply credit note ${candidate._id} to invoice ${invoiceId}: it kept changing`);
}
