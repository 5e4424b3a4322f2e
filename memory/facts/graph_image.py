"""The facts graph as a PNG for the chat (`/graph`): the web page's layout drawn with Pillow, sized for a phone.

Telegram shows a photo at most 1280 px on its long side; the picture is drawn at that size with labels
large enough to read on a 390-px-wide screen. Text uses DejaVu Sans when the system has it (Debian's
fonts-dejavu-core: every script Telegram users write in), else Pillow's own scalable font.
"""

from __future__ import annotations

import io
import math
from functools import cache
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from memory.facts.graph import FactsGraph, layout

__all__ = ["graph_png"]

SIZE = 1280
_FONTS = (
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
    Path("/usr/share/fonts/TTF/DejaVuSans.ttf"),
    Path("/Library/Fonts/DejaVuSans.ttf"),
)

Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


@cache
def _font(size: int) -> Font:
    for path in _FONTS:
        if path.is_file():
            return ImageFont.truetype(str(path), size)
    return ImageFont.load_default(size=size)


def _arrow(draw: ImageDraw.ImageDraw, a: tuple[float, float], b: tuple[float, float], r: float) -> None:
    dx, dy = b[0] - a[0], b[1] - a[1]
    d = math.hypot(dx, dy) or 1.0
    ux, uy = dx / d, dy / d
    start = (a[0] + ux * r, a[1] + uy * r)
    end = (b[0] - ux * r, b[1] - uy * r)
    color = (122, 134, 153)
    draw.line([start, end], fill=color, width=3)
    head = 16
    left = (end[0] - ux * head - uy * head / 2, end[1] - uy * head + ux * head / 2)
    right = (end[0] - ux * head + uy * head / 2, end[1] - uy * head - ux * head / 2)
    draw.polygon([end, left, right], fill=color)


def graph_png(graph: FactsGraph, *, title: str = "") -> bytes:
    """PNG bytes of the graph (a note instead when it is empty)."""
    image = Image.new("RGB", (SIZE, SIZE), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    label_font, edge_font, note_font = _font(26), _font(20), _font(24)
    if title:
        draw.text((SIZE / 2, 36), title, fill=(28, 36, 48), font=note_font, anchor="mm")
    if graph.empty:
        draw.text((SIZE / 2, SIZE / 2), "No facts to draw yet.", fill=(85, 96, 110), font=note_font, anchor="mm")
    else:
        margin = 150
        positions = layout(graph)

        def at(key: str) -> tuple[float, float]:
            x, y = positions[key]
            return margin + x * (SIZE - 2 * margin), margin + y * (SIZE - 2 * margin)

        for e in graph.edges:
            a, b = at(e.source), at(e.target)
            _arrow(draw, a, b, 18)
            mid = ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2 - 12)
            draw.text(mid, e.label, fill=(85, 96, 110), font=edge_font, anchor="mm")
        for node in graph.nodes:
            x, y = at(node.key)
            fill = (47, 111, 223) if node.concept else (240, 160, 48)
            draw.ellipse([x - 16, y - 16, x + 16, y + 16], fill=fill)
            draw.text((x, y + 40), node.label, fill=(28, 36, 48), font=label_font, anchor="mm")
        if graph.hidden_nodes:
            note = f"{graph.hidden_nodes} more nodes and {graph.hidden_edges} more edges not drawn"
            draw.text((SIZE / 2, SIZE - 36), note, fill=(85, 96, 110), font=note_font, anchor="mm")
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()
