import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dec } from '../../src/domain/money';
import { allocateWallets, isWalletUsable, type AllocatableWallet } from '../../src/domain/wallet-allocation';

const AT = new Date('2026-03-01T12:00:00Z');

function wallet(id: string, balanceCents: string | number, overrides: Partial<AllocatableWallet> = {}): AllocatableWallet {
  return {
    id,
    balanceCents,
    priority: 50,
    createdAt: new Date('2026-01-01T00:00:00Z'),
    status: 'active',
    expirationAt: null,
    ...overrides,
  };
}

function paid(result: ReturnType<typeof allocateWallets>): Array<[string, string]> {
  return result.allocations.map((a) => [a.walletId, a.amountCents.toString()]);
}

describe('allocateWallets', () => {
  it.each([
    {
      name: 'priority 1 first, then priority 50 for the rest (A 2000, B 5500 of 7500)',
      due: '7500',
      wallets: [wallet('B', 10000, { priority: 50 }), wallet('A', 2000, { priority: 1 })],
      expected: [
        ['A', '2000'],
        ['B', '5500'],
      ],
      total: '7500',
      remaining: '0',
    },
    {
      name: 'equal priority: the older wallet pays first',
      due: '300',
      wallets: [
        wallet('newer', 1000, { priority: 5, createdAt: new Date('2026-02-01T00:00:00Z') }),
        wallet('older', 200, { priority: 5, createdAt: new Date('2026-01-01T00:00:00Z') }),
      ],
      expected: [
        ['older', '200'],
        ['newer', '100'],
      ],
      total: '300',
      remaining: '0',
    },
    {
      name: 'priority beats age',
      due: '100',
      wallets: [
        wallet('old-low', 1000, { priority: 10, createdAt: new Date('2025-01-01T00:00:00Z') }),
        wallet('new-high', 1000, { priority: 2, createdAt: new Date('2026-02-01T00:00:00Z') }),
      ],
      expected: [['new-high', '100']],
      total: '100',
      remaining: '0',
    },
    {
      name: 'the first wallet covers everything: later wallets pay nothing and are not listed',
      due: '50',
      wallets: [wallet('A', 100, { priority: 1 }), wallet('B', 100, { priority: 2 })],
      expected: [['A', '50']],
      total: '50',
      remaining: '0',
    },
    {
      name: 'wallets short of the amount due: the rest stays due',
      due: '1000',
      wallets: [wallet('A', 300, { priority: 1 }), wallet('B', '200.5', { priority: 2 })],
      expected: [
        ['A', '300'],
        ['B', '200'],
      ],
      total: '500',
      remaining: '500',
    },
    {
      name: 'a terminated wallet pays nothing',
      due: '100',
      wallets: [wallet('gone', 1000, { priority: 1, status: 'terminated' }), wallet('B', 1000)],
      expected: [['B', '100']],
      total: '100',
      remaining: '0',
    },
    {
      name: 'a wallet expiring exactly now is expired',
      due: '100',
      wallets: [wallet('expired', 1000, { priority: 1, expirationAt: AT }), wallet('B', 1000)],
      expected: [['B', '100']],
      total: '100',
      remaining: '0',
    },
    {
      name: 'a wallet expiring one millisecond later still pays',
      due: '100',
      wallets: [wallet('A', 1000, { priority: 1, expirationAt: new Date(AT.getTime() + 1) }), wallet('B', 1000)],
      expected: [['A', '100']],
      total: '100',
      remaining: '0',
    },
    {
      name: 'empty and negative balances are skipped, never listed as zero',
      due: '100',
      wallets: [wallet('empty', 0, { priority: 1 }), wallet('negative', -50, { priority: 2 }), wallet('C', 30, { priority: 3 })],
      expected: [['C', '30']],
      total: '30',
      remaining: '70',
    },
    {
      name: 'nothing due: nothing paid',
      due: '0',
      wallets: [wallet('A', 1000)],
      expected: [],
      total: '0',
      remaining: '0',
    },
    {
      name: 'a negative amount due pays nothing and leaves nothing due',
      due: '-10',
      wallets: [wallet('A', 1000)],
      expected: [],
      total: '0',
      remaining: '0',
    },
    {
      name: 'no wallets',
      due: '100',
      wallets: [],
      expected: [],
      total: '0',
      remaining: '100',
    },
    {
      // prepaid_credit_amount is an invoice-level amount: whole cents (billing-rules.md, Numbers).
      name: 'a fractional balance pays its whole cents and keeps the fraction',
      due: '1500',
      wallets: [wallet('A', '1234.5678', { priority: 1 }), wallet('B', '1000', { priority: 2 })],
      expected: [
        ['A', '1234'],
        ['B', '266'],
      ],
      total: '1500',
      remaining: '0',
    },
    {
      name: 'a balance below one cent pays nothing',
      due: '10',
      wallets: [wallet('A', '0.9999', { priority: 1 }), wallet('B', '0.01', { priority: 2 })],
      expected: [],
      total: '0',
      remaining: '10',
    },
    {
      name: 'a wallet terminated after the finalization instant still pays for it',
      due: '100',
      wallets: [wallet('later', 1000, { priority: 1, status: 'terminated', terminatedAt: new Date(AT.getTime() + 1) }), wallet('B', 1000)],
      expected: [['later', '100']],
      total: '100',
      remaining: '0',
    },
    {
      name: 'a wallet terminated at the finalization instant pays nothing',
      due: '100',
      wallets: [wallet('then', 1000, { priority: 1, status: 'terminated', terminatedAt: AT }), wallet('B', 1000)],
      expected: [['B', '100']],
      total: '100',
      remaining: '0',
    },
  ])('$name', ({ due, wallets, expected, total, remaining }) => {
    const result = allocateWallets(due, wallets, AT);
    expect(paid(result)).toEqual(expected);
    expect(result.totalCents.toString()).toBe(total);
    expect(result.remainingCents.toString()).toBe(remaining);
  });

  it('does not depend on the order the wallets are given in, and does not reorder the input', () => {
    const wallets = [wallet('c', 100, { priority: 3 }), wallet('a', 100, { priority: 1 }), wallet('b', 100, { priority: 2 })];
    const before = wallets.map((w) => w.id);
    expect(paid(allocateWallets(250, wallets, AT))).toEqual([
      ['a', '100'],
      ['b', '100'],
      ['c', '50'],
    ]);
    expect(paid(allocateWallets(250, [...wallets].reverse(), AT))).toEqual([
      ['a', '100'],
      ['b', '100'],
      ['c', '50'],
    ]);
    expect(wallets.map((w) => w.id)).toEqual(before);
  });
});

