"""Secrets never reach the facts store, its event log or its snapshot."""

from __future__ import annotations

from pathlib import Path

from memory.facts.api import FactsApi
from memory.settings import MemorySettings


async def test_remembered_secrets_are_redacted_everywhere(tmp_path: Path) -> None:
    own = "correct-horse-battery-staple"
    key = "sk-ant-api03-" + "Zq9Xw8Vu7Ts6Rq5Po4Nm3" * 4
    settings = MemorySettings(
        home=tmp_path / "home", claude_config_dir=tmp_path / "c", codex_home=tmp_path / "x", own_secrets=(own,)
    )
    facts = await FactsApi.from_settings(settings)
    try:
        result = await facts.run_script(
            f'remember vault user Fact predicate vault-phrase object "{own}" confidence 0.9\n'
            f'remember apikey user Fact predicate api-key object "{key}" confidence 0.9\n'
            "respond ok"
        )
        assert result.ok, result.error
        lines = await facts.tiered_injection()
    finally:
        await facts.close()
    assert all(own not in line and key not in line for line in lines)
    for path in [*settings.home.rglob("*"), *tmp_path.glob("home/memory.db*")]:
        if path.is_file():
            blob = path.read_bytes()
            assert own.encode() not in blob and key.encode() not in blob, path


async def test_a_name_that_looks_like_a_secret_is_refused_and_a_links_provenance_is_redacted(tmp_path: Path) -> None:
    token = "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5"
    settings = MemorySettings(home=tmp_path / "home", claude_config_dir=tmp_path / "c", codex_home=tmp_path / "x")
    facts = await FactsApi.from_settings(settings)
    try:
        for script in (
            f"link user {token} knows",
            "remember s5 password=hunter2 Fact predicate p object o",
            "link user x password=hunter2",
            f"remember {token} user Fact predicate p object o",
        ):
            result = await facts.run_script(script)
            assert not result.ok and "looks like a secret" in result.text, script
            assert token not in result.text and "hunter2" not in result.text
        report = await facts.load_snapshot(
            "link user eywa works-on 0.5 ;# created 2025-01-01T00:00:00Z from password=hunter2\n"
        )
        assert report.added == 1
        snapshot = await facts.export_snapshot()
    finally:
        await facts.close()
    assert "hunter2" not in snapshot
    for path in [*settings.home.rglob("*"), *tmp_path.glob("home/memory.db*")]:
        if path.is_file():
            blob = path.read_bytes()
            assert token.encode() not in blob and b"hunter2" not in blob, path
