"""The automated accessibility pass, in headless Chromium against a real `macupos serve --local` process over
seeded (hostile) memory: every page at a phone's size (390×844) and a desktop's (1280×800), in the light and
the dark theme, checked by axe-core (WCAG 2 A and AA rules) with no serious or critical violation, every
tap target at least 44×44 CSS px, and no sideways scroll on the phone. Then the Mini App's frame: Telegram's
theme colours on every page of its login, and Telegram's BackButton going back in history.

axe-core comes from npm (`scripts/setup --test` puts it in .node/); the test reads it from disk and injects
it through WebDriver, which the pages' CSP does not govern (the test checks that the console shows no CSP
refusal), so nothing is fetched from anywhere but 127.0.0.1.

Tap targets (the rule this checks): every visible button, text field, select, textarea, summary, nav link
(the page tabs and the pagers), link-button (a.button) and the brand link is at least 44 px tall and 44 px
wide; a checkbox or radio is measured by the label that wraps it. A link inside prose is exempt (WCAG 2.5.5's
inline exception).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from memory.facade import Eywa
from memory.storage.ledger import CostEntry
from tests.service.web.browser_rig import SIZES, TARGET_PX, THEMES, Opened, logged_in_pages, view
from tests.service.web.conftest import memory_settings, seed_memory
from tests.service.web.local_pages import telegram_init_data

pytestmark = pytest.mark.slow

AXE = Path(__file__).parents[3] / ".node" / "node_modules" / "axe-core" / "axe.min.js"
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]

# axe.run in the page: its serious and critical violations, each with its nodes' targets and summaries.
RUN_AXE = """
const done = arguments[arguments.length - 1];
axe.run(document, {runOnly: {type: "tag", values: arguments[0]}, resultTypes: ["violations"]})
  .then(r => done(r.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map(n => ({target: n.target.join(" "), summary: n.failureSummary}))}))))
  .catch(e => done([{id: "axe-error", impact: "critical", help: String(e), nodes: []}]));
