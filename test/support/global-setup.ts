import type { TestProject } from 'vitest/node';
import { type RunningServer, startMongoStandIn, startTemporalDevServer } from './servers';

declare module 'vitest' {
  export interface ProvidedContext {
    /** mongodb://host:port of the run's MongoDB server (no database name). */
    mongoUrl: string;
    /** True when the run uses the MongoDB stand-in (not a real MongoDB from TEST_MONGODB_URL). */
    mongoIsStandIn: boolean;
    /** host:port of the run's Temporal dev server. */
    temporalAddress: string;
  }
}

/**
 * Starts fresh servers once per test run: the MongoDB stand-in (in memory) and a Temporal dev
 * server, unless TEST_MONGODB_URL / TEST_TEMPORAL_ADDRESS point at running ones (for example a
 * real MongoDB, to run the compatibility test against it). Each test file uses its own database
 * and its own task queue, so files do not see each other's data.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const started: RunningServer[] = [];
  const [mongo, temporal] = await Promise.all([
    process.env.TEST_MONGODB_URL ? { address: process.env.TEST_MONGODB_URL, stop: async () => {} } : startMongoStandIn(),
    process.env.TEST_TEMPORAL_ADDRESS ? { address: process.env.TEST_TEMPORAL_ADDRESS, stop: async () => {} } : startTemporalDevServer(),
  ]);
  started.push(mongo, temporal);
  project.provide('mongoUrl', mongo.address);
  project.provide('mongoIsStandIn', !process.env.TEST_MONGODB_URL);
  project.provide('temporalAddress', temporal.address);
  return async () => {
    await Promise.all(started.map((s) => s.stop()));
  };
}
