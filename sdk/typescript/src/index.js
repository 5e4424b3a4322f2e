// @macupos/client: the Macupos memory service from JavaScript and TypeScript (types in ../index.d.ts).

export { MacuposClient, gzip } from "./client.js";
export { MacuposError, retryAfterSeconds } from "./errors.js";
export { WEBHOOK_EVENTS, signWebhookBody, verifyWebhookSignature } from "./webhooks.js";
