// The search attributes every entity workflow carries are declared once (src/temporal/search-attributes.ts)
// and registered in three places: npm start (scripts/start.sh), the tests' servers (from the same
// table) and docker-compose.yml. A name or a type missing from one of them fails a workflow start there.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SEARCH_ATTRIBUTE_TYPES } from '../../src/temporal/search-attributes';

const root = join(__dirname, '..', '..');
const declared = SEARCH_ATTRIBUTE_TYPES.map(({ name, type }) => `${name}=${type}`).sort();

describe('search attributes', () => {
  it('are declared with the types the operators query by', () => {
    expect(declared).toEqual(
      [
        'BillingAmountDueCents=Int',
        'BillingCustomerExternalId=Keyword',
        'BillingCustomerId=Keyword',
        'BillingEntityType=Keyword',
        'BillingInvoiceNumber=Keyword',
        'BillingOrganizationId=Keyword',
        'BillingPlanCode=Keyword',
        'BillingStatus=Keyword',
        'BillingSubscriptionExternalId=Keyword',
      ].sort(),
    );
  });

  it('are all registered by npm start', () => {
    const script = readFileSync(join(root, 'scripts', 'start.sh'), 'utf8');
    const list = /SEARCH_ATTRIBUTES=\(([^)]*)\)/.exec(script)?.[1] ?? '';
    expect(list.split(/\s+/).filter(Boolean).sort()).toEqual(declared);
  });

  it('are all registered by docker-compose.yml', () => {
    const compose = readFileSync(join(root, 'docker-compose.yml'), 'utf8');
    const list = /attrs="([^"]*)"/.exec(compose)?.[1] ?? '';
    expect(list.split(/\s+/).filter(Boolean).sort()).toEqual(declared);
  });
});
