"""Generate a large, realistic Claude Code transcript (JSONL) for ingest benchmarks and memory tests.

Most of a real transcript's bytes are tool results (file reads, command output); the rest are user
requests, assistant text and tool calls. The generator is seeded, so the same size gives the same file.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

__all__ = ["write_transcript"]

_WORDS = (
    "refactor the ingest pipeline so retrieval stays fast while the bot the hook and the server write the same "
    "database migrate schema flaky test fixture timeout websocket parser tokenizer handoff keyword project index "
    "posting list frontier recency duration boost telegram voice whisper codex claude relay audit plan research"
).split()


def _para(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def write_transcript(
    path: Path,
    target_bytes: int,
    *,
    session_id: str = "big-session",
    seed: int = 7,
    tool_lines: tuple[int, int] = (200, 1200),
) -> int:
    """Write about `target_bytes` of transcript to `path`; returns the bytes written. ``tool_lines``: how many
    lines a tool result has (fewer: more, shorter entries, little of them clipped at ingest)."""
    rng = random.Random(seed)
    written = 0
    n = 0
    parent: str | None = None
    with path.open("w", encoding="utf-8") as fh:
        while written < target_bytes:
            n += 1
            ts = f"2026-03-{1 + (n // 5000) % 28:02d}T{(n // 200) % 24:02d}:{(n // 4) % 60:02d}:{n % 60:02d}Z"
            base = {
                "sessionId": session_id,
                "timestamp": ts,
                "cwd": "/srv/eywa",
                "gitBranch": "main",
                "version": "2.1.332",
                "parentUuid": parent,
                "isSidechain": False,
            }
            kind = n % 4
            if kind == 0:
                line = {
                    **base,
                    "type": "user",
                    "uuid": f"u{n}",
                    "message": {"role": "user", "content": f"step {n}: " + _para(rng, 30)},
                }
            elif kind == 1:
                line = {
                    **base,
                    "type": "assistant",
                    "uuid": f"a{n}",
                    "message": {
                        "role": "assistant",
                        "model": "claude-sonnet-4-5",
                        "content": [
                            {"type": "text", "text": _para(rng, 80)},
                            {
                                "type": "tool_use",
                                "id": f"t{n}",
                                "name": rng.choice(["Read", "Bash", "Grep"]),
                                "input": {"file_path": f"/srv/eywa/memory/mod_{n % 97}.py", "command": "pytest -q"},
                            },
                        ],
                    },
                }
            elif kind == 2:
                body = "\n".join(f"{i:5d}  " + _para(rng, 12) for i in range(rng.randint(*tool_lines)))
                line = {
                    **base,
                    "type": "user",
                    "uuid": f"r{n}",
                    "message": {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": f"t{n - 1}", "content": body}],
                    },
                }
            else:
                line = {
                    **base,
                    "type": "assistant",
                    "uuid": f"b{n}",
                    "message": {
                        "role": "assistant",
                        "model": "claude-sonnet-4-5",
                        "content": [{"type": "text", "text": _para(rng, 120)}],
                    },
                }
            parent = line["uuid"]  # type: ignore[assignment]
            data = json.dumps(line) + "\n"
            fh.write(data)
            written += len(data)
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("path", type=Path)
    ap.add_argument("--mb", type=float, default=100.0)
    args = ap.parse_args()
    size = write_transcript(args.path, int(args.mb * 1024 * 1024))
    print(f"wrote {size / 1e6:.1f} MB to {args.path}")


if __name__ == "__main__":
    main()
