// The libraries' typed errors: each has a `code` shared by the four backends (Backends/README.md).

/**
 * A rule refused when declared: `invalid_pattern`, `invalid_rule`, `master_key_required`,
 * `public_authorizer` (an authorizer on a public rule: its grant admits anyone without asking
 * the backend) or `public_overlap` (a public rule and another whose patterns can match the same
 * name).
 */
export class RuleError extends Error {
  /** @param {string} code the code. @param {string} message what is wrong. */
  constructor(code, message) { super(message); this.name = "RuleError"; this.code = code; }
}

/**
 * A channel authorisation or user signin refused: `invalid_socket_id`, `invalid_channel`,
 * `public_channel`, `member_required`, `member_not_allowed`, `invalid_member`,
 * `master_key_required`, `invalid_user_data` (Swift: `AuthorizationSignerError.code`).
 */
export class ChannelError extends Error {
  /** @param {string} code the code. @param {string} message what is wrong. */
  constructor(code, message) { super(message); this.name = "ChannelError"; this.code = code; }
}

/** A webhook refused: `bad_key`, `bad_signature` or `malformed` (answer 401 and ignore it). */
export class WebhookError extends Error {
  /** @param {string} code the code. @param {string} message what is wrong. */
  constructor(code, message) { super(message); this.name = "WebhookError"; this.code = code; }
}

/** A request to the realtime server's HTTP API failed: `status` is the HTTP status, or 0 when none arrived. */
export class ApiError extends Error {
  /** @param {number} status the HTTP status. @param {string} message what the server said. */
  constructor(status, message) { super(message); this.name = "ApiError"; this.status = status; }
}
