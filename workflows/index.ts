// Every workflow the worker runs. Deterministic code only: @temporalio/workflow, src/domain and
// type-only imports (eslint enforces it).
export { pingWorkflow, type PingResult } from './diagnostics';
export { webhookDeliveryWorkflow, type WebhookDeliveryInput, type WebhookDeliveryResult } from './webhook-delivery';
export { invoiceWorkflow, type InvoiceWorkflowInput } from './invoice';
export { walletWorkflow, type WalletWorkflowInput, type WalletWorkflowResult } from './wallet';
export { subscriptionWorkflow, type SubscriptionWorkflowInput } from './subscription';
export { reconcileSubscriptionsWorkflow, type ReconcileTotals, type ReconcileWorkflowInput } from './reconciler';
export { testClockAdvanceWorkflow, type TestClockAdvanceInput } from './test-clock';
