"""A synthetic tree of eywa-mcp handoff files (``YYYY/MM/DD/<uuid>.md``), as ``~/.eywa/handoffs`` holds them.

Seeded, so the same count gives the same files. Each file is what eywa-mcp writes: YAML frontmatter with a
quoted headline, flow lists of projects and keywords, ``duration`` like ``"1h 5m"``, then ``# headline`` and
``## What Happened`` / ``## Insights`` / ``## Key Files`` / ``## Open Threads`` sections (about 1.2 KB).
One file in ten is a session with no substance (``No meaningful work.``).
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

__all__ = ["hostile_frontmatters", "write_hostile_tree", "write_tree"]

_WORDS = (
    "index posting keyword project retrieval recency handoff ingest parser tokenizer schema migration fixture "
    "timeout websocket relay codex claude telegram voice whisper audit plan research bm25 stemming sidechain "
    "rollout hook server database writer reader cache frontier duration boost window snippet chunk vocabulary"
).split()
_MODELS = ("claude-opus-4-5", "claude-sonnet-4-5", "claude-haiku-4-5")
_END = datetime(2026, 3, 1, tzinfo=UTC)


def _phrase(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _handoff(rng: random.Random, session_id: str, day: datetime) -> str:
    headline = _phrase(rng, 6).capitalize()
    hours, minutes = divmod(rng.randint(3, 240), 60)
    duration = f"{hours}h {minutes}m" if hours else f"{minutes}m"
    projects = [f"{rng.choice(_WORDS)}-{rng.choice(_WORDS)}" for _ in range(rng.choice((1, 1, 2)))]
    keywords = [f"{rng.choice(_WORDS)}-{rng.choice(_WORDS)}" for _ in range(rng.randint(3, 7))]
    empty = rng.random() < 0.1
    front = (
        f'---\nsession_id: {session_id}\ndate: {day.date().isoformat()}\nduration: "{duration}"\n'
        f'model: {rng.choice(_MODELS)}\nheadline: "{headline}"\nprojects: [{", ".join(projects)}]\n'
        f"keywords: [{', '.join(keywords)}]\nsubstance: {0 if empty else rng.choice((1, 2, 2))}\n---\n\n"
    )
    if empty:
        return front + f"# {headline}\n\nNo meaningful work.\n"
    happened = "".join(f"- {_phrase(rng, rng.randint(8, 16))}\n" for _ in range(rng.randint(2, 5)))
    insights = "\n\n".join(f"**{_phrase(rng, 2)}** -- {_phrase(rng, rng.randint(10, 20))}." for _ in range(2))
    files = "".join(f"- src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py\n" for _ in range(rng.randint(1, 4)))
    threads = "".join(f"- {_phrase(rng, 7)}\n" for _ in range(rng.randint(0, 2))) or "None.\n"
    return (
        front + f"# {headline}\n\n## What Happened\n{happened}\n## Insights\n{insights}\n\n"
        f"## Key Files\n{files}\n## Open Threads\n{threads}"
    )


def write_tree(root: Path, n: int, *, seed: int = 11) -> int:
    """Write ``n`` handoff files under ``root``; returns the bytes written."""
    rng = random.Random(seed)
    written = 0
    for _ in range(n):
        day = _END - timedelta(days=730 * rng.random())
        session_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        folder = root / f"{day.year:04d}" / f"{day.month:02d}" / f"{day.day:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        text = _handoff(rng, session_id, day)
        (folder / f"{session_id}.md").write_text(text, encoding="utf-8")
        written += len(text.encode())
    return written


# Frontmatters a hostile tree holds, each in its own file: {name: text after "---\n" and before "---\n"}.
def hostile_frontmatters() -> dict[str, str]:
    """Valid YAML built to exhaust a naive loader (or to make it build objects), one per entry."""
    deep = "[" * 50_000 + "]" * 50_000
    laughs = "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n" for i in range(1, 10))
    return {
        "laughs-in-unknown-key": "session_id: bomb-1\ndate: 2026-01-01\nheadline: bomb\nl0: &l0 lol\n" + laughs,
        "laughs-in-keywords": "session_id: bomb-2\ndate: 2026-01-01\nheadline: bomb\nl0: &l0 lol\n"
        + laughs
        + "keywords: *l9\n",
        "nested-brackets": f"session_id: deep\ndate: 2026-01-01\nheadline: deep\nx: {deep}\n",
        "tag-float": "session_id: tag-float\ndate: 2026-01-01\nheadline: tagged\nduration: !!float lots\n",
        "tag-timestamp": "session_id: tag-ts\ndate: !!timestamp yesterday\nheadline: tagged\n",
        "tag-python": "session_id: tag-py\ndate: 2026-01-01\nheadline: !!python/object/apply:os.system [id]\n",
        "anchor-only": "session_id: &sid anchored\ndate: 2026-01-01\nheadline: anchored\n",
        "month-13": "session_id: month-13\ndate: 2026-13-45\nheadline: impossible date\n",
        "spaces-duration": 'session_id: ws\ndate: 2026-01-01\nheadline: ws\nduration: "' + " " * 5000 + 'x"\n',
    }


def write_hostile_tree(root: Path, *, good: int, outside: Path) -> int:
    """A tree of hostile files (the frontmatters above, a 100 MB sparse file, binary junk, symlinks to
    ``outside`` and to a folder there) among ``good`` ordinary handoffs; returns the number of entries."""
    write_tree(root / "good", good, seed=13)
    bad = root / "2026" / "01" / "01"
    bad.mkdir(parents=True, exist_ok=True)
    entries = good
    for name, front in hostile_frontmatters().items():
        (bad / f"{name}.md").write_text(f"---\n{front}---\n\n# {name}\n", encoding="utf-8")
        entries += 1
    with (bad / "huge.md").open("wb") as fh:  # sparse: 100 MB that costs no disk
        fh.write(b"---\nsession_id: huge\ndate: 2026-01-01\nheadline: huge\n---\n")
        fh.truncate(100 * 1024 * 1024)
    (bad / "binary.md").write_bytes(b"\xff\xfe\x00" * 1000)
    outside.mkdir(parents=True, exist_ok=True)
    secret = outside / "secret.md"
    secret.write_text("---\nsession_id: outside\ndate: 2026-01-01\nheadline: read from outside\n---\n")
    (bad / "link-out.md").symlink_to(secret)
    (root / "linked-folder").symlink_to(outside, target_is_directory=True)
    return entries + 4
