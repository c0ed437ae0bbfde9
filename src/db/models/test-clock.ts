import { Schema } from 'mongoose';
import { collectionOptions, uuidId, type BaseDoc } from '../base';

export type TestClockStatus = 'ready' | 'advancing';

/**
 * A simulated clock of an organization. Customers created on it (`customers.test_clock_id`) and
 * everything of theirs follow `frozen_time` instead of real time; an advance moves it forward and
 * drives their workflows through what falls due (src/test-clocks/).
 */
export interface TestClockDoc extends BaseDoc {
  organization_id: string;
  name: string | null;
  frozen_time: Date;
  status: TestClockStatus;
  /** While advancing: the instant the advance was asked for (frozen_time is already the target). */
  advance_started_at: Date | null;
  /** While advancing: the instant delivered to its workflows so far (workflows started meanwhile start there). */
  workflows_time?: Date | null;
  deleted_at: Date | null;
}

export const testClockSchema = new Schema<TestClockDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    name: { type: String, default: null },
    frozen_time: { type: Date, required: true },
    status: { type: String, enum: ['ready', 'advancing'], default: 'ready' },
    advance_started_at: { type: Date, default: null },
    workflows_time: { type: Date, default: null },
    deleted_at: { type: Date, default: null },
  },
  collectionOptions<TestClockDoc>('test_clocks'),
);

testClockSchema.index({ organization_id: 1, created_at: -1, _id: -1 });
