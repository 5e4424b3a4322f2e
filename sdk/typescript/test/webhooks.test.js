// Webhooks through the client, with a receiver on 127.0.0.1: registered (secret shown once), listed, sent a
// session.ingested delivery whose signature verifies, logged in the deliveries, deleted.

import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import { test } from "node:test";
import { WEBHOOK_EVENTS, signWebhookBody, verifyWebhookSignature } from "@macupos/client";
import { assertShape } from "./dts.js";
import { client, transcript } from "./service.js";

const DELIVERY_WAIT_MS = 60_000; // a bound, not a pause: the test goes on as soon as the delivery arrives

/** A receiver on 127.0.0.1: each delivery's headers and raw body, and a promise of the first one. */
async function receiver() {
  const got = [];
  let arrived;
  const first = new Promise((resolve) => {
    arrived = resolve;
  });
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      got.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(204).end();
      arrived();
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { server, got, first, url: `http://127.0.0.1:${server.address().port}/hook` };
}

test("a delivery is signed with the secret, and the signature checks the raw body", async () => {
  const body = '{"event":"session.ingested"}';
  const signature = await signWebhookBody("s3cret", body);
  assert.match(signature, /^sha256=[0-9a-f]{64}$/);
  assert.equal(await verifyWebhookSignature("s3cret", body, signature), true);
  assert.equal(await verifyWebhookSignature("s3cret", new TextEncoder().encode(body), signature), true);
  assert.equal(await verifyWebhookSignature("other", body, signature), false);
  assert.equal(await verifyWebhookSignature("s3cret", body + " ", signature), false);
  assert.equal(await verifyWebhookSignature("s3cret", body, undefined), false);
});

test("a webhook is registered, delivers session.ingested signed, logs it, and is deleted", async () => {
  const c = client();
  const hook = await receiver();
  try {
    const made = await c.createWebhook({ url: hook.url, events: ["session.ingested"] });
    assertShape(made, "NewWebhook");
    assert.deepEqual(made.events, ["session.ingested"]);
    const listed = await c.listWebhooks();
    listed.forEach((w, i) => assertShape(w, "Webhook", `webhooks[${i}]`));
    assert.ok(listed.some((w) => w.id === made.id));
    assert.ok(!JSON.stringify(listed).includes(made.secret), "the secret is shown once only");

    await c.uploadTranscript("ts/hooked.jsonl", transcript("ts-hooked-1", ["heron"]));
    await Promise.race([
      hook.first,
      new Promise((_, reject) => setTimeout(() => reject(new Error("no delivery arrived")), DELIVERY_WAIT_MS).unref()),
    ]);
    const [delivery] = hook.got;
    assert.equal(delivery.headers["x-macupos-event"], "session.ingested");
    const payload = JSON.parse(delivery.body.toString("utf8"));
    assertShape(payload, "WebhookPayload");
    assert.equal(payload.id, delivery.headers["x-macupos-delivery"]);
    assert.ok(WEBHOOK_EVENTS.includes(payload.event));
    const signature = delivery.headers["x-macupos-signature-256"];
    assert.equal(await verifyWebhookSignature(made.secret, delivery.body, signature), true);

    const log = await c.webhookDeliveries(made.id);
    log.forEach((d, i) => assertShape(d, "Delivery", `deliveries[${i}]`));
    assert.ok(log.some((d) => d.id === payload.id));

    await c.deleteWebhook(made.id);
    assert.ok(!(await c.listWebhooks()).some((w) => w.id === made.id));
    await assert.rejects(c.deleteWebhook(made.id), { status: 404 });
  } finally {
    hook.server.close();
  }
});

test("an event the service does not send is refused", async () => {
  await assert.rejects(client().createWebhook({ url: "http://127.0.0.1:9/", events: ["session.created"] }), {
    status: 400,
  });
});
