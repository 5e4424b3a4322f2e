"""What the redacting log filter (memory.redact.logs) adds to a log record, side by side with the same handler
without it: records like the bot's at -vv (Bot API calls, SQLite steps, a warning with a traceback).

Run: .venv/bin/python -m bench.log_redact_speed [--records N] [--repeat N]
"""

from __future__ import annotations

import argparse
import io
import logging
import time

from memory.redact.logs import RedactingFilter

TOKEN = "7412365890:AAHf3kQ9zX_ab-CDefGhIjKlMnOpQrStUvW"  # made up, of the real shape
_ARGS: list[tuple[str, tuple[object, ...]]] = [
    ("Calling Bot API endpoint `%s` with parameters `%s`", ("sendMessage", {"chat_id": 42, "text": "⏳ <b>tests</b>"})),
    ("executing %s", ("functools.partial(<built-in method execute>, 'UPDATE runs SET status = ?', ('done', 7))",)),
    ("Set Bot API URL: %s", (f"http://127.0.0.1:8081/bot{TOKEN}",)),
    ("run in chat %s failed: %s", (42, "Claude Code run failed: API Error: 529 Overloaded")),
]


def _run(records: int, with_filter: bool) -> float:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    if with_filter:
        flt = RedactingFilter(["owner-secret-value-1"])
        flt.mask_token(TOKEN)
        handler.addFilter(flt)
    log = logging.getLogger(f"bench.log_redact.{with_filter}")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    try:
        start = time.perf_counter()
        for i in range(records):
            msg, args = _ARGS[i % len(_ARGS)]
            log.debug(msg, *args)
        return time.perf_counter() - start
    finally:
        log.removeHandler(handler)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    plain = min(_run(args.records, False) for _ in range(args.repeat))
    filtered = min(_run(args.records, True) for _ in range(args.repeat))
    plain_us, filtered_us = plain / args.records * 1e6, filtered / args.records * 1e6
    print(f"{args.records} records, best of {args.repeat}")
    print(f"without the filter: {plain_us:.1f} µs a record")
    ratio = filtered / plain
    print(f"with the filter:    {filtered_us:.1f} µs a record ({ratio:.1f}x, +{filtered_us - plain_us:.1f} µs)")


if __name__ == "__main__":
    main()
