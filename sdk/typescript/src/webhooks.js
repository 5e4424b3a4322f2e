// A receiver's check of a delivery: the service signs each body with HMAC-SHA256 under the webhook's secret
// (`X-Macupos-Signature-256: sha256=<hex>`). Web Crypto, so it runs in node ≥ 18 and in workers alike.

export const WEBHOOK_EVENTS = Object.freeze(["handoff.ready", "session.ingested", "session.forgotten"]);

async function subtle() {
  if (globalThis.crypto?.subtle) return globalThis.crypto.subtle;
  return (await import("node:crypto")).webcrypto.subtle; // node 18 keeps Web Crypto off the global object
}

function bytes(value) {
  return typeof value === "string" ? new TextEncoder().encode(value) : new Uint8Array(value);
}

/** `sha256=<hex>` of `body` under `secret`: the header value a delivery of that body carries. */
export async function signWebhookBody(secret, body) {
  const crypto = await subtle();
  const key = await crypto.importKey("raw", bytes(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await crypto.sign("HMAC", key, bytes(body)));
  return `sha256=${Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

/** Whether `signature` (the X-Macupos-Signature-256 header) signs the raw `body` under `secret`. Check the
 * raw bytes as received: a re-serialized JSON object would not match. */
export async function verifyWebhookSignature(secret, body, signature) {
  if (typeof signature !== "string") return false;
  const expected = await signWebhookBody(secret, body);
  const given = signature.trim().toLowerCase();
  // compare every character whatever differs first, so the time taken does not say how much matched
  let diff = expected.length ^ given.length;
  for (let i = 0; i < expected.length; i++) diff |= expected.charCodeAt(i) ^ given.charCodeAt(i);
  return diff === 0;
}
