// Keys through the API with an admin key: made (shown once), listed without the key itself, revoked, and
// then refused by the server.

import assert from "node:assert/strict";
import { test } from "node:test";
import { MacuposClient } from "@macupos/client";
import { assertShape } from "./dts.js";
import { ADMIN_KEY, SERVICE_URL, client } from "./service.js";

const skip = !ADMIN_KEY && "no admin key (MACUPOS_ADMIN_KEY)";

test("an admin key makes, lists and revokes a key; the revoked key is refused", { skip }, async () => {
  const admin = new MacuposClient({ url: SERVICE_URL, apiKey: ADMIN_KEY });
  const made = await admin.createKey({ scope: "read", label: "ts-sdk" });
  assertShape(made, "NewKey");
  assert.equal(made.scope, "read");
  assert.equal(made.label, "ts-sdk");
  const reader = new MacuposClient({ url: SERVICE_URL, apiKey: made.key });
  assertShape(await reader.stats(), "Stats");

  const listed = await admin.listKeys();
  listed.forEach((k, i) => assertShape(k, "ApiKey", `keys[${i}]`));
  const mine = listed.find((k) => k.id === made.id);
  assert.ok(mine, "the new key is listed");
  assert.equal(mine.revoked_at, null);
  assert.ok(!JSON.stringify(listed).includes(made.key), "the list never shows a key itself");

  await admin.revokeKey(made.id);
  await assert.rejects(reader.stats(), { status: 401, code: "unauthorized" });
  const after = (await admin.listKeys()).find((k) => k.id === made.id);
  assert.ok(after === undefined || after.revoked_at !== null, "revoked: gone from the list or marked");
  await assert.rejects(admin.revokeKey("no-such-key"), { status: 404 });
});

test("a write key may not manage keys", { skip }, async () => {
  await assert.rejects(client().createKey({ scope: "read" }), { status: 403, code: "forbidden" });
});
