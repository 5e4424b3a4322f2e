"""Review, Sessions and Search in a real Chromium (tests/service/web/browser_rig.py) against a real
`macupos serve --local`, at a phone's width and a desktop's, light and dark: the keyboard on Review (/, j/k,
y keep, d forget with its confirm, Escape to cancel), bulk keep and forget, the "N new — show" bar that live
updates raise without a reload, and a search that matches nothing. Hostile text stays inert throughout and
no page scrolls sideways. Every wait is bounded (WebDriverWait)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.service.web.browser_rig import THEMES, Opened, assert_tap_target, emulate_theme, logged_in_pages, view
from tests.service.web.conftest import seed_memory
from tests.service.web.test_review_page import add_pending

WIDTHS = {"phone": (390, 844), "desktop": (1280, 900)}
CARD = "article.card.review"


@dataclass
class Rig(Opened):
    def keys(self, *keys: str) -> None:
        ActionChains(self.driver).send_keys(*keys).perform()

    def cards(self) -> list[str]:
        return [str(e.get_attribute("data-session")) for e in self.driver.find_elements(By.CSS_SELECTOR, CARD)]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    with logged_in_pages(tmp_path_factory, "review-browser", seed_memory) as (opened, _):
        yield Rig(opened.url, opened.link, opened.driver, opened.shots, opened.home)


@pytest.mark.parametrize("scheme", THEMES)
@pytest.mark.parametrize("width", list(WIDTHS))
def test_the_keyboard_moves_keeps_and_forgets_with_its_confirm(rig: Rig, width: str, scheme: str) -> None:
    d = rig.driver
    view(d, WIDTHS[width], scheme)
    asyncio.run(add_pending(rig.home, *(f"keys-{width}-{scheme}-{i}" for i in range(3)), project=f"k{width}{scheme}"))
    rig.go(f"/review?project=k{width}{scheme}")
    cards = rig.cards()
    assert len(cards) == 3
    rig.keys("/")
    assert d.switch_to.active_element.get_attribute("id") == "filter"
    rig.keys(Keys.ESCAPE, "j", "j", "k")
    current = d.find_elements(By.CSS_SELECTOR, f"{CARD}.current")
    assert [c.get_attribute("data-session") for c in current] == [cards[0]]
    rig.keys("y")  # keep the first: back at the one after it
    rig.wait(lambda drv: "done=kept" in drv.current_url)
    assert d.current_url.endswith("#h-" + quote(cards[1], safe=""))
    assert rig.cards() == cards[1:]
    assert d.find_element(By.CSS_SELECTOR, f"{CARD}.current").get_attribute("data-session") == cards[1]
    assert d.find_element(By.ID, "done").is_displayed()  # sticky: in view at the card
    rig.inert()
    rig.shot(f"review-kept-{width}-{scheme}")
    rig.keys("d")  # forget asks first; Escape cancels back to the card
    rig.wait(lambda drv: drv.find_elements(By.ID, "confirm-forget"))
    assert d.switch_to.active_element.get_attribute("id") == "confirm-forget"
    rig.inert()
    rig.shot(f"review-confirm-{width}-{scheme}")
    rig.keys(Keys.ESCAPE)
    rig.wait(lambda drv: drv.find_elements(By.CSS_SELECTOR, CARD))
    assert rig.cards() == cards[1:]
    rig.keys("d")
    rig.wait(lambda drv: drv.find_elements(By.ID, "confirm-forget"))
    rig.keys(Keys.ENTER)
    rig.wait(lambda drv: "done=forgotten" in drv.current_url)
    assert rig.cards() == cards[2:]
    rig.inert()


def test_bulk_keep_and_forget_with_a_confirm(rig: Rig) -> None:
    d = rig.driver
    view(d, WIDTHS["phone"], "light")
    names = asyncio.run(add_pending(rig.home, *(f"bulk-{i}" for i in range(4)), project="bulkp"))
    rig.go("/review?project=bulkp")
    boxes = d.find_elements(By.CSS_SELECTOR, f"{CARD} input[type=checkbox]")
    assert len(boxes) == 4
    assert_tap_target(boxes[0].find_element(By.XPATH, ".."))  # the label around a box: a finger's target
    for box in boxes[:2]:
        box.click()
    d.find_element(By.CSS_SELECTOR, "#bulk button.keep").click()
    rig.wait(lambda drv: "done=kept" in drv.current_url)
    assert "Kept: 2 handoffs." in d.find_element(By.ID, "done").text
    left = rig.cards()
    assert len(left) == 2 and set(left) <= set(names)
    for box in d.find_elements(By.CSS_SELECTOR, f"{CARD} input[type=checkbox]"):
        box.click()
    d.find_element(By.CSS_SELECTOR, "#bulk button.forget").click()
    rig.wait(lambda drv: drv.find_elements(By.ID, "confirm-forget"))
    assert "Forget 2 handoffs for good?" in d.find_element(By.ID, "confirm-title").text
    rig.inert()
    d.find_element(By.ID, "confirm-forget").click()
    rig.wait(lambda drv: "done=forgotten" in drv.current_url)
    assert rig.cards() == []
    rig.inert()


@pytest.mark.parametrize("width", list(WIDTHS))
def test_a_new_handoff_raises_the_new_bar_on_review_without_a_reload(rig: Rig, width: str) -> None:
    d = rig.driver
    d.set_window_size(*WIDTHS[width])
    rig.go(f"/review?project=live{width}")
    rig.wait(lambda drv: drv.find_element(By.ID, "live").get_attribute("data-state") == "open")
    assert not d.find_element(By.ID, "live").is_displayed()
    d.execute_script("window.__samePage = 1")
    asyncio.run(add_pending(rig.home, f"live-{width}", project=f"live{width}"))
    rig.wait(lambda drv: drv.find_element(By.ID, "live").is_displayed())
    assert d.find_element(By.ID, "live-count").text == "1"
    assert d.find_element(By.ID, "total").text == "1"
    assert d.execute_script("return window.__samePage") == 1  # no reload happened
    assert_tap_target(d.find_element(By.ID, "live-show"), wide=False)
    rig.inert()
    rig.shot(f"review-live-{width}")
    d.find_element(By.ID, "live-show").click()
    rig.wait(lambda drv: f"live-{width}" in rig.cards())


def test_a_search_that_matches_nothing_says_so_at_both_widths_and_themes(rig: Rig) -> None:
    d = rig.driver
    for width, size in WIDTHS.items():
        d.set_window_size(*size)
        for scheme in THEMES:
            emulate_theme(d, scheme)
            rig.go("/search?q=quetzalcoatl&days_back=36500")
            assert d.find_element(By.ID, "nothing-matched").is_displayed()
            rig.go("/search?q=zeppelin+exporter")
            for summary in d.find_elements(By.CSS_SELECTOR, "details.explain > summary"):
                summary.click()
            d.find_element(By.CSS_SELECTOR, 'a[href="#formula"]').click()
            rig.wait(lambda drv: drv.find_element(By.ID, "formula").is_displayed())
            rig.inert()
            rig.shot(f"search-{width}-{scheme}")
            rig.go("/sessions")
            rig.wait(lambda drv: drv.find_element(By.ID, "live").get_attribute("data-state") == "open")
            rig.inert()
            rig.shot(f"sessions-{width}-{scheme}")
