"""parse_codex_file over hand-written Codex rollouts (tests/memory/fixtures/codex)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memory.models import BlockKind, SessionKind, Transcript
from memory.sources.codex import parse_codex_file

FIXTURES = Path(__file__).parents[1] / "fixtures" / "codex"
CART = FIXTURES / "2025/10/29/rollout-2025-10-29T00-59-38-019a2d7a-41c4-78b1-b7cc-a45d62a89cd5.jsonl"
HEALTH = FIXTURES / "2025/11/02/rollout-2025-11-02T09-15-00-0b7e4c2a-9d1f-4e3a-8c55-2f6a7d9e1b30.jsonl"
LEGACY = FIXTURES / "2025/05/01/rollout-2025-05-01T12-00-00-5a1d3c9e-0000-4bbb-9ccc-123456789abc.jsonl"


def kinds(t: Transcript) -> list[tuple[str, list[BlockKind]]]:
    return [(e.role, [b.kind for b in e.blocks]) for e in t.entries]


def rollout_line(kind: str, payload: dict[str, Any], ts: str = "2025-12-01T10:00:00.000Z") -> str:
    return json.dumps({"timestamp": ts, "type": kind, "payload": payload}) + "\n"


def test_session_metadata_comes_from_session_meta_and_turn_context() -> None:
    t = parse_codex_file(CART)
    assert t.session_id == "codex-019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"
    assert t.kind is SessionKind.CODEX
    assert (t.cwd, t.git_branch, t.model, t.version) == ("/home/dev/shop", "feature/cart", "gpt-5-codex", "0.46.0")
    assert (t.started_at, t.ended_at) == ("2025-10-29T00:59:38.308Z", "2025-10-29T00:59:46.500Z")
    assert t.title == "Why does the cart total ignore discounts? Fix calculate_total in cart.py"


def test_response_items_become_entries_without_event_duplicates() -> None:
    t = parse_codex_file(CART)
    assert kinds(t) == [
        ("user", [BlockKind.TEXT]),  # <environment_context>, meta
        ("user", [BlockKind.TEXT]),
        ("assistant", [BlockKind.THINKING]),
        ("assistant", [BlockKind.TOOL_USE]),
        ("user", [BlockKind.TOOL_RESULT]),
        ("assistant", [BlockKind.TOOL_USE]),
        ("user", [BlockKind.TOOL_RESULT]),
        ("assistant", [BlockKind.TEXT]),
    ]
    assert [e.is_meta for e in t.entries][:2] == [True, False]
    call = t.entries[3].blocks[0]
    assert (call.tool_name, call.tool_id) == ("shell", "call_A1")
    assert call.tool_input["command"] == ["bash", "-lc", "sed -n 1,80p cart.py"]
    ok, failed = t.entries[4].blocks[0], t.entries[6].blocks[0]
    assert ok.text.startswith("def calculate_total") and not ok.is_error
    assert failed.is_error and "1 failed" in failed.text
    all_text = [b.text for e in t.entries for b in e.blocks]
    assert sum("calculate_total never applied" in x for x in all_text) == 1


def test_malformed_and_unknown_lines_are_reported_and_counted() -> None:
    t = parse_codex_file(CART)
    assert [(p.line_no, p.reason) for p in t.problems] == [(13, "invalid json")]
    assert t.skipped_types["token_usage_record"] == 1
    assert t.skipped_types["event_msg/token_count"] == 1
    assert t.skipped_types["event_msg/user_message"] == 1  # duplicate of the response item
    assert t.lines_read == 17 and t.bytes_read == CART.stat().st_size


def test_custom_tools_local_shell_compaction_and_developer_messages() -> None:
    t = parse_codex_file(HEALTH)
    roles = [(e.role, e.subtype, e.is_meta) for e in t.entries[:3]]
    assert roles == [("system", "developer", True), ("user", "", True), ("user", "", False)]
    patch = t.entries[3].blocks[0]
    assert patch.tool_name == "apply_patch" and "server.go" in patch.tool_input["input"]
    assert t.entries[4].blocks[0].text.startswith("Success. Updated")
    shell = t.entries[5].blocks[0]
    assert (shell.tool_name, shell.tool_input["command"]) == ("local_shell", ["go", "build", "./..."])
    result = t.entries[6].blocks[0]
    assert result.is_error and result.text == "server.go:12: undefined: health"
    compacted = t.entries[7]
    assert compacted.is_compact_summary and compacted.blocks[0].text.startswith("Summary so far")
    assert t.skipped_types["mystery_future_line"] == 1
    assert t.model == "gpt-5.1-codex" and t.title == "Rename the healthz endpoint to /health in server.go"


def test_legacy_rollout_with_bare_meta_and_items() -> None:
    t = parse_codex_file(LEGACY)
    assert t.session_id == "codex-5a1d3c9e-0000-4bbb-9ccc-123456789abc"
    assert t.git_branch == "legacy"
    assert kinds(t) == [
        ("user", [BlockKind.TEXT]),
        ("assistant", [BlockKind.TOOL_USE]),
        ("user", [BlockKind.TOOL_RESULT]),
        ("assistant", [BlockKind.TEXT]),
    ]
    assert t.skipped_types["state"] == 2


def test_event_messages_are_used_when_no_response_item_message_exists(tmp_path: Path) -> None:
    f = tmp_path / "rollout-2025-12-01T10-00-00-11111111-2222-4333-8444-555555555555.jsonl"
    f.write_text(
        rollout_line("event_msg", {"type": "user_message", "message": "what time is it"})
        + rollout_line("event_msg", {"type": "agent_message", "message": "noon"})
        + rollout_line("event_msg", {"type": "token_count", "info": None})
    )
    t = parse_codex_file(f)
    assert t.session_id == "codex-11111111-2222-4333-8444-555555555555"  # from the file name
    assert [(e.role, e.blocks[0].text) for e in t.entries] == [("user", "what time is it"), ("assistant", "noon")]
    assert dict(t.skipped_types) == {"event_msg/token_count": 1}


def test_redaction_and_truncation_apply_to_every_string(tmp_path: Path) -> None:
    f = tmp_path / "rollout-x.jsonl"
    secret = "ghp_abcdefSECRET"
    f.write_text(
        rollout_line("session_meta", {"id": "s-1", "cwd": f"/w/{secret}", "git": {"branch": f"b/{secret}"}})
        + rollout_line("turn_context", {"model": "gpt-5", "cwd": f"/w/{secret}"})
        + rollout_line("response_item", {"type": "message", "role": "user",
                                         "content": [{"type": "input_text", "text": f"use {secret}"}]})
        + rollout_line("response_item", {"type": "function_call", "name": "shell", "call_id": "c",
                                         "arguments": json.dumps({"command": ["echo", secret]})})
        + rollout_line("response_item", {"type": "function_call_output", "call_id": "c", "output": "z" * 5000})
    )  # fmt: skip
    t = parse_codex_file(f, redact=lambda s: s.replace(secret, "[REDACTED]"), tool_output_limit=100)
    assert secret not in repr(t)
    assert t.title == "use [REDACTED]"
    assert (t.cwd, t.git_branch) == ("/w/[REDACTED]", "b/[REDACTED]")
    assert t.entries[1].blocks[0].tool_input == {"command": ["echo", "[REDACTED]"]}
    out = t.entries[2].blocks[0]
    assert len(out.text) == 100 and out.truncated_chars == 4900


def test_truncated_last_line_and_garbage_never_raise(tmp_path: Path) -> None:
    f = tmp_path / "rollout-y.jsonl"
    f.write_bytes(
        rollout_line("session_meta", {"id": "s-2"}).encode()
        + b"[1, 2]\n\xff\xfe\n"
        + rollout_line("response_item", {"type": "message", "role": "assistant", "content": "hi"}).encode()
        + b'{"timestamp": "2025-12-01", "type": "response_it'
    )
    t = parse_codex_file(f)
    assert [(p.line_no, p.reason) for p in t.problems] == [
        (2, "not an object"),
        (3, "invalid utf-8"),
        (5, "truncated last line"),
    ]
    assert [e.blocks[0].text for e in t.entries] == ["hi"]


def test_missing_file_raises_os_error(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        parse_codex_file(tmp_path / "rollout-none.jsonl")
