/**
 * Workflow ids are derived from entity ids (architecture.md rule 3), so a retried start finds the
 * running workflow instead of creating a second one.
 */
export const workflowIds = {
  subscription: (id: string) => `subscription/${id}`,
  invoice: (id: string) => `invoice/${id}`,
  payment: (id: string) => `payment/${id}`,
  wallet: (id: string) => `wallet/${id}`,
  dunningCampaign: (id: string) => `dunning-campaign/${id}`,
  paymentRequest: (id: string) => `payment-request/${id}`,
  webhook: (id: string) => `webhook/${id}`,
  diagnostic: (id: string) => `diagnostic/${id}`,
  /** One advance of a test clock (a clock advances once at a time; each target is a new workflow). */
  testClockAdvance: (id: string, target: string) => `test-clock/${id}/advance/${target}`,
  /** A plan simulation over several customers' past usage (POST /v1/plans/{id}/simulate). */
  planSimulation: (id: string) => `plan-simulation/${id}`,
} as const;
