// The client against a real `macupos serve`: uploads (gzipped), grounding, recall, a session, paging,
// scripts, stats, forgetting, and the errors, each answer checked against its declared type.

import assert from "node:assert/strict";
import { test } from "node:test";
import { MacuposClient, MacuposError, gzip } from "@macupos/client";
import { assertShape } from "./dts.js";
import { READ_KEY, SERVICE_URL, client, transcript } from "./service.js";

const HANDOFF = `---
session_id: ts-imported-1
date: 2026-02-01
headline: Chose PostgreSQL for the ledger
projects: [ledger]
keywords: [postgresql, ledger]
---

# Chose PostgreSQL for the ledger

## What happened

We compared SQLite and PostgreSQL for the ledger and picked PostgreSQL.
`;

test("a transcript goes up gzipped and comes back as grounding, recall and a session", async () => {
  const sent = [];
  const recording = (url, init) => {
    sent.push(init); // the real fetch does the work; the test only sees what went out
    return fetch(url, init);
  };
  const c = client({ fetch: recording });
  const text = transcript("ts-zebra-1", ["zebra", "quokka"]);
  const up = await c.uploadTranscript("ts/zebra-1.jsonl", text);
  assertShape(up, "TranscriptUpload");
  assert.deepEqual(up.sessions, ["ts-zebra-1"]);
  assert.equal(up.bytes, new TextEncoder().encode(text).length, "the server counts the gunzipped bytes");
  assert.equal(sent[0].headers["Content-Encoding"], "gzip");
  assert.deepEqual(sent[0].body, await gzip(new TextEncoder().encode(text)));

  const again = await c.uploadTranscript("ts/zebra-1.jsonl", text, { gzip: false });
  assert.deepEqual(again.counts, { new: 0, updated: 0, unchanged: 1 }, "the same file again is idempotent");
  assert.equal(sent[1].headers["Content-Encoding"], undefined);

  const results = await c.get({ q: "zebra", as_of: new Date("2026-03-10T00:00:00Z"), explain: true });
  assert.equal(results[0].session_id, "ts-zebra-1");
  results.forEach((r, i) => assertShape(r, "GetResult", `get[${i}]`));
  assert.ok(results[0].explain, "explain: true adds the score's parts");
  const quoted = await c.getText({ q: "zebra", as_of: "2026-03-10T00:00:00Z" });
  assert.match(quoted, /\[\[RECALLED/);

  const hits = await c.search("quokka", { limit: 5 });
  assert.deepEqual(
    hits.map((h) => h.session_id),
    ["ts-zebra-1"],
  );
  hits.forEach((h, i) => assertShape(h, "SearchHit", `search[${i}]`));

  const markdown = await c.session("ts-zebra-1");
  assert.match(markdown, /zebra/);
});

test("handoffs page by page, and the iterator walks every page once, newest first", async () => {
  const c = client();
  for (const day of ["2019-05-01", "2019-05-02", "2019-05-03"]) {
    await c.uploadTranscript(`ts/pages-${day}.jsonl`, transcript(`ts-page-${day}`, ["pager"], { day }));
  }
  const bounds = { since: "2019-01-01T00:00:00Z", until: new Date("2020-01-01T00:00:00Z") };
  const first = await c.handoffs({ ...bounds, limit: 2 });
  assertShape(first, "HandoffPage");
  assert.equal(first.handoffs.length, 2);
  assert.ok(first.next_cursor);
  const walked = [];
  for await (const h of c.iterHandoffs({ ...bounds, limit: 1 })) walked.push(h.session_id);
  assert.deepEqual(walked, ["ts-page-2019-05-03", "ts-page-2019-05-02", "ts-page-2019-05-01"]);
});

test("a handoff is imported, shown as a handoff, and forgotten", async () => {
  const c = client();
  const imported = await c.uploadHandoff(HANDOFF);
  assertShape(imported, "HandoffImport");
  assert.equal(imported.session_id, "ts-imported-1");
  assert.match(await c.session("ts-imported-1", { format: "handoff" }), /PostgreSQL/);
  const gone = await c.forget("ts-imported-1");
  assertShape(gone, "ForgetResult");
  assert.deepEqual(gone.forgotten, ["ts-imported-1"]);
  await assert.rejects(c.session("ts-imported-1", { format: "handoff" }), { status: 404, code: "not_found" });
  await assert.rejects(c.uploadHandoff(HANDOFF), { status: 409, code: "conflict" });
});

test("a facts script runs; a failing one is a MacuposError with the server's fields", async () => {
  const c = client();
  const ran = await c.script("remember tsed user Fact predicate editor object Helix");
  assertShape(ran, "ScriptResult");
  assert.equal(ran.output, "tsed");
  const recalled = await c.script("recall all", { asOf: new Date("2026-12-01T00:00:00Z") });
  assert.match(recalled.output, /Helix/);
  const failed = await c.script("remember tsx user Fact predicate p object o\nnosuch").catch((e) => e);
  assert.ok(failed instanceof MacuposError);
  assert.equal(failed.status, 422);
  assert.equal(failed.code, "script_error");
  assert.ok(failed.message.length > 0);
  assert.equal(failed.details.line, 2, "the error body's own fields travel in details");
});

test("stats and the facts tier answer their declared shapes", async () => {
  const c = client();
  assertShape(await c.stats(), "Stats");
  assertShape(await c.factsTier(), "FactsTier");
  const archive = await c.export();
  assert.deepEqual([...archive.slice(0, 2)], [0x1f, 0x8b], "the export is gzip");
});

test("errors carry the server's code, message and status", async () => {
  const unknown = new MacuposClient({ url: SERVICE_URL, apiKey: "mpk_000000000000_not-a-key" });
  const refused = await unknown.stats().catch((e) => e);
  assert.ok(refused instanceof MacuposError);
  assert.equal(refused.status, 401);
  assert.equal(refused.code, "unauthorized");
  assert.match(refused.message, /not valid/);

  await assert.rejects(client().search(""), { status: 400, code: "bad_request" });
  await assert.rejects(client().session("no-such-session"), { status: 404, code: "not_found" });
  if (READ_KEY) {
    const reader = new MacuposClient({ url: SERVICE_URL, apiKey: READ_KEY });
    await assert.rejects(reader.uploadTranscript("x.jsonl", "{}\n"), { status: 403, code: "forbidden" });
  }
});

test("no server at the address is a MacuposError too, with status 0", async () => {
  const nobody = new MacuposClient({ url: "http://127.0.0.1:9", apiKey: "k" }); // port 9: discard, never served
  const failed = await nobody.stats().catch((e) => e);
  assert.ok(failed instanceof MacuposError);
  assert.equal(failed.status, 0);
  assert.equal(failed.code, "network");
  assert.ok(failed.cause, "the fetch failure is kept as the cause");
});
