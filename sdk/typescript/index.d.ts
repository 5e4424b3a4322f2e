// Types of @macupos/client. Each result interface names the route and status it mirrors with an `@openapi`
// tag (`METHOD PATH STATUS [PROPERTY]`); test/openapi.test.js checks those interfaces against the schemas of
// the running server's /v1/openapi.json, and the other tests check real answers against them.

export type KeyScope = "read" | "write";
export type WebhookEvent = "handoff.ready" | "session.ingested" | "session.forgotten";
export type DeliveryStatus = "pending" | "delivered" | "failed";
/** An ISO-8601 time as a string ("Z" allowed), or a Date (sent as its ISO form). */
export type Instant = string | Date;
/** A time in an answer: Unix time in seconds. */
export type UnixTime = number;
export type Body = string | Uint8Array | ArrayBuffer | ArrayBufferView | Blob;

export interface ClientOptions {
  /** The service's address, e.g. process.env.MACUPOS_MEMORY_URL. */
  url: string;
  /** An API key, e.g. process.env.MACUPOS_API_KEY. */
  apiKey: string;
  /** Each request's deadline (default 120 000 ms). */
  timeoutMs?: number;
  /** Retries of a 429 or 503 answer (default 2). */
  maxRetries?: number;
  /** The longest wait before a retry, whatever Retry-After asks (default 30 000 ms). */
  maxRetryDelayMs?: number;
  /** The fetch to use (default: the global fetch). */
  fetch?: typeof fetch;
  /** How a retry waits (default: setTimeout); tests pass their own clock. */
  sleep?: (ms: number) => Promise<void>;
  userAgent?: string;
}

/** The X-RateLimit-* headers of an answer: requests per window, left now, seconds until the bucket is full. */
export interface RateLimit {
  limit: number | null;
  remaining: number | null;
  reset: number | null;
}

/** @openapi post /v1/transcripts 200 first_problems */
export interface LineProblem {
  line: number;
  reason: string;
}

/** @openapi post /v1/transcripts 200 counts */
export interface UploadCounts {
  new: number;
  updated: number;
  unchanged: number;
}

/** @openapi post /v1/transcripts 200 */
export interface TranscriptUpload {
  /** The file's sessions still remembered (a forgotten one is left out). */
  sessions: string[];
  problems: number;
  first_problems: LineProblem[];
  lines_skipped: Record<string, number>;
  counts: UploadCounts;
  handoffs_extracted: number;
  /** The size received (after gunzip). */
  bytes: number;
}

/** @openapi post /v1/handoffs 200 */
export interface HandoffImport {
  session_id: string;
  imported: number;
}

/** How a `branch` preference placed one result (the document leaves its fields open). */
export interface BranchPreference {
  branch: string;
  same: boolean;
  score_rank: number;
}

/** @openapi get /v1/get 200 */
export interface GetResult {
  session_id: string;
  score: number;
  date: string;
  headline: string;
  projects: string[];
  kind: string;
  /** Set when `branch` reordered the results. */
  branch_preference?: BranchPreference;
  /** The score's parts, with `explain: true`. */
  explain?: Record<string, unknown>;
}

export interface GetParams {
  q?: string;
  project?: string;
  days_back?: number;
  max?: number;
  as_of?: Instant;
  branch?: string;
  explain?: boolean;
}

/** @openapi get /v1/search 200 */
export interface SearchHit {
  session_id: string;
  kind: string;
  /** The parent session of a subagent run, "" (or null) otherwise. */
  parent_id: string | null;
  snippet: string;
  score: number;
}

/** @openapi get /v1/handoffs 200 handoffs */
export interface HandoffListing {
  session_id: string;
  date: string;
  headline: string;
  projects: string[];
  keywords?: string[];
  /** How much the session did (0 for a trivial one). */
  substance?: number;
  kind: string;
  source?: string;
}

/** @openapi get /v1/handoffs 200 */
export interface HandoffPage {
  handoffs: HandoffListing[];
  /** The next page's cursor; null on the last page. */
  next_cursor: string | null;
}

export interface HandoffParams {
  project?: string;
  since?: Instant;
  until?: Instant;
  limit?: number;
  cursor?: string | null;
}

/** @openapi delete /v1/sessions/{id} 200 */
export interface ForgetResult {
  forgotten: string[];
}

/** @openapi post /v1/script 200 */
export interface ScriptResult {
  output: string;
}

/** @openapi get /v1/stats 200 */
export interface Stats {
  tenant: string;
  facts: Record<string, number>;
  // The memory's counts: the document leaves them open (additionalProperties); today's server sends these.
  schema_version?: number;
  sources?: number;
  /** Sessions by kind. */
  sessions?: Record<string, number>;
  /** Sessions by extraction state. */
  extraction?: Record<string, number>;
  handoffs?: number;
  handoffs_indexed?: number;
  project_terms?: number;
  keyword_terms?: number;
  postings?: number;
  lines_skipped?: number;
  forgotten?: number;
}

/** @openapi get /v1/facts/tier 200 */
export interface FactsTier {
  lines: string[];
}

