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
