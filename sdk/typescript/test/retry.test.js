// 429 and Retry-After against a real server whose rate limit is tight (one request, then one per 100 s):
// the client waits what the server asks (up to its cap) before each retry, then throws rate_limited. The
// waits go through an injected sleep that records them, so the test takes no time.

import assert from "node:assert/strict";
import { test } from "node:test";
import { MacuposClient, MacuposError, retryAfterSeconds } from "@macupos/client";
import { LIMITED_KEY, LIMITED_URL } from "./service.js";

const skip = LIMITED_URL ? false : "no rate-limited server (MACUPOS_LIMITED_URL)";

function limited(options = {}) {
  const waits = [];
  const sleep = async (ms) => {
    waits.push(ms);
  };
  return { waits, c: new MacuposClient({ url: LIMITED_URL, apiKey: LIMITED_KEY, sleep, ...options }) };
}

test("the rate headers of each answer are kept", { skip }, async () => {
  const { c } = limited();
  await c.stats(); // the bucket's one request
  assert.ok(c.rateLimit, "an authenticated answer carries X-RateLimit-*");
  assert.ok(c.rateLimit.limit >= 1);
  assert.equal(c.rateLimit.remaining, 0);
  assert.ok(c.rateLimit.reset > 0);
});

test("a 429 is retried after the Retry-After the server sent, then thrown", { skip }, async () => {
  const { c, waits } = limited({ maxRetries: 2, maxRetryDelayMs: 1_000_000 });
  const failed = await c.stats().catch((e) => e);
  assert.ok(failed instanceof MacuposError);
  assert.equal(failed.status, 429);
  assert.equal(failed.code, "rate_limited");
  assert.ok(failed.retryAfter >= 90 && failed.retryAfter <= 100, `Retry-After ${failed.retryAfter}`);
  assert.equal(waits.length, 2, "two retries, each after a wait");
  for (const ms of waits) assert.ok(ms >= 90_000 && ms <= 100_000 && ms % 1000 === 0, `waited ${ms} ms`);
});

test("a long Retry-After is capped at maxRetryDelayMs", { skip }, async () => {
  const { c, waits } = limited({ maxRetries: 3, maxRetryDelayMs: 250 });
  await assert.rejects(c.search("anything"), { status: 429, code: "rate_limited" });
  assert.deepEqual(waits, [250, 250, 250]);
});

test("no retries: the 429 is thrown at once", { skip }, async () => {
  const { c, waits } = limited({ maxRetries: 0 });
  await assert.rejects(c.stats(), { status: 429 });
  assert.deepEqual(waits, []);
});

test("Retry-After is read as seconds or as an HTTP date", () => {
  const now = Date.parse("2026-03-02T10:00:00Z");
  assert.equal(retryAfterSeconds("7", now), 7);
  assert.equal(retryAfterSeconds("Mon, 02 Mar 2026 10:00:30 GMT", now), 30);
  assert.equal(retryAfterSeconds("Mon, 02 Mar 2026 09:00:00 GMT", now), 0);
  assert.equal(retryAfterSeconds("soon", now), null);
  assert.equal(retryAfterSeconds(null, now), null);
});
