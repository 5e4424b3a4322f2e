"""The memory pages in a real browser: headless Chromium (Debian's chromium and chromium-driver, installed by
`scripts/setup --test`) driven by selenium, against a real `macupos serve --local` process.

Log in with the one-time link, search, open a session, forget a handoff, edit a fact, see the graph, at a
phone's width (390 px) and a desktop's; hostile handoff, transcript and fact text stays inert (no script
runs, no dialog opens, no CSP violation is even attempted); a change without the CSRF token is refused; the
Mini App logs in with valid initData and refuses forged and stale data. Screenshots go to the test's temp
folder for a person to look at.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from service.web.initdata import sign_init_data
from tests.service.web.browser_rig import assert_inert, owner_pages
from tests.service.web.conftest import BOT_TOKEN, OWNER_ID, seed_memory

WIDTHS = {"phone": (390, 844), "desktop": (1280, 900)}


class Pages:
    def __init__(self, url: str, token: str, ids: dict[str, str], shots: Path, driver: WebDriver) -> None:
        self.url = url
        self.token = token
        self.ids = ids
        self.shots = shots
        self.driver = driver

    def go(self, path: str) -> None:
        self.driver.get(self.url + path)

    def wait(self, check: object, timeout: float = 20) -> None:
        WebDriverWait(self.driver, timeout).until(check)  # type: ignore[arg-type]

    def inert(self) -> None:
        assert_inert(self.driver)

    def shot(self, name: str) -> None:
        self.driver.save_screenshot(str(self.shots / f"{name}.png"))

    def text(self, css: str) -> str:
        return str(self.driver.find_element(By.CSS_SELECTOR, css).text)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pages]:
    root = tmp_path_factory.mktemp("browser")
    home = root / "home"
    ids = asyncio.run(seed_memory(home))
    with owner_pages(root, home) as opened:
        token = opened.link.split("token=", 1)[1]
        yield Pages(opened.url, token, ids, opened.shots, opened.driver)


def test_log_in_search_and_open_a_session_at_phone_and_desktop_widths(pages: Pages) -> None:
    d = pages.driver
    pages.go("/review")
    assert "/login" in d.current_url  # no session yet
    pages.go(f"/login?token={pages.token}")
    pages.wait(lambda drv: drv.current_url.rstrip("/") == pages.url)
    for width, size in WIDTHS.items():
        d.set_window_size(*size)
        pages.go("/search")
        box = d.find_element(By.ID, "q")
        box.clear()
        box.send_keys("zeppelin exporter")
        d.find_element(By.ID, "search").click()
        pages.wait(lambda drv: "q=zeppelin" in drv.current_url)
        results = d.find_elements(By.CSS_SELECTOR, "article.result")
        assert results, "the grounding shows at least one handoff"
        pages.inert()
        pages.shot(f"search-{width}")
        results[0].find_element(By.CSS_SELECTOR, "summary").click()  # the --explain breakdown
        assert "recency" in results[0].text
        pages.go(f"/sessions/{quote(pages.ids['main'])}")
        body = pages.text("#transcript-body")
        assert "<script>window.__pwned=1</script>" in body  # the payload is shown as text
        codex = d.find_element(By.CSS_SELECTOR, f'#children a[href="/sessions/{pages.ids["codex"]}"]')
        assert "codex" in codex.find_element(By.XPATH, "..").text  # the rollout it spawned, linked and marked
        pages.inert()
        pages.shot(f"session-{width}")
        pages.go("/sessions")
        pages.inert()
        pages.shot(f"sessions-{width}")


def test_forget_a_handoff_and_a_change_without_the_csrf_token_is_refused(pages: Pages) -> None:
    d = pages.driver
    d.set_window_size(*WIDTHS["phone"])
    pages.go("/review")
    pages.inert()
    pages.shot("review-phone")
    imported = f'article[data-session="{pages.ids["imported"]}"]'
    card = d.find_element(By.CSS_SELECTOR, imported)
    assert "<img src=x onerror=window.__pwned=1>" in card.text
    # A forged token: the form posts, the server refuses, nothing changes.
    d.execute_script("arguments[0].querySelector('input[name=csrf]').value = 'forged'", card)
    card.find_element(By.CSS_SELECTOR, "button.forget").click()
    pages.wait(lambda drv: drv.find_elements(By.ID, "error"))
    assert "security token" in pages.text("#error")
    pages.shot("csrf-refused-phone")
    pages.go("/review")
    card = d.find_element(By.CSS_SELECTOR, imported)
    card.find_element(By.CSS_SELECTOR, "button.forget").click()
    pages.wait(lambda drv: drv.find_elements(By.ID, "confirm-forget"))  # Forget asks first
    d.find_element(By.ID, "confirm-forget").click()
    pages.wait(lambda drv: "done=forgotten" in drv.current_url)
    assert "Forgotten" in pages.text("#done")
    assert not d.find_elements(By.CSS_SELECTOR, imported)
    pages.inert()


def test_edit_a_fact_and_see_the_graph(pages: Pages) -> None:
    d = pages.driver
    for width, size in WIDTHS.items():
        d.set_window_size(*size)
        pages.go("/facts")
        pages.inert()
        row = d.find_element(By.CSS_SELECTOR, 'tr[data-id="editor"]')
        row.find_element(By.CSS_SELECTOR, "a.edit").click()
        pages.wait(lambda drv: "/facts/edit" in drv.current_url)
        value = d.find_element(By.NAME, "f_object")
        value.clear()
        value.send_keys(f"Zed <b>{width}</b>")
        d.find_element(By.ID, "save").click()
        pages.wait(lambda drv: "done=edit" in drv.current_url)
        assert f"Zed <b>{width}</b>" in d.find_element(By.CSS_SELECTOR, 'tr[data-id="editor"] .object').text
        pages.go("/facts?root=user")
        graph = d.find_element(By.ID, "graph")
        pages.wait(lambda drv, graph=graph: drv.execute_script("return arguments[0].complete", graph))
        assert d.execute_script("return arguments[0].naturalWidth", graph) > 0  # the SVG loaded and drew
        assert graph.size["width"] <= size[0]
        pages.inert()
        pages.shot(f"facts-{width}")


def test_the_mini_app_logs_in_with_valid_init_data_and_refuses_forged_and_stale(pages: Pages) -> None:
    d = pages.driver
    d.set_window_size(*WIDTHS["phone"])
    d.delete_all_cookies()

    def launch(user: int = OWNER_ID, age: float = 20, token: str = BOT_TOKEN) -> None:
        fields = {"user": json.dumps({"id": user, "first_name": "Ann"}), "auth_date": str(int(time.time() - age))}
        data = sign_init_data(fields, token)
        # As Telegram opens a Mini App: the launch parameters in the URL's fragment.
        pages.go(f"/tg#tgWebAppData={quote(data, safe='')}&tgWebAppVersion=8.0&tgWebAppPlatform=android")

    for case, why in (({"token": "654321:OTHER-BOT"}, "not signed"), ({"age": 7200}, "too old")):
        launch(**case)  # type: ignore[arg-type]
        pages.wait(lambda drv: "refused" in drv.find_element(By.ID, "tg-status").text)
        assert why in pages.text("#tg-status")
        assert "tgWebAppData" not in d.current_url  # the credential left the address bar
        pages.inert()
        pages.go("/stats")
        assert "/login" in d.current_url
    launch()
    pages.wait(lambda drv: drv.current_url.endswith("/review"))
    pages.inert()
    pages.shot("mini-app-review-phone")
    assert "telegram Ann" in pages.text(".who")
