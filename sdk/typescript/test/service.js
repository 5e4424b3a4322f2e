// The real `macupos serve` these tests talk to, as tests/sdk/test_typescript_client.py hands it over:
// its address and keys in the environment (an admin key and a read key of the same tenant beside the write
// key, and a second server whose rate limit is tight).

import { MacuposClient } from "@macupos/client";

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through tests/sdk/test_typescript_client.py`);
  return value;
}

export const SERVICE_URL = required("MACUPOS_MEMORY_URL");
export const WRITE_KEY = required("MACUPOS_API_KEY");
export const READ_KEY = process.env.MACUPOS_READ_KEY ?? "";
export const ADMIN_KEY = process.env.MACUPOS_ADMIN_KEY ?? "";
export const LIMITED_URL = process.env.MACUPOS_LIMITED_URL ?? "";
export const LIMITED_KEY = process.env.MACUPOS_LIMITED_KEY ?? "";

export function client(options = {}) {
  return new MacuposClient({ url: SERVICE_URL, apiKey: WRITE_KEY, ...options });
}

/** A Claude Code JSONL transcript: each turn a user message naming `words` and the assistant's answer. */
export function transcript(sessionId, words, { turns = 2, day = "2026-03-02", cwd = "/srv/app" } = {}) {
  const said = words.join(" ");
  const lines = [];
  let parent = null;
  for (let n = 0; n < turns; n++) {
    const pair = [
      ["user", `please look at ${said} in step ${n}`, "u"],
      ["assistant", `done: ${said} fixed in step ${n}`, "a"],
    ];
    for (const [role, text, tag] of pair) {
      const uuid = `${sessionId}-${tag}${n}`;
      const message =
        role === "user"
          ? { role, content: text }
          : { role, model: "claude-sonnet-4-5", content: [{ type: "text", text }] };
      const ss = String(n % 60).padStart(2, "0");
      lines.push(
        JSON.stringify({
          type: role,
          sessionId,
          uuid,
          parentUuid: parent,
          isSidechain: false,
          timestamp: `${day}T10:00:${ss}Z`,
          cwd,
          gitBranch: "main",
          version: "2.1.0",
          message,
        }),
      );
      parent = uuid;
    }
  }
  return lines.join("\n") + "\n";
}
