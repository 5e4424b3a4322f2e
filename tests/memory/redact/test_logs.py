"""Secrets never reach a log: the redacting filter on every `macupos` command's log, and the hooks' log file."""

from __future__ import annotations

import io
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory.hooks import run_session_end
from memory.redact.logs import RedactingFilter, install, redact_log_text, token_literals
from memory.settings import MemorySettings
from tests.cli_env import run_macupos
from tests.memory.hook_run import run_hook

# Formats the redactor knows (the same shapes as tests/fixtures/secrets), made up for these tests.
GITHUB = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz12"
ANTHROPIC = "sk-ant-api03-" + "q7Wm2Xr9Lk4Vb8Nc3Zs6Hd1Jf5Tg0Yp" * 2
TELEGRAM = "7412365890:AAHf3kQ9zX_ab-CDefGhIjKlMnOpQrStUvW"
OWN = "correct-horse-battery-staple"


@pytest.fixture
def captured() -> Iterator[tuple[logging.Logger, io.StringIO, RedactingFilter]]:
    """A logger tree like an application's: records of a child logger propagate to a handler on the parent."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    parent = logging.getLogger("log-redact-test")
    parent.propagate = False
    parent.setLevel(logging.DEBUG)
    parent.addHandler(handler)
    flt = install(RedactingFilter(own_secrets=[OWN]), parent)
    try:
        yield logging.getLogger("log-redact-test.child"), out, flt
    finally:
        parent.removeHandler(handler)


def test_a_secret_in_a_record_s_arguments_is_redacted_after_they_are_merged(
    captured: tuple[logging.Logger, io.StringIO, RedactingFilter],
) -> None:
    log, out, _ = captured
    log.info("POST %s failed", f"https://api.telegram.org/bot{TELEGRAM}/getUpdates")
    log.warning("header %r", {"Authorization": f"Bearer {ANTHROPIC}"})
    log.error("pushed with %s and %s", GITHUB, OWN)
    text = out.getvalue()
    for secret in (TELEGRAM, ANTHROPIC, GITHUB, OWN, TELEGRAM.split(":")[1]):
        assert secret not in text
    assert "POST https://api.telegram.org/bot[REDACTED:" in text  # the message around a secret stays readable
    assert text.count("\n") == 3


def test_an_exception_s_message_and_traceback_are_redacted_and_kept_readable(
    captured: tuple[logging.Logger, io.StringIO, RedactingFilter],
) -> None:
    log, out, _ = captured

    def fails(token: str) -> None:
        raise RuntimeError(f"git push https://x-access-token:{token}@github.com/o/r.git refused")

    try:
        fails(GITHUB)
    except RuntimeError:
        log.exception("push failed")
    log.warning("where was %s", ANTHROPIC, stack_info=True)
    text = out.getvalue()
    assert GITHUB not in text and ANTHROPIC not in text
    assert "Traceback (most recent call last)" in text and "RuntimeError: git push https://" in text
    assert "Stack (most recent call last)" in text


def test_the_bot_token_is_masked_whole_url_encoded_and_by_its_secret_half(
    captured: tuple[logging.Logger, io.StringIO, RedactingFilter],
) -> None:
    log, out, flt = captured
    token = "123456:TEST-TOKEN-NOT-A-REAL-FORMAT"  # a shape no redactor rule knows: only the mask can hide it
    flt.update(literals=token_literals(token))
    log.info("url %s", f"http://127.0.0.1:1/bot{token}/getMe")
    log.info("encoded %s", "token=123456%3ATEST-TOKEN-NOT-A-REAL-FORMAT&x=1")
    log.info("half %s", "TEST-TOKEN-NOT-A-REAL-FORMAT")
    text = out.getvalue()
    assert "TEST-TOKEN" not in text and "123456%3A" not in text
    assert text.count("<token>") == 3


def test_a_record_whose_arguments_do_not_fit_its_format_is_still_written(
    captured: tuple[logging.Logger, io.StringIO, RedactingFilter],
) -> None:
    log, out, _ = captured
    log.warning("two %s %s", GITHUB)  # a bug in a log call must not lose the line, nor leak the argument
    assert "two %s %s" in out.getvalue() and GITHUB not in out.getvalue()


def test_redact_log_text_builds_one_redactor_per_secret_list() -> None:
    assert redact_log_text(f"key {OWN} and {GITHUB}", [OWN]) == "key [REDACTED:own-secret] and [REDACTED:github-token]"
    assert OWN in redact_log_text(f"key {OWN}")  # not a secret unless the owner listed it


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MACUPOS_", "CLAUDE_", "ANTHROPIC_"))}
    return env | {"MACUPOS_HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / "claude"), **extra}


def test_a_hook_failing_on_a_setting_that_holds_a_pasted_key_logs_it_redacted(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # A key pasted into the wrong variable: the settings error quotes the value, the hooks' log must not.
    env = _env(home, MACUPOS_TIMEZONE=ANTHROPIC)
    payload = {"cwd": str(tmp_path), "transcript_path": str(tmp_path / "t.jsonl")}
    proc = run_hook("session-start", payload, env)
    assert (proc.returncode, proc.stdout) == (0, "")
    log = (home / "logs" / "hooks.log").read_text()
    assert "not an IANA timezone" in log and "[REDACTED:anthropic-key]" in log and ANTHROPIC not in log


def test_a_hook_log_line_hides_the_owner_s_own_secrets(tmp_path: Path) -> None:
    settings = MemorySettings(
        home=tmp_path / "home", claude_config_dir=tmp_path / "c", codex_home=tmp_path / "x", own_secrets=(OWN,)
    )
    never = [sys.executable, "-c", "raise SystemExit('must not run')"]
    run_session_end(settings, {"transcript_path": str(tmp_path / OWN / "t.jsonl")}, detach_command=never)
    log = (settings.home / "logs" / "hooks.log").read_text()
    assert "is not a file" in log and "[REDACTED:own-secret]" in log and OWN not in log


def test_a_macupos_command_s_log_on_stderr_is_redacted(tmp_path: Path) -> None:
    # A transcript folder named after a token: `ingest -v` logs every file it stores by its path.
    folder = tmp_path / GITHUB
    folder.mkdir()
    line = {"type": "user", "sessionId": "s1", "uuid": "u1", "timestamp": "2025-01-02T03:04:05Z"}
    line["message"] = {"role": "user", "content": f"hello, my own secret is {OWN}"}  # type: ignore[assignment]
    (folder / "s1.jsonl").write_text(json.dumps(line) + "\n")
    env = _env(tmp_path / "home", MACUPOS_MEMORY_LLM="0", MACUPOS_SECRETS=OWN, CODEX_HOME=str(tmp_path / "codex"))
    proc = run_macupos(env, "-vv", "memory", "ingest", str(folder), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "stored " in proc.stderr and "[REDACTED:github-token]" in proc.stderr
    assert GITHUB not in proc.stderr and OWN not in proc.stderr
