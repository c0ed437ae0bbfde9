/**
 * Typed failures with a name. Services and routes throw these; one Fastify error handler maps them
 * to the uniform error body of api-contract.md. Below 500 the message is shown to the caller.
 */
export interface FieldError {
  path: string;
  message: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly errors: FieldError[] = [],
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export class NotFound extends ApiError {
  override readonly name = 'NotFound';
  constructor(message = 'Resource not found', code = 'not_found') {
    super(404, code, message);
  }
}

export class Unauthorized extends ApiError {
  override readonly name = 'Unauthorized';
  constructor(message = 'Missing or invalid API key', code = 'unauthorized') {
    super(401, code, message);
  }
}

export class Conflict extends ApiError {
  override readonly name = 'Conflict';
  constructor(message: string, extra: Record<string, unknown> = {}, code = 'already_exists') {
    super(409, code, message, [], extra);
  }
}

export class Validation extends ApiError {
  override readonly name = 'Validation';
  constructor(errors: FieldError[], code = 'validation_error') {
    super(422, code, errors.map((e) => (e.path ? `${e.path}: ${e.message}` : e.message)).join('; '), errors);
  }

  static field(path: string, message: string): Validation {
    return new Validation([{ path, message }]);
  }
}

export class BadRequest extends ApiError {
  override readonly name = 'BadRequest';
  constructor(message: string, code = 'bad_request') {
    super(400, code, message);
  }
}

export class InvalidTransition extends ApiError {
  override readonly name = 'InvalidTransition';
  constructor(message: string, code = 'invalid_state_transition') {
    super(400, code, message);
  }
}

export class RateLimited extends ApiError {
  override readonly name = 'RateLimited';
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(429, 'rate_limited', message);
  }
}
