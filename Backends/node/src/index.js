// @messagebird/realtime-backend: rooms, channels and webhooks for an app's Node server
// (Backends/README.md).
export { Realtime, MAX_ROOMS, MAX_WEBHOOK_BYTES, MIN_LIFETIME } from "./realtime.js";
export { authHandler, webhookHandler, readBody, MAX_BODY_BYTES } from "./http.js";
export { CrossOrigin, MAX_PREFLIGHT_HEADERS, PREFLIGHT_MAX_AGE } from "./cors.js";
export { ApiError, ChannelError, RuleError, WebhookError } from "./errors.js";
export { canonicalJSON } from "./json.js";
export { isValidPattern, isValidRoomName, matchRoom, patternsOverlap, MAX_NAME_LENGTH } from "./names.js";
export { makeRule, MAX_HISTORY, MAX_SPAN } from "./rules.js";
export { signedQuery, signToken } from "./signing.js";
