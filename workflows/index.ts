// Every workflow the worker runs. Deterministic code only: @temporalio/workflow, src/domain and
// type-only imports (eslint enforces it).
export { pingWorkflow } from './diagnostics';
