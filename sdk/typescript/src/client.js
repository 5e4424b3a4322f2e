// The client of the Macupos memory service. One method per route; every request goes through #send, which
// adds the key, the deadline and the retries on 429/503 (waiting what Retry-After asks, up to a cap).

import { MacuposError, errorFromResponse, retryAfterSeconds } from "./errors.js";

const VERSION = "0.1.0";
const RETRIED = new Set([429, 503]); // rate limited, or the memory busy: the server says when to come back

/** Bytes of a body given as text, bytes or a Blob. */
async function bytesOf(body) {
  if (typeof body === "string") return new TextEncoder().encode(body);
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  if (ArrayBuffer.isView(body)) return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  if (typeof Blob !== "undefined" && body instanceof Blob) return new Uint8Array(await body.arrayBuffer());
  throw new TypeError("a body must be a string, a Uint8Array, an ArrayBuffer or a Blob");
}

/** Gzip through the web platform's CompressionStream (node ≥ 18 and browsers alike: no node:zlib import). */
export async function gzip(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

function instant(value) {
  return value instanceof Date ? value.toISOString() : value;
}

function defaultSleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export class MacuposClient {
  #url;
  #apiKey;
  #fetch;
  #sleep;

  /** @param {import("../index.js").ClientOptions} options */
  constructor(options) {
    const { url, apiKey } = options ?? {};
    if (!url) throw new TypeError("url is required: the memory service's address (MACUPOS_MEMORY_URL)");
    if (!apiKey) throw new TypeError("apiKey is required (MACUPOS_API_KEY)");
    this.#url = String(url).replace(/\/+$/, "");
    this.#apiKey = apiKey;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#sleep = options.sleep ?? defaultSleep;
    this.timeoutMs = options.timeoutMs ?? 120_000;
    this.maxRetries = options.maxRetries ?? 2;
    this.maxRetryDelayMs = options.maxRetryDelayMs ?? 30_000; // a server asking for an hour is not waited on
    this.userAgent = options.userAgent ?? `macupos-client-js/${VERSION}`;
    /** The X-RateLimit-* headers of the last answer that had them; null before. */
    this.rateLimit = null;
  }

  get url() {
    return this.#url;
  }

  // -- the transport ---------------------------------------------------------------------------------------

  async #send(method, path, { query, body, headers = {}, expect = "json" } = {}) {
    const address = new URL(this.#url + path);
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value !== undefined && value !== null) address.searchParams.set(name, String(instant(value)));
    }
    const sent = { "X-API-Key": this.#apiKey, "User-Agent": this.userAgent, Accept: "application/json", ...headers };
    for (let attempt = 0; ; attempt++) {
      let response;
      try {
        response = await this.#fetch(address, {
          method,
          headers: sent,
          body,
          signal: AbortSignal.timeout(this.timeoutMs),
        });
      } catch (cause) {
        const timedOut = cause?.name === "TimeoutError";
        const why = timedOut ? `no answer within ${this.timeoutMs} ms` : `could not reach ${this.#url}`;
        throw new MacuposError(`${method} ${path}: ${why}`, { code: timedOut ? "timeout" : "network", cause });
      }
      this.#noteRate(response.headers);
      if (response.ok) return this.#read(response, expect, method, path);
      if (RETRIED.has(response.status) && attempt < this.maxRetries) {
        const asked = retryAfterSeconds(response.headers.get("retry-after"));
        const backoff = 500 * 2 ** attempt; // no Retry-After (a proxy's 503): a short exponential backoff
        await response.body?.cancel();
        await this.#sleep(Math.min(asked === null ? backoff : asked * 1000, this.maxRetryDelayMs));
        continue;
      }
      throw await errorFromResponse(response);
    }
  }

  #noteRate(headers) {
    const limit = headers.get("x-ratelimit-limit");
    if (limit === null) return;
    const number = (name) => {
      const v = Number(headers.get(name));
      return Number.isFinite(v) ? v : null;
    };
    this.rateLimit = {
      limit: number("x-ratelimit-limit"),
      remaining: number("x-ratelimit-remaining"),
      reset: number("x-ratelimit-reset"),
    };
  }

  async #read(response, expect, method, path) {
    if (response.status === 204 || expect === "none") {
      await response.body?.cancel();
      return undefined;
    }
    if (expect === "text") return response.text();
    if (expect === "bytes") return new Uint8Array(await response.arrayBuffer());
    const text = await response.text();
    try {
      return JSON.parse(text);
    } catch (cause) {
      throw new MacuposError(`${method} ${path}: the answer is not JSON`, {
        status: response.status,
        code: "bad_response",
        cause,
      });
    }
  }

  // -- uploads ---------------------------------------------------------------------------------------------

  /** One Claude Code JSONL or Codex rollout; gzipped on the way unless `gzip: false`. */
  async uploadTranscript(name, transcript, { gzip: compress = true } = {}) {
    const raw = await bytesOf(transcript);
    const headers = { "Content-Type": "application/octet-stream" };
    let body = raw;
    if (compress) {
      body = await gzip(raw);
      headers["Content-Encoding"] = "gzip";
    }
    return this.#send("POST", "/v1/transcripts", { query: { name }, body, headers });
  }

  /** One eywa-format handoff markdown; `name` (`YYYY/MM/DD/<session>.md`) is optional. */
  async uploadHandoff(markdown, { name } = {}) {
    const body = await bytesOf(markdown);
    return this.#send("POST", "/v1/handoffs", { query: { name }, body, headers: { "Content-Type": "text/markdown" } });
  }

  // -- reads -----------------------------------------------------------------------------------------------

  /** Grounding: the best handoffs for a query. */
  async get(params = {}) {
    return this.#send("GET", "/v1/get", { query: { ...params, format: "json" } });
  }

  /** The grounding as the quoted text an agent is given. */
  async getText(params = {}) {
    return this.#send("GET", "/v1/get", { query: { ...params, format: "text" }, expect: "text" });
  }

  /** Detail recall: the sessions whose words match. */
  async search(q, { limit } = {}) {
    return this.#send("GET", "/v1/search", { query: { q, limit } });
  }

  /** One session's rendered transcript (markdown), or its handoff with `format: "handoff"`. */
  async session(id, { format } = {}) {
    return this.#send("GET", `/v1/sessions/${encodeURIComponent(id)}`, { query: { format }, expect: "text" });
  }

  /** Forget a session and its subagents; later uploads leave them out. */
  async forget(id) {
    return this.#send("DELETE", `/v1/sessions/${encodeURIComponent(id)}`);
  }

  /** One page of handoffs, newest first; pass the page's `next_cursor` as `cursor` for the next one. */
  async handoffs(params = {}) {
    return this.#send("GET", "/v1/handoffs", { query: params });
  }

  /** Every handoff matching `params`, newest first, fetched a page (`limit`) at a time. */
  async *iterHandoffs(params = {}) {
    let cursor = params.cursor;
    do {
      const page = await this.handoffs({ ...params, cursor });
      yield* page.handoffs;
      cursor = page.next_cursor;
    } while (cursor);
  }

  /** Run a facts script (Tcl): all its changes or none. A failing script is a MacuposError `script_error`. */
  async script(script, { asOf } = {}) {
    const body = JSON.stringify(asOf === undefined ? { script } : { script, as_of: instant(asOf) });
    return this.#send("POST", "/v1/script", { body, headers: { "Content-Type": "application/json" } });
  }

  /** The service's OpenAPI document (every route, body and error). */
  async openapi() {
    return this.#send("GET", "/v1/openapi.json");
  }

  async stats() {
    return this.#send("GET", "/v1/stats");
  }

  async factsTier({ asOf } = {}) {
    return this.#send("GET", "/v1/facts/tier", { query: { as_of: asOf } });
  }

  /** The tenant's handoffs, facts snapshot and events log as gzip tar bytes. */
  async export() {
    return this.#send("GET", "/v1/export", { expect: "bytes", headers: { Accept: "application/gzip" } });
  }

  // -- keys (an admin key) ---------------------------------------------------------------------------------

  async createKey({ scope, label } = {}) {
    const body = JSON.stringify(label === undefined ? { scope } : { scope, label });
    return this.#send("POST", "/v1/keys", { body, headers: { "Content-Type": "application/json" } });
  }

  async listKeys() {
    return (await this.#send("GET", "/v1/keys")).keys;
  }

  async revokeKey(id) {
    await this.#send("DELETE", `/v1/keys/${encodeURIComponent(id)}`, { expect: "none" });
  }

  // -- webhooks --------------------------------------------------------------------------------------------

  async createWebhook({ url, events }) {
    const body = JSON.stringify({ url, events });
    return this.#send("POST", "/v1/webhooks", { body, headers: { "Content-Type": "application/json" } });
  }

  async listWebhooks() {
    return (await this.#send("GET", "/v1/webhooks")).webhooks;
  }

  async deleteWebhook(id) {
    await this.#send("DELETE", `/v1/webhooks/${encodeURIComponent(id)}`, { expect: "none" });
  }

  async webhookDeliveries(id) {
    return (await this.#send("GET", `/v1/webhooks/${encodeURIComponent(id)}/deliveries`)).deliveries;
  }
}
