// The worker process's tracing, started as src/worker.ts's first import: the instrumentations patch
// `http` (the activities' outgoing calls) as it is required, so this must run before anything loads it.
import { bootTracing, type Tracing } from './index';

export const tracing: Tracing | undefined = bootTracing('billing-worker');
