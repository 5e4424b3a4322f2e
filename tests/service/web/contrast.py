"""WCAG 2's contrast ratio between two colours, as app.css writes them (#rgb, #rrggbb) or as a browser computes
them (rgb(…), rgba(…)), and a page element's text against the backgrounds it is layered over."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver


def rgba(colour: str) -> tuple[float, float, float, float]:
    """Red, green and blue (0 to 255) and alpha (0 to 1) of a CSS colour."""
    if colour.startswith("#"):
        hex6 = colour.lstrip("#")
        if len(hex6) == 3:
            hex6 = "".join(c * 2 for c in hex6)
        red, green, blue = (int(hex6[i : i + 2], 16) for i in (0, 2, 4))
        return float(red), float(green), float(blue), 1.0
    found = re.findall(r"[\d.]+", colour)
    assert len(found) >= 3, colour
    red, green, blue = (float(x) for x in found[:3])
    return red, green, blue, float(found[3]) if len(found) > 3 else 1.0


def luminance(colour: str | tuple[float, float, float]) -> float:
    """WCAG's relative luminance of a CSS colour or an (r, g, b) in 0 to 255."""
    rgb = rgba(colour)[:3] if isinstance(colour, str) else colour

    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str | tuple[float, float, float], b: str | tuple[float, float, float]) -> float:
    """WCAG's contrast ratio of two colours (alpha ignored), from 1 to 21."""
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def text_contrast(driver: WebDriver, css: str) -> float:
    """The text of the first ``css`` element against its background, layered over its ancestors' (on white)."""
    colours = driver.execute_script(
        """const el = document.querySelector(arguments[0]); const layers = [];
           for (let e = el; e; e = e.parentElement) layers.push(getComputedStyle(e).backgroundColor);
           return [getComputedStyle(el).color, layers];""",
        css,
    )
    bg = (255.0, 255.0, 255.0)
    for layer in reversed(colours[1]):
        r, g, b, a = rgba(layer)
        bg = (r * a + bg[0] * (1 - a), g * a + bg[1] * (1 - a), b * a + bg[2] * (1 - a))
    return contrast(colours[0], bg)
