import type { InstrumentationNodeModuleDefinition } from '@opentelemetry/instrumentation';
import { FastifyInstrumentation } from '@opentelemetry/instrumentation-fastify';

/**
 * FastifyInstrumentation replaces the `fastify` module's exports with a wrapping factory that
 * carries only `fastify`, `default` and `errorCodes` (open-telemetry/opentelemetry-js-contrib#2633
 * added the last one; the package is unmaintained since). Every other named export would be
 * undefined once patched, `LogController` among them, which src/api/app.ts extends at load time.
 * This copies the missing ones onto the wrapper.
 */
export class FastifyInstrumentationKeepingExports extends FastifyInstrumentation {
  override init(): InstrumentationNodeModuleDefinition[] {
    const definitions = super.init();
    for (const definition of definitions) {
      const patch = definition.patch;
      if (!patch) continue;
      definition.patch = (moduleExports: Record<string, unknown>, moduleVersion?: string) => {
        const patched = patch(moduleExports, moduleVersion) as Record<string, unknown>;
        for (const [name, value] of Object.entries(moduleExports)) if (!(name in patched)) patched[name] = value;
        return patched;
      };
    }
    return definitions;
  }
}