describe('isWalletUsable', () => {
  it.each([
    { name: 'active, no expiration', w: wallet('a', 1), usable: true },
    { name: 'active, undefined expiration', w: wallet('a', 1, { expirationAt: undefined }), usable: true },
    { name: 'active, expires later', w: wallet('a', 1, { expirationAt: new Date('2026-03-02T00:00:00Z') }), usable: true },
    { name: 'active, expired earlier', w: wallet('a', 1, { expirationAt: new Date('2026-02-01T00:00:00Z') }), usable: false },
    { name: 'terminated', w: wallet('a', 1, { status: 'terminated' }), usable: false },
  ])('$name: $usable', ({ w, usable }) => {
    expect(isWalletUsable(w, AT)).toBe(usable);
  });
});

describe('wallet allocation invariants (property-based)', () => {
  const walletArb = fc.record({
    id: fc.uuid(),
    balanceCents: fc
      .tuple(fc.integer({ min: -1000, max: 1_000_000 }), fc.integer({ min: 0, max: 9999 }))
      .map(([whole, fraction]) => `${whole}.${String(fraction).padStart(4, '0')}`),
    priority: fc.integer({ min: 1, max: 50 }),
    createdAt: fc.date({ min: new Date('2020-01-01T00:00:00Z'), max: new Date('2026-03-01T00:00:00Z'), noInvalidDate: true }),
    status: fc.constantFrom<'active' | 'terminated'>('active', 'active', 'terminated'),
    expirationAt: fc.option(fc.date({ min: new Date('2026-02-01T00:00:00Z'), max: new Date('2026-04-01T00:00:00Z'), noInvalidDate: true })),
  });
  const input = fc.tuple(fc.integer({ min: -1000, max: 3_000_000 }), fc.uniqueArray(walletArb, { selector: (w) => w.id, maxLength: 8 }));

  it('never exceeds a balance or the amount due, and pays as much as usable wallets allow', () => {
    fc.assert(
      fc.property(input, ([due, wallets]) => {
        const result = allocateWallets(due, wallets, AT);
        const byId = new Map(wallets.map((w) => [w.id, w]));
        let total = dec(0);
        for (const allocation of result.allocations) {
          const source = byId.get(allocation.walletId)!;
          expect(isWalletUsable(source, AT)).toBe(true);
          expect(allocation.amountCents.greaterThan(0)).toBe(true);
          expect(allocation.amountCents.lessThanOrEqualTo(dec(source.balanceCents))).toBe(true);
          expect(allocation.amountCents.isInteger()).toBe(true);
          total = total.plus(allocation.amountCents);
        }
        expect(new Set(result.allocations.map((a) => a.walletId)).size).toBe(result.allocations.length);
        expect(total.equals(result.totalCents)).toBe(true);
        expect(total.lessThanOrEqualTo(Math.max(due, 0))).toBe(true);
        const available = wallets
          .filter((w) => isWalletUsable(w, AT) && dec(w.balanceCents).floor().greaterThan(0))
          .reduce((acc, w) => acc.plus(dec(w.balanceCents).floor()), dec(0));
        const expectedTotal = due > 0 ? (available.lessThan(due) ? available : dec(due)) : dec(0);
        expect(result.totalCents.equals(expectedTotal)).toBe(true);
        expect(result.remainingCents.equals(dec(Math.max(due, 0)).minus(total))).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('consumes in priority order: only the last paying wallet may keep a balance', () => {
    fc.assert(
      fc.property(input, ([due, wallets]) => {
        const result = allocateWallets(due, wallets, AT);
        const byId = new Map(wallets.map((w) => [w.id, w]));
        result.allocations.forEach((allocation, index) => {
          const source = byId.get(allocation.walletId)!;
          if (index < result.allocations.length - 1) {
            expect(allocation.amountCents.equals(dec(source.balanceCents).floor())).toBe(true);
            const next = byId.get(result.allocations[index + 1]!.walletId)!;
            expect(
              source.priority < next.priority ||
                (source.priority === next.priority && source.createdAt.getTime() <= next.createdAt.getTime()),
            ).toBe(true);
          }
        });
      }),
      { numRuns: 300 },
    );
  });
});
