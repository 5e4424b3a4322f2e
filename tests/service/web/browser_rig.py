"""A real `macupos serve --local` process and headless Chromium (Debian's chromium and chromium-driver) to open
its pages: what the browser tests (tests/service/web/test_*browser.py, test_accessibility.py) and the page
benchmark (bench/web_pages.py) share, with the views they look through (a phone's and a desktop's size, the
light and the dark theme) and the checks they all make (nothing hostile ran, full-size tap targets)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tests.cli_env import MACUPOS
from tests.service.web.conftest import BOT_TOKEN, OWNER_ID

if TYPE_CHECKING:
    import pytest
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.remote.webelement import WebElement

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
T = TypeVar("T")
SIZES = {"phone": (390, 844), "desktop": (1280, 800)}  # (width, height) in CSS px
THEMES = ("light", "dark")
TARGET_PX = 44  # the least width and height of a tap target


def serve_local(home: Path, **env: str) -> tuple[subprocess.Popen[str], str, str]:
    """`macupos serve --local` on a free port over the memory home ``home``, its model calls off, in an
    environment of none of the caller's Macupos, Telegram or agent settings but ``env``: (the process, its URL,
    its one-time login link)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MACUPOS_", "TELEGRAM_", "CLAUDE_", "CODEX_"))}
    proc = subprocess.Popen(
        [str(MACUPOS), "serve", "--local", "--port", "0"],
        env=clean | {"MACUPOS_HOME": str(home), "MACUPOS_MEMORY_LLM": "0"} | env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    url = link = ""
    deadline = time.monotonic() + 60
    while not link and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        if "listening on " in line:
            url = line.split("listening on ", 1)[1].strip()
        if "/login?token=" in line:
            link = line.split("open ", 1)[1].strip()
    if not link:
        proc.kill()
        raise RuntimeError("macupos serve --local did not print its login link")
    return proc, url, link


def headless_chromium(profile: Path, *flags: str, browser_log: bool = False) -> WebDriver:
    """Chromium without a window, a first run, background traffic or a sandbox (it runs in containers), on the
    profile folder ``profile``, with ``flags`` besides; ``browser_log`` keeps the console for ``get_log``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        *flags,
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.binary_location = CHROMIUM
    if browser_log:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def emulate_theme(driver: WebDriver, scheme: str) -> None:
    """The page's ``prefers-color-scheme`` is ``scheme`` ("light" or "dark"), through the DevTools protocol."""
    features = [{"name": "prefers-color-scheme", "value": scheme}]
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": features})  # type: ignore[attr-defined]


def view(driver: WebDriver, size: tuple[int, int], scheme: str, *, emulated: bool = False) -> None:
    """The window at ``size`` (width, height), or with ``emulated`` the viewport itself through the DevTools
    protocol (exactly that many CSS px, one device pixel each), and the page in the ``scheme`` theme."""
    if emulated:
        metrics = {"width": size[0], "height": size[1], "deviceScaleFactor": 1, "mobile": False}
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)  # type: ignore[attr-defined]
    else:
        driver.set_window_size(*size)
    emulate_theme(driver, scheme)


def assert_tap_target(element: WebElement, *, wide: bool = True) -> None:
    """``element`` is a finger's target: at least TARGET_PX tall and, when ``wide``, as wide."""
    size = element.size
    assert size["height"] >= TARGET_PX and (not wide or size["width"] >= TARGET_PX), size


@dataclass
class Opened:
    """A `macupos serve --local` for the owner and a Chromium to look at it."""

    url: str
    link: str  # the one-time login link
    driver: WebDriver
    shots: Path  # where screenshots go, for a person to look at
    home: Path  # the memory home it serves

    def go(self, path: str) -> None:
        self.driver.get(self.url + path)

    def wait(self, check: Callable[[Any], Any], timeout: float = 20) -> Any:
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, timeout).until(check)

    def loaded(self, timeout: float = 30) -> None:
        self.wait(lambda drv: drv.execute_script("return document.readyState") == "complete", timeout)

    def open(self, path: str, size: tuple[int, int], scheme: str, *, emulated: bool = False) -> None:
        """``path`` at ``size`` in the ``scheme`` theme (see view), loaded."""
        view(self.driver, size, scheme, emulated=emulated)
        self.go(path)
        self.loaded()

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def inert(self) -> None:
        assert_inert(self.driver)

    def shot(self, name: str) -> None:
        self.driver.save_screenshot(str(self.shots / f"{name}.png"))


@contextmanager
def owner_pages(root: Path, home: Path) -> Iterator[Opened]:
    """`macupos serve --local` over ``home`` for the Telegram owner (tests.service.web.conftest's bot and
    owner), and headless Chromium keeping its console, both under ``root``; stopped when the block ends."""
    proc, url, link = serve_local(
        home,
        CLAUDE_CONFIG_DIR=str(home / "claude"),
        CODEX_HOME=str(home / "codex"),
        TELEGRAM_BOT_TOKEN=BOT_TOKEN,
        MACUPOS_ALLOWED_USERS=str(OWNER_ID),
    )
    try:
        driver = headless_chromium(root / "chromium-profile", "--disable-default-apps", browser_log=True)
        try:
            driver.set_page_load_timeout(60)
            shots = root / "screenshots"
            shots.mkdir()
            yield Opened(url, link, driver, shots, home)
        finally:
            driver.quit()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextmanager
def logged_in_pages(
    factory: pytest.TempPathFactory, name: str, seed: Callable[[Path], Awaitable[T]]
) -> Iterator[tuple[Opened, T]]:
    """A fresh memory home (a ``factory`` temp folder named ``name``) seeded by ``await seed(home)``, served by
    owner_pages and logged in with its one-time link: (the pages, what ``seed`` returned)."""
    import asyncio

    root = factory.mktemp(name)
    home = root / "home"
    seeded = asyncio.run(seed(home))
    with owner_pages(root, home) as opened:
        opened.driver.get(opened.link)
        opened.wait(lambda drv: "/login" not in drv.current_url)
        yield opened, seeded


def assert_inert(driver: WebDriver) -> None:
    """Nothing hostile ran: no marker, no dialog, no CSP violation in the console, no sideways scroll."""
    from selenium.common.exceptions import NoAlertPresentException

    assert driver.execute_script("return window.__pwned === undefined")
    try:
        alert = driver.switch_to.alert
    except NoAlertPresentException:
        alert = None
    assert alert is None, f"a dialog opened: {alert.text if alert else ''}"
    logs = [e["message"] for e in driver.get_log("browser")]  # type: ignore[attr-defined]
    assert not [m for m in logs if "Content Security Policy" in m or "Refused to" in m], logs
    overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"the page scrolls sideways by {overflow}px at {driver.get_window_size()}"
