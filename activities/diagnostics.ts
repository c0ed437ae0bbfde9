import type { Models } from '../src/db';

export function createDiagnosticActivities(models: Models) {
  return {
    /** Reads the organization and counts its live customers (used by pingWorkflow). */
    async describeOrganization(organizationId: string): Promise<{ organizationName: string | null; customers: number }> {
      const [organization, customers] = await Promise.all([
        models.Organization.findById(organizationId, { name: 1 }).lean(),
        models.Customer.countDocuments({ organization_id: organizationId, deleted_at: null }),
      ]);
      return { organizationName: organization?.name ?? null, customers };
    },
  };
}
