import type { z } from 'zod';
import type { AggregationResult } from '../usage-types';
import * as custom from './custom';
import * as dynamic from './dynamic';
import * as graduated from './graduated';
import * as graduatedPercentage from './graduated-percentage';
import * as packageModel from './package';
import * as percentage from './percentage';
import type { ChargeModelResult } from './shared';
import * as standard from './standard';
import * as volume from './volume';

export type { ChargeModelResult } from './shared';
export type { CustomProperties } from './custom';
export type { DynamicProperties } from './dynamic';
export type { GraduatedProperties } from './graduated';
export type { GraduatedPercentageProperties } from './graduated-percentage';
export type { PackageProperties } from './package';
export type { PercentageProperties } from './percentage';
export type { StandardProperties } from './standard';
export type { VolumeProperties } from './volume';

export const CHARGE_MODELS = [
  'standard',
  'graduated',
  'volume',
  'package',
  'percentage',
  'graduated_percentage',
  'dynamic',
  'custom',
] as const;

export type ChargeModel = (typeof CHARGE_MODELS)[number];

/** What every module of this folder provides: how its properties look, and how it prices. */
export interface ChargeModelCalculator<Properties> {
  propertiesSchema: z.ZodType<Properties>;
  compute(properties: Properties, aggregation: AggregationResult): ChargeModelResult;
}

export interface ChargeModelProperties {
  standard: standard.StandardProperties;
  graduated: graduated.GraduatedProperties;
  volume: volume.VolumeProperties;
  package: packageModel.PackageProperties;
  percentage: percentage.PercentageProperties;
  graduated_percentage: graduatedPercentage.GraduatedPercentageProperties;
  dynamic: dynamic.DynamicProperties;
  custom: custom.CustomProperties;
}

/** Every model by name; typed so that a module drifting from the shared interface fails to compile. */
export const chargeModelCalculators: { [M in ChargeModel]: ChargeModelCalculator<ChargeModelProperties[M]> } = {
  standard,
  graduated,
  volume,
  package: packageModel,
  percentage,
  graduated_percentage: graduatedPercentage,
  dynamic,
  custom,
};

/**
 * Each model's zod schema of `properties`, for the plan API: strict objects, so a wrong shape is a
 * 422 whose issue path names the wrong field (an unknown key is an `unrecognized_keys` issue at the
 * object's path, with the key in `keys`).
 */
export const chargePropertiesSchemas = {
  standard: standard.propertiesSchema,
  graduated: graduated.propertiesSchema,
  volume: volume.propertiesSchema,
  package: packageModel.propertiesSchema,
  percentage: percentage.propertiesSchema,
  graduated_percentage: graduatedPercentage.propertiesSchema,
  dynamic: dynamic.propertiesSchema,
  custom: custom.propertiesSchema,
} as const satisfies { [M in ChargeModel]: (typeof chargeModelCalculators)[M]['propertiesSchema'] };

export function chargePropertiesSchema<M extends ChargeModel>(model: M): (typeof chargePropertiesSchemas)[M] {
  return chargePropertiesSchemas[model];
}

/**
 * Prices one bucket of usage. `properties` are parsed with the model's schema here (they come from
 * storage as plain JSON), which also fills defaults; invalid ones throw the ZodError, since plan
 * creation should have refused them.
 */
export function computeChargeModel(model: ChargeModel, properties: unknown, aggregation: AggregationResult): ChargeModelResult {
  switch (model) {
    case 'standard':
      return standard.compute(standard.propertiesSchema.parse(properties), aggregation);
    case 'graduated':
      return graduated.compute(graduated.propertiesSchema.parse(properties), aggregation);
    case 'volume':
      return volume.compute(volume.propertiesSchema.parse(properties), aggregation);
    case 'package':
      return packageModel.compute(packageModel.propertiesSchema.parse(properties), aggregation);
    case 'percentage':
      return percentage.compute(percentage.propertiesSchema.parse(properties), aggregation);
    case 'graduated_percentage':
      return graduatedPercentage.compute(graduatedPercentage.propertiesSchema.parse(properties), aggregation);
    case 'dynamic':
      return dynamic.compute(dynamic.propertiesSchema.parse(properties), aggregation);
    case 'custom':
      return custom.compute(custom.propertiesSchema.parse(properties), aggregation);
    default: {
      const unknownModel: never = model;
      throw new Error(`unknown charge model: ${String(unknownModel)}`);
    }
  }
}

export function isChargeModel(value: unknown): value is ChargeModel {
  return typeof value === 'string' && (CHARGE_MODELS as readonly string[]).includes(value);
}
