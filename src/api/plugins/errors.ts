import type { FastifyError, FastifyInstance } from 'fastify';
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from 'fastify-type-provider-zod';
import { ApiError, type FieldError } from '../../errors';

interface ErrorPayload {
  status: number;
  code: string;
  message: string;
  errors: FieldError[];
  request_id?: string;
  [extra: string]: unknown;
}

function body(status: number, code: string, message: string, errors: FieldError[] = []): ErrorPayload {
  return { status, code, message, errors };
}

/**
 * One error handler for the whole API: typed failures, schema validation, malformed JSON, unknown
 * routes. Below 500 the message is the caller's to read; a 500 says only "internal error" and the
 * request id, and is logged with its stack.
 */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    let payload: ErrorPayload;
    if (error instanceof ApiError) {
      payload = { ...body(error.status, error.code, error.message, error.errors), ...error.extra };
    } else if (hasZodFastifySchemaValidationErrors(error)) {
      const errors = error.validation.map((issue) => {
        const path = issue.instancePath.replace(/^\//, '').replaceAll('/', '.');
        const keys = (issue.params as { keys?: unknown }).keys;
        // Unknown fields: name each one, so a typo is obvious.
        if (issue.keyword === 'unrecognized_keys' && Array.isArray(keys)) {
          return keys.map((key) => ({ path: path ? `${path}.${String(key)}` : String(key), message: 'Unknown field' }));
        }
        return [{ path, message: issue.message ?? 'Invalid value' }];
      });
      const flat = errors.flat();
      const where = error.validationContext === 'body' ? '' : `${error.validationContext ?? 'request'} `;
      const message = flat.map((e) => `${where}${e.path || '(root)'}: ${e.message}`).join('; ');
      payload = body(422, 'validation_error', message, flat);
    } else if (isResponseSerializationError(error)) {
      request.log.error({ err: error, issues: error.cause.issues }, 'response does not match its schema');
      payload = body(500, 'internal_error', 'Internal server error');
    } else if (error.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || (error.statusCode === 400 && error instanceof SyntaxError)) {
      payload = body(400, 'invalid_json', 'The request body is not valid JSON');
    } else if (error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') {
      payload = body(400, 'invalid_json', 'The request body is empty; send a JSON object');
    } else if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      payload = body(415, 'unsupported_media_type', 'Send the body as application/json');
    } else if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      payload = body(413, 'payload_too_large', 'The request body is too large');
    } else if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
      payload = body(error.statusCode, 'bad_request', error.message);
    } else if (error.statusCode === 503) {
      // Load shedding (@fastify/under-pressure, which has set Retry-After): not a fault, a retry later works.
      payload = body(503, 'service_unavailable', 'The service is overloaded; retry after the delay in Retry-After');
    } else {
      request.log.error({ err: error }, 'unhandled error');
      payload = body(500, 'internal_error', 'Internal server error');
    }
    payload.request_id = request.id;
    if (payload.status === 429 && 'retryAfterSeconds' in error) {
      void reply.header('Retry-After', String((error as { retryAfterSeconds: number }).retryAfterSeconds));
    }
    return reply.status(payload.status).send(payload);
  });

  app.setNotFoundHandler((request, reply) => {
    return reply
      .status(404)
      .send({ ...body(404, 'not_found', `No route ${request.method} ${request.url.split('?')[0]}`), request_id: request.id });
  });
}
