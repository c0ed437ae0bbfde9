import type { AggregationContext, AggregationMetric } from '../../../src/domain/aggregation';
import type { UsageEvent } from '../../../src/domain/usage-types';

let sequence = 0;

export function ev(timestamp: string, properties: Record<string, unknown> = {}): UsageEvent {
  sequence += 1;
  return { transactionId: `tx-${sequence}`, timestamp: new Date(timestamp), properties };
}

export function metric(overrides: Partial<AggregationMetric> & Pick<AggregationMetric, 'aggregation_type'>): AggregationMetric {
  return { recurring: false, field_name: 'value', ...overrides };
}

/** March 2024 in UTC: 31 days, `[Mar 1, Apr 1)`. */
export const march: AggregationContext = {
  from: new Date('2024-03-01T00:00:00Z'),
  to: new Date('2024-04-01T00:00:00Z'),
};

export function strings(values: readonly { toFixed(): string }[]): string[] {
  return values.map((v) => v.toFixed());
}
