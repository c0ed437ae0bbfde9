import type { Models } from '../src/db';
import { createDiagnosticActivities } from './diagnostics';

/** What activities need from the outside world; tests pass real MongoDB and fake providers. */
export interface ActivityDeps {
  models: Models;
}

/** Every activity the worker registers, built from its dependencies (style.md). */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createDiagnosticActivities(deps.models),
  };
}

export type Activities = ReturnType<typeof createActivities>;