/** @openapi post /v1/keys 201 */
export interface NewKey {
  /** The key's public id (12 hex digits). */
  id: string;
  /** The key itself: shown this once. */
  key: string;
  scope: KeyScope;
  tenant: string;
  label: string;
  created_at: UnixTime;
}

/** @openapi get /v1/keys 200 keys */
export interface ApiKey {
  id: string;
  scope: KeyScope | "admin";
  tenant: string;
  label: string;
  created_at: UnixTime;
  revoked_at: UnixTime | null;
}

/** @openapi post /v1/webhooks 201 */
export interface NewWebhook {
  id: string;
  /** The signing secret: shown this once. */
  secret: string;
  url: string;
  events: WebhookEvent[];
  created_at: UnixTime;
}

/** @openapi get /v1/webhooks 200 webhooks */
export interface Webhook {
  id: string;
  url: string;
  events: WebhookEvent[];
  created_at: UnixTime;
}

/** @openapi get /v1/webhooks/{id}/deliveries 200 deliveries */
export interface Delivery {
  id: string;
  event: WebhookEvent;
  status: DeliveryStatus;
  attempts: number;
  /** The receiver's last HTTP status; null before any answer. */
  last_status: number | null;
  /** Why the last try failed ("" when it did not). */
  last_error?: string;
  created_at: UnixTime;
  delivered_at: UnixTime | null;
}

/** What a webhook receiver is sent (its raw body is what the signature covers).
 * @openapi #/components/schemas/WebhookEvent */
export interface WebhookPayload {
  /** The delivery id (also X-Macupos-Delivery): the same on every retry of one delivery. */
  id: string;
  event: WebhookEvent;
  created_at: UnixTime;
  tenant: string;
  data: Record<string, unknown>;
}

/** Every failure: an error answer (the service's `code` and `message`), a network failure or a timeout. */
export class MacuposError extends Error {
  constructor(
    message: string,
    fields?: {
      status?: number;
      code?: string;
      details?: Record<string, unknown>;
      retryAfter?: number | null;
      cause?: unknown;
    },
  );
  readonly name: "MacuposError";
  /** The HTTP status; 0 when no answer came (code "network" or "timeout"). */
  status: number;
  /** The service's stable error code ("not_found", "rate_limited", "script_error", …). */
  code: string;
  /** The error body's other fields (a script error's `line`, …). */
  details: Record<string, unknown>;
  /** Seconds the server asked to wait (Retry-After), when it did. */
  retryAfter: number | null;
}

export class MacuposClient {
  constructor(options: ClientOptions);
  readonly url: string;
  timeoutMs: number;
  maxRetries: number;
  maxRetryDelayMs: number;
  userAgent: string;
  /** The X-RateLimit-* headers of the last answer that carried them; null before. */
  rateLimit: RateLimit | null;

  uploadTranscript(name: string, transcript: Body, options?: { gzip?: boolean }): Promise<TranscriptUpload>;
  uploadHandoff(markdown: Body, options?: { name?: string }): Promise<HandoffImport>;
  get(params?: GetParams): Promise<GetResult[]>;
  getText(params?: GetParams): Promise<string>;
  search(q: string, options?: { limit?: number }): Promise<SearchHit[]>;
  session(id: string, options?: { format?: "markdown" | "handoff" }): Promise<string>;
  forget(id: string): Promise<ForgetResult>;
  handoffs(params?: HandoffParams): Promise<HandoffPage>;
  iterHandoffs(params?: HandoffParams): AsyncGenerator<HandoffListing, void, undefined>;
  script(script: string, options?: { asOf?: Instant }): Promise<ScriptResult>;
  /** The service's OpenAPI 3.1 document. */
  openapi(): Promise<Record<string, unknown>>;
  stats(): Promise<Stats>;
  factsTier(options?: { asOf?: Instant }): Promise<FactsTier>;
  export(): Promise<Uint8Array>;

  createKey(options: { scope: KeyScope; label?: string }): Promise<NewKey>;
  listKeys(): Promise<ApiKey[]>;
  revokeKey(id: string): Promise<void>;

  createWebhook(options: { url: string; events: WebhookEvent[] }): Promise<NewWebhook>;
  listWebhooks(): Promise<Webhook[]>;
  deleteWebhook(id: string): Promise<void>;
  webhookDeliveries(id: string): Promise<Delivery[]>;
}

/** Gzip bytes (CompressionStream). */
export function gzip(bytes: Uint8Array): Promise<Uint8Array>;
/** The seconds a Retry-After header value asks for; null when absent or unreadable. */
export function retryAfterSeconds(header: string | null | undefined, now?: number): number | null;

export const WEBHOOK_EVENTS: readonly WebhookEvent[];
/** `sha256=<hex>`: HMAC-SHA256 of `body` under `secret`, as X-Macupos-Signature-256 carries it. */
export function signWebhookBody(secret: string | Uint8Array, body: string | Uint8Array): Promise<string>;
/** Whether `signature` signs the raw `body` under `secret` (compared in constant time). */
export function verifyWebhookSignature(
  secret: string | Uint8Array,
  body: string | Uint8Array,
  signature: string | null | undefined,
): Promise<boolean>;
