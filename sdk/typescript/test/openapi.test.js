// The declarations match the OpenAPI document the real server serves: every `@openapi`-tagged interface of
// index.d.ts has the fields (names, required or optional, JSON kinds) of the schema its tag names, and every
// route the client calls is in the document.

import assert from "node:assert/strict";
import { test } from "node:test";
import { declarations } from "./dts.js";
import { client } from "./service.js";

const document = await client().openapi();

// What the client sends: method and path template of each MacuposClient method's route.
const CALLED = [
  ["post", "/v1/transcripts"],
  ["post", "/v1/handoffs"],
  ["get", "/v1/handoffs"],
  ["get", "/v1/get"],
  ["get", "/v1/search"],
  ["get", "/v1/sessions/{id}"],
  ["delete", "/v1/sessions/{id}"],
  ["post", "/v1/script"],
  ["get", "/v1/stats"],
  ["get", "/v1/facts/tier"],
  ["get", "/v1/export"],
  ["post", "/v1/keys"],
  ["get", "/v1/keys"],
  ["delete", "/v1/keys/{id}"],
  ["post", "/v1/webhooks"],
  ["get", "/v1/webhooks"],
  ["delete", "/v1/webhooks/{id}"],
  ["get", "/v1/webhooks/{id}/deliveries"],
];

function resolve(schema) {
  let s = schema ?? {};
  for (let hops = 0; s.$ref && hops < 20; hops++) {
    const path = s.$ref.replace(/^#\//, "").split("/");
    s = path.reduce((node, part) => node?.[part.replace(/~1/g, "/").replace(/~0/g, "~")], document);
    assert.ok(s, `unresolvable $ref ${schema.$ref}`);
  }
  if (s.allOf) {
    // a composition: the union of its parts' properties and required lists
    const parts = s.allOf.map(resolve);
    return {
      type: "object",
      properties: Object.assign({}, ...parts.map((p) => p.properties ?? {})),
      required: parts.flatMap((p) => p.required ?? []),
    };
  }
  return s;
}

/** The JSON kinds a schema allows ("integer" is a number); null when it does not say. */
function schemaKinds(schema) {
  const s = resolve(schema);
  const alternatives = s.anyOf ?? s.oneOf;
  if (alternatives) {
    const each = alternatives.map(schemaKinds);
    return each.includes(null) ? null : new Set(each.flatMap((k) => [...k]));
  }
  let types = s.type === undefined ? [] : [s.type].flat();
  if (types.length === 0 && s.enum) types = s.enum.map((v) => (v === null ? "null" : typeof v));
  if (types.length === 0 && "const" in s) types = [s.const === null ? "null" : typeof s.const];
  if (types.length === 0) return null;
  const kinds = new Set(types.map((t) => (t === "integer" ? "number" : t)));
  if (s.nullable) kinds.add("null");
  return kinds;
}

/** The object schema a tag `METHOD PATH STATUS [PROPERTY]` names (an array's items stand for the array). */
function taggedSchema(tag) {
  if (tag.startsWith("#/")) return resolve({ $ref: tag }); // a schema of its own (a webhook delivery's body)
  const [method, path, status, property] = tag.split(/\s+/);
  const operation = document.paths?.[path]?.[method];
  assert.ok(operation, `the document has no ${method.toUpperCase()} ${path}`);
  const response = resolve(operation.responses?.[status]);
  assert.ok(response.content, `the document's ${method.toUpperCase()} ${path} has no ${status} answer with a body`);
  let schema = resolve(response.content["application/json"]?.schema);
  const unwrap = () => {
    if (schema.type === "array" || schema.items) schema = resolve(schema.items);
  };
  unwrap();
  if (property) {
    schema = resolve(schema.properties?.[property]);
    unwrap();
  }
  return schema;
}

test("every route the client calls is in the document", () => {
  const missing = CALLED.filter(([method, path]) => !document.paths?.[path]?.[method]);
  assert.deepEqual(missing, [], "routes the client calls that the document lacks");
});

const tagged = [...declarations()].filter(([, d]) => d.tag);

for (const [name, declared] of tagged) {
  test(`${name} matches the document's ${declared.tag}`, () => {
    const schema = taggedSchema(declared.tag);
    const properties = schema.properties ?? {};
    assert.ok(Object.keys(properties).length > 0, `the document gives no fields for ${declared.tag}`);
    // Where the document leaves an object open (additionalProperties), the declarations may name more fields.
    const names = [...declared.fields.keys()].filter((f) => !schema.additionalProperties || f in properties);
    assert.deepEqual(Object.keys(properties).sort(), names.sort(), `${name}'s fields and the document's`);
    const required = new Set(schema.required ?? []);
    for (const field of names) {
      const spec = declared.fields.get(field);
      assert.equal(!spec.optional, required.has(field), `${name}.${field}: required in one and not the other`);
      const documented = schemaKinds(properties[field]);
      if (documented !== null && !spec.kinds.has("any")) {
        assert.deepEqual([...spec.kinds].sort(), [...documented].sort(), `${name}.${field}: the JSON kinds`);
      }
    }
  });
}
