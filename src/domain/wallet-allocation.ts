import { dec, Dec, type DecimalInput } from './money';

/**
 * Which prepaid wallets pay how much of an invoice at finalization (specification, "Wallets":
 * active and not expired wallets by priority, then creation date; each pays the smaller of its
 * balance and what remains).
 */

export type WalletStatus = 'active' | 'terminated';

export interface AllocatableWallet {
  id: string;
  /** Balance in minor units (credits x rate_amount). */
  balanceCents: DecimalInput;
  /** 1 is consumed first, 50 last. */
  priority: number;
  createdAt: Date;
  status: WalletStatus;
  expirationAt?: Date | null;
  /** When it was terminated: a wallet terminated after the finalization instant still paid then. */
  terminatedAt?: Date | null;
}

export interface WalletAllocation {
  walletId: string;
  amountCents: Dec;
}

export interface WalletAllocationResult {
  /** In consumption order; wallets that pay nothing are left out. */
  allocations: WalletAllocation[];
  /** The invoice's `prepaid_credit_amount`. */
  totalCents: Dec;
  /** What is still due after the wallets. */
  remainingCents: Dec;
}

/**
 * A wallet whose `expiration_at` has passed pays nothing even if the hourly expiry task has not
 * terminated it yet: the forfeited balance must not depend on when that task last ran.
 */
export function isWalletUsable(wallet: AllocatableWallet, at: Date): boolean {
  const activeAt = wallet.status === 'active' || (wallet.terminatedAt != null && wallet.terminatedAt.getTime() > at.getTime());
  if (!activeAt) return false;
  return !wallet.expirationAt || wallet.expirationAt.getTime() > at.getTime();
}

function compareConsumptionOrder(a: AllocatableWallet, b: AllocatableWallet): number {
  // The id breaks the last tie so that the same wallets always pay the same way.
  return a.priority - b.priority || a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/**
 * Allocates `amountDueCents` over the wallets. A non-positive amount due or balance pays nothing;
 * no amount is rounded, so the total equals the amount due exactly whenever the wallets can cover it.
 */
export function allocateWallets(amountDueCents: DecimalInput, wallets: readonly AllocatableWallet[], at: Date): WalletAllocationResult {
  const due = dec(amountDueCents);
  let remaining = due.greaterThan(0) ? due : new Dec(0);
  const allocations: WalletAllocation[] = [];
  const ordered = wallets.filter((wallet) => isWalletUsable(wallet, at)).sort(compareConsumptionOrder);
  for (const wallet of ordered) {
    if (!remaining.greaterThan(0)) break;
    // Whole cents only: nobody pays a fraction of a cent, so a wallet's fraction of one stays in it.
    const balance = dec(wallet.balanceCents).toDecimalPlaces(0, Dec.ROUND_DOWN);
    if (!balance.greaterThan(0)) continue;
    const amountCents = Dec.min(balance, remaining);
    allocations.push({ walletId: wallet.id, amountCents });
    remaining = remaining.minus(amountCents);
  }
  const totalCents = allocations.reduce((acc, a) => acc.plus(a.amountCents), new Dec(0));
  return { allocations, totalCents, remainingCents: remaining };
}
