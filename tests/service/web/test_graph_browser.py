"""The facts page in real Chromium (tests/service/web/browser_rig.py), at a phone's 390×844 and a desktop's
1280×800, light and dark: the live graph (static/graph.js) pans, zooms and opens a node's memory, its labels
are readable (≥ 12 px at the default zoom) in AA contrast, it fills its box; Forget asks first and comes
back to the next row; a refused form keeps what was typed and lands at the form. Hostile fact text (labels
included) stays text, and no CSP violation is logged."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from memory.facts import format_list
from memory.facts.api import FactsApi
from tests.service.web.browser_rig import SIZES, THEMES, Opened, assert_tap_target, logged_in_pages
from tests.service.web.conftest import HOSTILE, memory_settings, seed_memory
from tests.service.web.contrast import contrast, luminance


async def _seed(home: Path) -> None:
    """The hostile seed and a graph worth drawing: a big star (user), a few small parts, and a fact whose value
    is all payloads."""
    await seed_memory(home)
    lines = [f"remember pref{i} user Fact predicate likes object {{thing number {i}}}" for i in range(14)]
    lines += [f"remember own{i} team{i} Fact predicate owns object {{service {i}}}" for i in range(5)]
    lines.append(format_list(["remember", "payload", "mallory", "Fact", "predicate", "says", "object", HOSTILE]))
    facts = await FactsApi.from_settings(memory_settings(home))
    try:
        result = await facts.run_script("\n".join(lines), provenance="test")
        assert result.ok, result.error
    finally:
        await facts.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Opened]:
    with logged_in_pages(tmp_path_factory, "graph-browser", _seed) as (opened, _):
        yield opened


def transform(b: Opened) -> str:
    return str(b.js("return document.querySelector('#graph-live g.view').getAttribute('transform')"))


def scale_of(b: Opened) -> float:
    found = re.search(r"scale\(([\d.]+)\)", transform(b))
    assert found, transform(b)
    return float(found.group(1))


def live_graph(b: Opened, size: str, theme: str) -> WebElement:
    b.open("/facts", SIZES[size], theme, emulated=True)
    b.wait(lambda drv: drv.find_elements(By.CSS_SELECTOR, "#graph-live .node"))
    return b.driver.find_element(By.ID, "graph-live")


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("size", list(SIZES))
def test_the_graph_is_readable_fills_its_box_and_follows_the_theme(browser: Opened, size: str, theme: str) -> None:
    b = browser
    svg = live_graph(b, size, theme)
    assert not b.driver.find_element(By.ID, "graph").is_displayed()  # the picture gives way to the live graph
    box = b.js("const r = arguments[0].getBoundingClientRect(); return [r.left, r.top, r.width, r.height]", svg)
    assert box[2] <= SIZES[size][0]
    labels = b.js(
        "return [...arguments[0].querySelectorAll('.label')].map(t => {"
        " const s = getComputedStyle(t); return [parseFloat(s.fontSize), s.fill, t.textContent]; })",
        svg,
    )
    assert len(labels) >= 20
    assert min(size_px for size_px, _, _ in labels) >= 12  # at the default zoom, one unit is one CSS pixel
    background = b.js("return getComputedStyle(document.getElementById('graph-box')).backgroundColor")
    assert (luminance(background) < 0.05) == (theme == "dark"), background  # no white box in the dark
    assert all(contrast(fill, background) >= 4.5 for _, fill, _ in labels), (labels[0], background)
    dots = b.js(
        "return [...arguments[0].querySelectorAll('.dot')].map(c => {"
        " const r = c.getBoundingClientRect();"
        " return [getComputedStyle(c).fill, r.x + r.width / 2, r.y + r.height / 2]; })",
        svg,
    )
    assert all(contrast(fill, background) >= 3 for fill, _, _ in dots), (dots[0], background)
    edge = b.js("return getComputedStyle(arguments[0].querySelector('.edge')).stroke", svg)
    assert contrast(edge, background) >= 3, edge
    # Spread over the box, every node inside it: no corner holds them all.
    xs, ys = [x for _, x, _ in dots], [y for _, _, y in dots]
    assert min(xs) >= box[0] and max(xs) <= box[0] + box[2] and min(ys) >= box[1] and max(ys) <= box[1] + box[3]
    assert max(xs) - min(xs) >= 0.6 * box[2] and max(ys) - min(ys) >= 0.6 * box[3], (xs, ys, box)
    # The payloads are a label's text: no element came of them.
    payload = b.js("return arguments[0].querySelector('.node[data-key=payload] title').textContent", svg)
    assert payload.startswith("<script>window.__pwned=1</s"), payload  # cut to 28 by build_graph
    assert not b.js("return arguments[0].querySelectorAll('img, script, foreignObject').length", svg)
    b.inert()
    b.shot(f"graph-{size}-{theme}")


@pytest.mark.parametrize("size", list(SIZES))
def test_the_graph_pans_zooms_and_a_tapped_node_opens_its_memory(browser: Opened, size: str) -> None:
    b = browser
    svg = live_graph(b, size, "light")
    start = transform(b)
    assert scale_of(b) == 1
    # A drag pans, even one that starts on a node, and opens nothing.
    node = svg.find_element(By.CSS_SELECTOR, '.node[data-key="user"] .dot')
    ActionChains(b.driver).click_and_hold(node).move_by_offset(40, 30).move_by_offset(20, 10).release().perform()
    panned = transform(b)
    assert panned != start and "/facts?q=user" not in b.driver.current_url
    x, y = (float(v) for v in re.findall(r"-?[\d.]+", panned)[:2])
    assert abs(x - 60) <= 2 and abs(y - 40) <= 2, panned
    # The buttons zoom about the middle; Ctrl+wheel (a trackpad's pinch) about the pointer.
    b.driver.find_element(By.CSS_SELECTOR, '.graph-tools button[data-act="in"]').click()
    assert scale_of(b) == pytest.approx(1.4, abs=0.01)
    rect = b.js("const r = arguments[0].getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]", svg)
    b.driver.execute_cdp_cmd(
        "Input.dispatchMouseEvent",
        {"type": "mouseWheel", "x": rect[0], "y": rect[1], "deltaX": 0, "deltaY": -200, "modifiers": 2},
    )
    b.wait(lambda _: scale_of(b) > 1.45)
    # Two fingers apart pinch it larger still (a phone).
    before = scale_of(b)
    cx, cy = rect
    touches = [
        ("touchStart", [(cx - 20, cy), (cx + 20, cy)]),
        ("touchMove", [(cx - 40, cy), (cx + 40, cy)]),
        ("touchMove", [(cx - 60, cy), (cx + 60, cy)]),
        ("touchEnd", []),
    ]
    for kind, points in touches:
        b.driver.execute_cdp_cmd(
            "Input.dispatchTouchEvent",
            {"type": kind, "touchPoints": [{"x": px, "y": py, "id": i} for i, (px, py) in enumerate(points)]},
        )
    b.wait(lambda _: scale_of(b) > before * 2)
    b.driver.find_element(By.CSS_SELECTOR, '.graph-tools button[data-act="reset"]').click()
    assert transform(b) == start
    # A tap (a click that did not move) opens the memory at its row.
    b.driver.find_element(By.CSS_SELECTOR, '#graph-live .node[data-key="coffee"] .dot').click()
    b.wait(lambda drv: drv.current_url.endswith("/facts?q=coffee#fact-coffee"))
    assert b.js("return document.querySelector(':target').id") == "fact-coffee"
    b.inert()


def test_forget_asks_first_then_comes_back_to_the_next_row_in_full_size_targets(browser: Opened) -> None:
    b = browser
    b.open("/facts?q=pref", SIZES["phone"], "dark", emulated=True)
    row = b.driver.find_element(By.CSS_SELECTOR, "#facts tbody tr")
    assert b.js("return getComputedStyle(arguments[0]).display", row) == "block"  # a card, not a table row
    edit, forget = row.find_element(By.CSS_SELECTOR, "a.edit"), row.find_element(By.CSS_SELECTOR, "a.forget")
    for target in (edit, forget):
        assert_tap_target(target)
    gap = forget.location["x"] - (edit.location["x"] + edit.size["width"])
    assert gap >= 8 or forget.location["y"] >= edit.location["y"] + edit.size["height"] + 8
    first = row.get_attribute("data-id")
    second = b.driver.find_elements(By.CSS_SELECTOR, "#facts tbody tr")[1].get_attribute("data-id")
    b.inert()
    b.js("arguments[0].scrollIntoView()", row)
    b.shot("facts-cards-phone-dark")
    forget.click()
    b.wait(lambda drv: "forget=1" in drv.current_url)
    keep, really = b.driver.find_element(By.ID, "keep"), b.driver.find_element(By.ID, "forget")
    assert_tap_target(keep, wide=False)
    assert_tap_target(really, wide=False)
    b.inert()
    b.shot("forget-question-phone-dark")
    really.click()
    b.wait(lambda drv: "done=forget" in drv.current_url)
    assert b.driver.current_url.endswith(f"#fact-{second}")
    assert not b.driver.find_elements(By.CSS_SELECTOR, f'tr[data-id="{first}"]')
    top = b.js("return document.getElementById(arguments[0]).getBoundingClientRect().top", f"fact-{second}")
    assert 0 <= top < 844  # the page came back where the row was, not to its top
    b.inert()


def test_a_refused_remember_keeps_what_was_typed_and_lands_at_its_form(browser: Opened) -> None:
    b = browser
    b.open("/facts", SIZES["phone"], "light", emulated=True)
    form = b.driver.find_element(By.ID, "remember-form-Fact")
    for name, value in (("id", "editor"), ("subject", "user"), ("f_predicate", "uses"), ("f_object", "Vim <i>")):
        form.find_element(By.NAME, name).send_keys(value)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    b.wait(lambda drv: drv.current_url.endswith("#remember-Fact") and drv.find_elements(By.ID, "error"))
    assert "already exists" in b.driver.find_element(By.ID, "error").text
    form = b.driver.find_element(By.ID, "remember-form-Fact")
    assert form.find_element(By.NAME, "f_object").get_attribute("value") == "Vim <i>"
    top = b.js("return document.getElementById('error').getBoundingClientRect().top")
    assert 0 <= top < 844
    b.inert()
