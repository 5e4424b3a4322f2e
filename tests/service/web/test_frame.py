"""The frame every memory page shares, over real HTTP: the favicon, an unknown address answered inside the
layout (an API client still gets JSON), the Mini App's frame (Telegram's script, no "Log out"), tables that
become cards on a phone, and the palette's contrast in both themes (WCAG AA, computed from app.css)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memory.facade import Eywa
from memory.storage.ledger import CostEntry
from service.web.security import CSP
from tests.service.web.conftest import memory_settings, running_local, seed_memory
from tests.service.web.contrast import contrast
from tests.service.web.local_pages import logged_in_local, telegram_init_data

APP_CSS = Path(__file__).parents[3] / "service" / "web" / "static" / "app.css"
HTML = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


@pytest.fixture
async def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    ids = await seed_memory(home)
    async with await Eywa.open(memory_settings(home)) as eywa:  # something spent, so Cost shows its tables
        await eywa.record_cost(
            CostEntry(engine="claude", model="claude-sonnet", session_id=ids["main"], input_tokens=1200, cost_usd=0.01)
        )
    return home


async def test_the_favicon_is_served_and_every_page_links_it(home: Path) -> None:
    async with running_local(home) as srv, srv.client() as web:
        icon = await web.get("/favicon.ico")
        assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
        assert icon.content.startswith(b"<svg")
        assert '<link rel="icon" href="/favicon.ico"' in (await web.get("/login")).text
        await web.get(f"/login?token={srv.token}")
        for path in ("/search", "/cost", "/stats", "/no/such/page"):
            page = await web.get(path, headers=HTML)
            assert '<link rel="icon" href="/favicon.ico" type="image/svg+xml">' in page.text, path


async def test_an_unknown_address_is_a_page_in_the_layout_for_a_browser_and_json_for_a_client(home: Path) -> None:
    async with running_local(home) as srv, srv.client() as web:
        anonymous = await web.get("/no/such/page", headers=HTML)
        assert anonymous.status_code == 404 and anonymous.headers["content-type"].startswith("text/html")
        assert anonymous.headers["content-security-policy"] == CSP
        assert '<header class="top">' in anonymous.text and "<h1>Page not found" in anonymous.text
        assert 'href="/login"' in anonymous.text  # a way on: log in first
        await web.get(f"/login?token={srv.token}")
        page = await web.get("/no/such/page", headers=HTML)
        assert page.status_code == 404 and '<nav aria-label="Memory pages">' in page.text
        assert 'id="error"' in page.text and 'href="/search"' in page.text  # the message and a way back
        client = await web.get("/no/such/page")  # no text/html in Accept: an API client
        assert client.status_code == 404 and client.json()["error"]["code"] == "not_found"
        api = await web.get("/v1/nothing", headers=HTML)  # the API's addresses stay JSON even for a browser
        assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"


async def test_a_telegram_login_has_telegrams_script_and_no_log_out(home: Path) -> None:
    async with running_local(home) as srv, srv.client() as web:
        entry = await web.get("/tg")
        assert '<script src="/static/telegram.js"></script>' in entry.text
        assert (await web.post("/tg/auth", data={"init_data": telegram_init_data()})).status_code == 200
        page = await web.get("/stats")
        assert page.status_code == 200 and "telegram Ann" in page.text
        assert '<script src="/static/telegram.js"></script>' in page.text
        assert "Log out" not in page.text and 'action="/logout"' not in page.text
        js = await web.get("/static/telegram.js")
        assert js.status_code == 200 and "javascript" in js.headers["content-type"]
        assert js.headers["x-content-type-options"] == "nosniff"
    async with logged_in_local(home) as web:
        page = await web.get("/stats")
        assert "Log out" in page.text and "<script" not in page.text  # a browser login: no script at all


async def test_cost_tables_label_every_cell_for_the_narrow_screen_cards(home: Path) -> None:
    async with logged_in_local(home) as web:
        page = (await web.get("/cost")).text
    tables = re.findall(r"<table[^>]*>.*?</table>", page, re.S)
    assert len(tables) == 3
    for table in tables:
        assert 'class="cards"' in table.split(">", 1)[0]
        headers = re.findall(r"<th>([^<]*)</th>", table)
        cells = re.findall(r"<td( data-label=\"([^\"]*)\")?>", table)
        assert cells and all(label for _, label in cells)
        assert {label for _, label in cells} == set(headers)  # each cell named after its column


def _palettes() -> dict[str, dict[str, str]]:
    css = APP_CSS.read_text(encoding="utf-8")

    def block(selector: str) -> dict[str, str]:
        body = css[css.index(selector) :]
        body = body[body.index("{") + 1 : body.index("}")]
        return dict(re.findall(r"(--[a-z-]+):\s*(#[0-9a-fA-F]{3,6})", body))

    light = block(":root {")
    dark = light | block(':root[data-theme="dark"]')
    in_media = light | block(':root:not([data-theme="light"])')
    assert in_media == dark, "the two dark blocks of app.css differ"
    return {"light": light, "dark": dark}


# (foreground, background, least ratio): text 4.5:1; a control's boundary against what it sits on 3:1.
PAIRS = [
    *((fg, bg, 4.5) for fg in ("--fg", "--muted", "--link", "--danger", "--ok") for bg in ("--bg", "--card")),
    ("--on-button", "--button", 4.5),
    ("--on-danger", "--danger-bg", 4.5),
    ("--button", "--bg", 3.0),
    ("--button", "--card", 3.0),
    ("--danger-bg", "--card", 3.0),
    ("--control", "--card", 3.0),
    ("--control", "--bg", 3.0),
    ("--focus", "--bg", 3.0),
    ("--focus", "--card", 3.0),
]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_palette_meets_wcag_aa_contrast(theme: str) -> None:
    palette = _palettes()[theme]
    low = [
        f"{fg} on {bg}: {contrast(palette[fg], palette[bg]):.2f} < {least}"
        for fg, bg, least in PAIRS
        if contrast(palette[fg], palette[bg]) < least
    ]
    assert not low, low
