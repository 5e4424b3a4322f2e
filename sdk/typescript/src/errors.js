// The one error this package throws: every failure (an HTTP error answer, a network failure, a timeout, a
// body that is not what the route promises) is a MacuposError, so a caller needs a single catch.

export class MacuposError extends Error {
  /**
   * @param {string} message
   * @param {{status?: number, code?: string, details?: Record<string, unknown>, retryAfter?: number | null,
   *   cause?: unknown}} [fields]
   */
  constructor(message, { status = 0, code = "error", details = {}, retryAfter = null, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "MacuposError";
    this.status = status; // 0: no HTTP answer at all (network, timeout)
    this.code = code;
    this.details = details; // the error body's other fields (a script error's `line`, …)
    this.retryAfter = retryAfter; // seconds, from Retry-After, when the server sent one
  }
}

/** The seconds a Retry-After header asks for (delta-seconds or an HTTP date); null when absent or unreadable. */
export function retryAfterSeconds(header, now = Date.now()) {
  if (header == null || header.trim() === "") return null;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, (at - now) / 1000);
}

/** The MacuposError for a non-2xx answer: the service's `{"error": {"code", "message", ...}}` when it sent one. */
export async function errorFromResponse(response) {
  const retryAfter = retryAfterSeconds(response.headers.get("retry-after"));
  const text = await response.text().catch(() => "");
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON (a proxy's HTML page, an empty body): the status speaks alone
  }
  const error = body && typeof body === "object" ? body.error : null;
  if (error && typeof error === "object" && typeof error.code === "string") {
    const { code, message, ...details } = error;
    return new MacuposError(String(message ?? code), { status: response.status, code, details, retryAfter });
  }
  const said = text.trim().slice(0, 200);
  return new MacuposError(`HTTP ${response.status}${said ? `: ${said}` : ""}`, {
    status: response.status,
    code: "http_error",
    retryAfter,
  });
}
