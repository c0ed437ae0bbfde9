// Every workflow the worker runs (the exported names are the workflow types). Deterministic code
// only: @temporalio/workflow, src/domain and type-only imports (eslint enforces it). Each workflow's
// start options and messages are in <workflow>.messages.ts next to it.
export { pingWorkflow, type PingResult } from './diagnostics';
export { webhookDeliveryWorkflow, type WebhookDeliveryResult } from './webhook-delivery';
export type { WebhookDeliveryInput } from './webhook-delivery.messages';
export { invoiceWorkflow } from './invoice';
export type { InvoiceWorkflowInput } from './invoice.messages';
export { walletWorkflow, type WalletWorkflowResult } from './wallet';
export type { WalletWorkflowInput } from './wallet.messages';
export { subscriptionWorkflow } from './subscription';
export type { SubscriptionWorkflowInput } from './subscription.messages';
export { reconcileSubscriptionsWorkflow } from './reconciler';
export type { ReconcileTotals, ReconcileWorkflowInput } from './reconciler.messages';
export { sweepIdempotencyKeysWorkflow } from './idempotency-keys';
export { testClockAdvanceWorkflow } from './test-clock';
export type { TestClockAdvanceInput } from './test-clock.messages';
export { paymentWorkflow } from './payment';
export type { PaymentWorkflowInput } from './payment.messages';
export { paymentRequestWorkflow } from './payment-request';
export type { PaymentRequestWorkflowInput } from './payment-request.messages';
export { dunningCampaignWorkflow } from './dunning-campaign';
export type { DunningCampaignWorkflowInput } from './dunning-campaign.messages';
export { planSimulationWorkflow } from './plan-simulation';
export type { PlanSimulationInput } from './plan-simulation.messages';
