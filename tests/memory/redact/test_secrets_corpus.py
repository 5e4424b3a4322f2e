"""The credential corpus: every kind is redacted before it is stored, and ordinary text is left alone.

The corpus is generated from format specs (tests/fixtures/secrets/kinds.toml) with a fixed seed; the
negatives are tests/fixtures/secrets/negatives.txt plus generated hashes, UUIDs, base64, code and URLs.
`python -m bench.secrets_coverage` prints the same figures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.secrets_coverage import CONTEXTS, Report, Sample, load_kinds, measure, negatives, samples
from memory.facade import Eywa
from memory.redact.redactor import Redactor
from memory.redact.rules import TOKEN_FORMATS
from memory.settings import MemorySettings

R = Redactor()

# The kinds the issue found reaching memory.db unredacted.
REPORTED = (
    "sendgrid-key",
    "twilio-api-key",
    "twilio-auth-token",
    "discord-bot-token",
    "mailgun-private-key",
    "mailgun-api-key",
    "digitalocean-token",
    "shopify-token",
    "pypi-upload-token",
    "aws-secret-access-key-bare",
    "netrc",
)


@pytest.fixture(scope="module")
def corpus() -> list[Sample]:
    return samples(load_kinds(), seed=1, draws=2)


@pytest.fixture(scope="module")
def report(corpus: list[Sample]) -> Report:
    return measure(R, corpus, negatives(seed=1))


def test_corpus_is_as_large_as_promised(report: Report) -> None:
    assert report.kinds >= 60
    assert report.negatives >= 1000
    assert report.samples >= report.kinds * len(CONTEXTS)


def test_at_least_99_percent_of_kinds_and_samples_are_redacted(report: Report) -> None:
    misses = [f"{s.kind}: {out[:200]!r}" for s, out in report.misses[:20]]
    assert report.recall >= 0.99, misses
    assert report.kind_recall >= 0.99, misses


def test_at_most_1_percent_of_ordinary_lines_change(report: Report) -> None:
    assert report.fp_rate <= 0.01, [f"{a[:120]!r} -> {b[:120]!r}" for a, b in report.changed[:20]]


def test_every_kind_the_issue_reported_is_fully_redacted(corpus: list[Sample]) -> None:
    for kind in REPORTED:
        chosen = [s for s in corpus if s.kind == kind]
        assert chosen, kind
        got = measure(R, chosen, [])
        assert got.redacted == got.samples, (kind, [out[:200] for _, out in got.misses[:3]])


def test_redacting_a_redacted_sample_changes_nothing(corpus: list[Sample]) -> None:
    for sample in corpus:
        once = R(sample.text)
        assert R(once) == once, sample.kind


def test_every_token_rule_names_its_source() -> None:
    for rule in TOKEN_FORMATS:
        assert rule.source.strip(), rule.kind
        assert rule.anchors, rule.kind


STRUCTURED = ("Zq8vLm2Np4Rt6Wx1", "Kd93jfQ0wPz7Lm2s")  # values a tool input hides by their keys' names


def secrets_transcript(chosen: list[Sample], session_id: str = "secrets-corpus") -> str:
    """A Claude Code session that holds each sample once: as the user's words, the assistant's, a shell
    command and a tool's output in turn, plus a tool input whose keys name the secrets (``STRUCTURED``)."""
    lines: list[dict[str, object]] = []

    def add(role: str, content: object) -> None:
        n = len(lines)
        lines.append(
            {
                "type": role,
                "timestamp": f"2025-12-24T10:{n // 60:02d}:{n % 60:02d}.000Z",
                "sessionId": session_id,
                "cwd": "/project",
                "gitBranch": "main",
                "message": {"role": role, "content": content},
                "uuid": f"m-{n}",
            }
        )

    add("user", "Set up the deployment with the credentials below.")
    for i, sample in enumerate(chosen):
        slot = i % 4
        if slot == 0:
            add("user", sample.text)
        elif slot == 1:
            add("assistant", [{"type": "text", "text": sample.text}])
        elif slot == 2:
            add("assistant", [{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": sample.text}}])
            add("user", [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "done"}])
        else:
            add("assistant", [{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "cat .env"}}])
            add("user", [{"type": "tool_result", "tool_use_id": f"t{i}", "content": sample.text}])
    structured = {"env": {"DEPLOY_TOKEN": STRUCTURED[0], "HOME": "/root"}, "password": STRUCTURED[1]}
    add("assistant", [{"type": "tool_use", "id": "tx", "name": "Deploy", "input": structured}])
    add("user", [{"type": "tool_result", "tool_use_id": "tx", "content": "deployed"}])
    add("assistant", [{"type": "text", "text": "Deployed; the credentials are in place."}])
    return "".join(json.dumps(line) + "\n" for line in lines)


def one_of_each_kind(corpus: list[Sample]) -> list[Sample]:
    """One sample of each kind, each kind from another of its contexts."""
    plain: dict[str, list[Sample]] = {}
    for sample in corpus:
        if not sample.text.startswith('{"type": "tool_result"'):  # the JSON-escaped copies are for raw lines
            plain.setdefault(sample.kind, []).append(sample)
    chosen = [found[(7 * i) % len(found)] for i, found in enumerate(plain.values())]
    assert len(chosen) == len(load_kinds())
    return chosen


def traces(pieces: list[str], stored: bytes) -> list[str]:
    """The pieces a 16-character run of which is in ``stored`` (lowercased: the index keeps lowercase terms;
    italics' "\\_" undone)."""
    hay = stored.lower().replace(b"\\_", b"_")
    found = []
    for piece in pieces:
        if len(piece) < 10:
            continue
        n = min(16, len(piece))
        if any(piece[i : i + n].lower().encode() in hay for i in range(len(piece) - n + 1)):
            found.append(piece)
    return found


async def test_a_session_holding_every_kind_leaves_no_trace_in_memory(
    settings: MemorySettings, corpus: list[Sample], tmp_path: Path
) -> None:
    chosen = one_of_each_kind(corpus)
    path = tmp_path / "session.jsonl"
    path.write_text(secrets_transcript(chosen), encoding="utf-8")
    async with await Eywa.open(settings) as eywa:
        report = await eywa.ingest([path], use_llm=False)
        assert report.sessions_new == 1
        assert report.handoffs_extracted == 1
    files = [p for p in settings.home.rglob("*") if p.is_file()]
    assert settings.db_path in files
    assert any(p.is_relative_to(settings.handoffs_dir) for p in files)  # the handoffs mirror too
    stored = b"\n".join(p.read_bytes() for p in files)
    pieces = [p for s in chosen for p in s.pieces] + [*STRUCTURED]
    assert traces(pieces, stored) == []
    assert b"REDACTED" in stored
