// Compiled by `tsc -p tsconfig.json` (never run): the declarations are valid TypeScript, a typical program
// type-checks against them through the package's own name, and misuse does not (each @ts-expect-error must
// meet an error, or tsc fails).

import {
  MacuposClient,
  MacuposError,
  verifyWebhookSignature,
  type Delivery,
  type GetResult,
  type HandoffListing,
  type TranscriptUpload,
} from "@macupos/client";

export async function typical(url: string, apiKey: string): Promise<void> {
  const client = new MacuposClient({ url, apiKey, maxRetries: 1, sleep: async () => {} });
  const up: TranscriptUpload = await client.uploadTranscript("s.jsonl", "{}\n");
  const sessions: string[] = up.sessions;
  const results: GetResult[] = await client.get({ q: "ledger", as_of: new Date(), explain: true });
  const headline: string | undefined = results[0]?.headline;
  const rank: number | undefined = results[0]?.branch_preference?.score_rank;
  for await (const h of client.iterHandoffs({ limit: 10 })) {
    const listed: HandoffListing = h;
    void listed.keywords;
  }
  const page = await client.handoffs({ since: "2026-01-01T00:00:00Z" });
  const cursor: string | null = page.next_cursor;
  const key = await client.createKey({ scope: "read", label: "ci" });
  const revoked: number | null | undefined = (await client.listKeys())[0]?.revoked_at;
  const hook = await client.createWebhook({ url: "http://127.0.0.1:9/hook", events: ["session.ingested"] });
  const log: Delivery[] = await client.webhookDeliveries(hook.id);
  const ok: boolean = await verifyWebhookSignature(hook.secret, "{}", "sha256=00");
  try {
    await client.forget("s");
  } catch (err) {
    if (err instanceof MacuposError) {
      const fields: [number, string, number | null] = [err.status, err.code, err.retryAfter];
      void fields;
    }
  }
  void [sessions, headline, rank, cursor, key.key, revoked, log, ok, client.rateLimit?.remaining];
}

export async function misuse(client: MacuposClient): Promise<void> {
  // @ts-expect-error: an admin key cannot be made through the API
  await client.createKey({ scope: "admin" });
  // @ts-expect-error: not an event the service sends
  await client.createWebhook({ url: "http://127.0.0.1:9/", events: ["session.created"] });
  // @ts-expect-error: search needs its words
  await client.search();
  // @ts-expect-error: a session is markdown text, not an object
  const shown: { markdown: string } = await client.session("s");
  void shown;
}
