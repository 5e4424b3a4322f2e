// The result interfaces of ../index.d.ts, read with the TypeScript compiler's own parser: each one's fields
// (optional or not, their JSON kinds, the interface a field holds) and its `@openapi` tag. The tests compare
// them with the service's OpenAPI document and with the answers the real server gives.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import ts from "typescript";

const DTS = new URL("../index.d.ts", import.meta.url);

const K = ts.SyntaxKind;

/** The JSON kind a node of one of these syntax kinds always has. */
const FIXED_KIND = new Map([
  [K.StringKeyword, "string"],
  [K.NumberKeyword, "number"],
  [K.BooleanKeyword, "boolean"],
  [K.UnknownKeyword, "any"],
  [K.AnyKeyword, "any"],
  [K.ArrayType, "array"],
  [K.TypeLiteral, "object"],
]);

/** The JSON kind of a literal type, by its literal's kind; any other literal is true or false, a "boolean". */
const LITERAL_KIND = new Map([
  [K.NullKeyword, "null"],
  [K.StringLiteral, "string"],
  [K.NumericLiteral, "number"],
]);

/** JSON kinds: "string", "number", "boolean", "null", "array", "object", "any". */
function kindsOf(node, aliases, interfaces) {
  if (FIXED_KIND.has(node.kind)) return [FIXED_KIND.get(node.kind)];
  switch (node.kind) {
    case K.ParenthesizedType:
      return kindsOf(node.type, aliases, interfaces);
    case K.UnionType:
      return [...new Set(node.types.flatMap((t) => kindsOf(t, aliases, interfaces)))];
    case K.LiteralType:
      return [LITERAL_KIND.get(node.literal.kind) ?? "boolean"];
    case K.TypeReference: {
      const name = node.typeName.getText();
      if (name === "Array" || name === "ReadonlyArray") return ["array"];
      if (name === "Record" || interfaces.has(name)) return ["object"];
      if (aliases.has(name)) return kindsOf(aliases.get(name), aliases, interfaces);
      return ["any"]; // a platform type (Blob, AbortSignal): options, never in an answer
    }
    default:
      return ["any"]; // a function, `typeof x`: options, never in an answer
  }
}

/** The interface a field holds (itself, in an array, or beside null), if any. */
function refOf(node, interfaces) {
  if (node.kind === K.TypeReference && interfaces.has(node.typeName.getText())) return node.typeName.getText();
  if (node.kind === K.ArrayType) return refOf(node.elementType, interfaces);
  if (node.kind === K.UnionType) return node.types.map((t) => refOf(t, interfaces)).find(Boolean) ?? null;
  return null;
}

/** name -> {tag: string | null, fields: Map<name, {optional, kinds: Set, ref}>} for every interface. */
export function declarations(path = DTS) {
  const text = readFileSync(path, "utf8");
  const source = ts.createSourceFile("index.d.ts", text, ts.ScriptTarget.Latest, true);
  const aliases = new Map();
  const nodes = [];
  for (const st of source.statements) {
    if (ts.isTypeAliasDeclaration(st)) aliases.set(st.name.text, st.type);
    if (ts.isInterfaceDeclaration(st)) nodes.push(st);
  }
  const names = new Set(nodes.map((n) => n.name.text));
  const found = new Map();
  for (const node of nodes) {
    const tag = ts.getJSDocTags(node).find((t) => t.tagName.text === "openapi");
    const fields = new Map();
    for (const member of node.members) {
      if (!ts.isPropertySignature(member) || !member.type) continue;
      fields.set(member.name.getText(), {
        optional: Boolean(member.questionToken),
        kinds: new Set(kindsOf(member.type, aliases, names)),
        ref: refOf(member.type, names),
      });
    }
    found.set(node.name.text, { tag: tag ? ts.getTextOfJSDocComment(tag.comment)?.trim() ?? null : null, fields });
  }
  return found;
}

const DECLARED = declarations();

function kindOfValue(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

/** Assert that `value` (an answer of the real server) has exactly the shape interface `name` declares. */
export function assertShape(value, name, where = name) {
  const declared = DECLARED.get(name);
  assert.ok(declared, `index.d.ts declares no interface ${name}`);
  assert.equal(kindOfValue(value), "object", `${where}: not an object: ${JSON.stringify(value)}`);
  const extra = Object.keys(value).filter((k) => !declared.fields.has(k));
  assert.deepEqual(extra, [], `${where}: fields the server sends that ${name} does not declare`);
  for (const [field, spec] of declared.fields) {
    if (!(field in value)) {
      assert.ok(spec.optional, `${where}: the server left out ${field}, which ${name} declares required`);
      continue;
    }
    const got = value[field];
    if (!spec.kinds.has("any")) {
      assert.ok(spec.kinds.has(kindOfValue(got)), `${where}.${field}: ${kindOfValue(got)} is not ${[...spec.kinds]}`);
    }
    if (spec.ref && got !== null) {
      const items = Array.isArray(got) ? got : [got];
      items.forEach((item, i) => assertShape(item, spec.ref, `${where}.${field}[${i}]`));
    }
  }
}