"""

# Every tap target smaller than the least size (see the module's docstring for the rule).
SMALL_TARGETS = """
const least = arguments[0];
const sel = "button, input:not([type=hidden]), select, textarea, summary, nav a, a.button, a.brand";
const small = [];
for (const el of document.querySelectorAll(sel)) {
  if (!el.getClientRects().length || getComputedStyle(el).visibility === "hidden") continue;
  const box = (el.type === "checkbox" || el.type === "radio") && el.closest("label") || el;
  const r = box.getBoundingClientRect();
  if (r.width < least - 0.5 || r.height < least - 0.5) {
    const what = `${el.tagName.toLowerCase()}${el.className ? "." + el.className : ""}`;
    const text = (el.textContent || el.name || "").trim().slice(0, 30);
    small.push(`${what} "${text}" ${Math.round(r.width)}x${Math.round(r.height)}`);
  }
}
return small;
"""


@dataclass
class Rig(Opened):
    ids: dict[str, str] = field(default_factory=dict)
    cookies: list[dict[str, Any]] = field(default_factory=list)  # the owner's login, put back after a logout

    def csp_refusals(self) -> list[str]:
        entries = self.driver.get_log("browser")  # type: ignore[attr-defined]  # Chromium's own command
        logs = [str(e["message"]) for e in entries]
        return [m for m in logs if "Content Security Policy" in m or "Refused to" in m]

    def logged_out(self) -> None:
        self.driver.delete_all_cookies()

    def logged_in(self) -> None:
        self.driver.delete_all_cookies()
        for cookie in self.cookies:
            self.driver.add_cookie(cookie)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    if not AXE.is_file():
        pytest.fail(f"axe-core is missing at {AXE}: run scripts/setup --test")
    with logged_in_pages(tmp_path_factory, "a11y", _seed) as (opened, ids):
        opened.driver.set_script_timeout(120)
        yield Rig(opened.url, opened.link, opened.driver, opened.shots, opened.home, ids, opened.driver.get_cookies())


async def _seed(home: Path) -> dict[str, str]:
    ids = await seed_memory(home)
    async with await Eywa.open(memory_settings(home)) as eywa:  # something spent, so Cost shows its tables
        for engine, tokens in (("claude", 120_000), ("codex", 4_000)):
            entry = CostEntry(engine=engine, model=f"{engine}-model", session_id=ids["main"], stage="turn",
                              input_tokens=tokens, cost_usd=tokens / 1e6, duration_s=12.0)  # fmt: skip
            await eywa.record_cost(entry)
    return ids


def _pages(ids: dict[str, str]) -> list[tuple[str, str, bool]]:
    """(name, path, logged in) for every page."""
    return [
        ("login", "/login", False),
        ("mini-app", "/tg", False),
        ("search", "/search?q=zeppelin+exporter", True),
        ("sessions", "/sessions", True),
        ("session", f"/sessions/{quote(ids['main'])}", True),
        ("review", "/review", True),
        ("facts", "/facts", True),
        ("fact-edit", "/facts/edit?id=editor", True),
        ("cost", "/cost", True),
        ("stats", "/stats", True),
        ("not-found", "/no/such/page", True),
    ]


@pytest.mark.parametrize("scheme", THEMES)
@pytest.mark.parametrize("size", list(SIZES))
def test_every_page_passes_axe_with_full_tap_targets_and_no_sideways_scroll(rig: Rig, size: str, scheme: str) -> None:
    d = rig.driver
    view(d, SIZES[size], scheme)
    axe_source = AXE.read_text(encoding="utf-8")
    problems: list[str] = []
    for name, path, logged_in in _pages(rig.ids):
        rig.logged_in() if logged_in else rig.logged_out()
        rig.go(path)
        rig.loaded()
        assert d.execute_script("return matchMedia('(prefers-color-scheme: dark)').matches") == (scheme == "dark")
        where = f"{name} ({path}) at {size} in {scheme}"
        d.execute_script(axe_source)
        assert d.execute_script("return typeof window.axe") == "object", f"axe did not load on {where}"
        for v in d.execute_async_script(RUN_AXE, WCAG_TAGS):
            nodes = "; ".join(f"{n['target']}: {' '.join(str(n['summary']).split())}" for n in v["nodes"])
            problems.append(f"{where}: axe {v['impact']} {v['id']} ({v['help']}) at {nodes}")
        problems += [f"{where}: tap target {t}" for t in d.execute_script(SMALL_TARGETS, TARGET_PX)]
        if size == "phone":
            width = d.execute_script("return window.innerWidth")
            assert width <= SIZES["phone"][0], f"the phone's viewport is {width}px wide"
            overflow = d.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
            if overflow > 1:
                problems.append(f"{where}: the page scrolls sideways by {overflow}px")
        problems += [f"{where}: {m}" for m in rig.csp_refusals()]
    rig.logged_in()
    assert not problems, "\n".join(problems)


def _tg_launch_fragment(theme: dict[str, str]) -> str:
    data = telegram_init_data()
    return (
        f"#tgWebAppData={quote(data, safe='')}&tgWebAppVersion=8.0&tgWebAppPlatform=android"
        f"&tgWebAppThemeParams={quote(json.dumps(theme), safe='')}"
    )


# Telegram's apps expose window.TelegramWebviewProxy to a Mini App; this one records what the page posts.
FAKE_TELEGRAM = """
window.__tgEvents = [];
window.TelegramWebviewProxy = {postEvent: function (type, data) { window.__tgEvents.push([type, data]); }};
"""


def test_the_mini_app_wears_telegrams_theme_and_its_back_button_goes_back(rig: Rig) -> None:
    d = rig.driver
    view(d, SIZES["phone"], "light")
    theme = {
        "bg_color": "#212121",
        "secondary_bg_color": "#181818",
        "text_color": "#ffffff",
        "hint_color": "#aaaaaa",
        "link_color": "#8774e1",
        "button_color": "#8774e1",
        "button_text_color": "#ffffff",
        "section_bg_color": "url(https://example.invalid/x)",  # not a colour: ignored
    }
    script = d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": FAKE_TELEGRAM})
    wait = WebDriverWait(d, 30)

    def var(name: str) -> str:
        style = "return getComputedStyle(document.documentElement).getPropertyValue(arguments[0])"
        return str(d.execute_script(style, name)).strip()

    def back_button() -> list[bool]:
        events = d.execute_script("return window.__tgEvents") or []
        return [json.loads(data)["is_visible"] for kind, data in events if kind == "web_app_setup_back_button"]

    try:
        rig.logged_out()
        rig.go("/tg" + _tg_launch_fragment(theme))
        rig.loaded()
        wait.until(lambda drv: drv.current_url.endswith("/review"))
        rig.loaded()
        assert "tgWebAppData" not in d.current_url
        assert (var("--bg"), var("--fg"), var("--button")) == ("#181818", "#ffffff", "#8774e1")
        assert var("--card") == "#212121"  # the hostile section_bg_color was not taken; bg_color was
        assert d.execute_script("return document.documentElement.dataset.theme") == "dark"
        assert d.execute_script("return getComputedStyle(document.body).backgroundColor") == "rgb(24, 24, 24)"
        header = d.find_element(By.CSS_SELECTOR, "header.top").text
        assert "telegram Ann" in header and "Log out" not in header
        assert back_button() == [False]  # the first page: nowhere to go back to
        d.find_element(By.CSS_SELECTOR, 'nav a[href="/stats"]').click()
        wait.until(lambda drv: drv.current_url.endswith("/stats"))
        rig.loaded()
        assert var("--bg") == "#181818"  # a later page of the login keeps Telegram's colours
        assert back_button() == [True]
        # As Telegram does. ChromeDriver runs a script again on the next page when a navigation the script
        # started ends its page first (SeleniumHQ/selenium#9734): under load, one press went back twice. The
        # tab's sessionStorage outlives the page, so a second run of this script presses nothing.
        press = """
            if (sessionStorage.getItem("test.back.pressed")) { return; }
            sessionStorage.setItem("test.back.pressed", "1");
            window.Telegram.WebView.receiveEvent("back_button_pressed", null);
        """
        d.execute_script(press)
        try:
            wait.until(lambda drv: drv.current_url.endswith("/review"))
        except TimeoutException:  # say where the tab was and what the page said
            where = d.execute_script("return [location.href, history.length, history.state, window.__tgEvents]")
            raise AssertionError(f"Back did not return to /review: {where}") from None
        wait.until(lambda drv: drv.execute_script("return window.__tgEvents && window.__tgEvents.length > 0"))
        assert back_button()[-1] is False
        assert d.current_url.endswith("/review")  # one press, one page back
        assert not rig.csp_refusals()
    finally:
        d.execute_script('sessionStorage.removeItem("test.back.pressed")')
        d.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": script["identifier"]})
        rig.logged_in()
