"""Transcripts and handoffs are hostile text: rendered to HTML, they can only ever produce this module's own
tags, with no attributes but a class, and every character of theirs escaped."""

from __future__ import annotations

from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st

from service.web.markdown import render_markdown

ALLOWED = {"h2", "h3", "h4", "h5", "h6", "p", "br", "ul", "ol", "li", "blockquote", "pre", "code", "strong", "em",
           "hr", "div", "table", "thead", "tbody", "tr", "th", "td", "span"}  # fmt: skip


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(html: str) -> Tags:
    p = Tags()
    p.feed(html)
    p.close()
    return p


def test_markdown_renders_its_structure() -> None:
    html = str(render_markdown("# Title\n\nsome **bold** and `code`\n\n- one\n- two\n\n```\nx = 1\n```\n\n> quoted"))
    assert "<h2>Title</h2>" in html and "<strong>bold</strong>" in html and "<code>code</code>" in html
    assert "<ul><li>one</li><li>two</li></ul>" in html and "<pre><code>x = 1</code></pre>" in html
    assert "<blockquote><p>quoted</p></blockquote>" in html


def test_script_html_and_javascript_links_come_out_as_text() -> None:
    payload = (
        "<script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1)) "
        '<a href="javascript:alert(2)">a</a> **<b onmouseover=alert(3)>b</b>** `<i>`'
    )
    html = str(render_markdown(f"# {payload}\n\n{payload}\n\n- {payload}\n\n| {payload} | b |\n|---|---|\n| c | d |"))
    p = parse(html)
    assert all(tag in ALLOWED for tag, _ in p.tags)
    assert all(name == "class" for _, attrs in p.tags for name, _ in attrs)
    assert "<script" not in html and "<img" not in html and "<a " not in html
    assert "<script>alert(1)</script>" in "".join(p.text)  # the owner still reads what was said


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>&\"'`*_#-|[]()!/=: \nabcjsvxonerrorscriptimg.1")), max_size=300))
def test_no_input_makes_a_tag_or_an_attribute_of_its_own(text: str) -> None:
    p = parse(str(render_markdown(text)))
    assert all(tag in ALLOWED for tag, _ in p.tags)
    assert all(name == "class" for _, attrs in p.tags for name, _ in attrs)
