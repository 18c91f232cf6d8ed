"""HTML to readable plain text, with the standard library's parser (sans-IO).

Keeps what a reader (or a model) needs: the title, headings (as ``#``
lines), paragraphs, list items (``-``), preformatted blocks verbatim, table
cells separated by `` | ``, and links as ``text (url)`` with the url made
absolute. Drops scripts, styles, forms' internals, SVG and comments.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin

_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head", "iframe", "object", "canvas", "select", "button"})
_BLOCK = frozenset({
    "address", "article", "aside", "blockquote", "body", "dd", "details", "dialog", "div", "dl", "dt",
    "fieldset", "figcaption", "figure", "footer", "form", "header", "hr", "html", "legend", "li", "main",
    "nav", "ol", "p", "pre", "section", "summary", "table", "tbody", "tfoot", "thead", "tr", "ul",
})
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})
_SPACES = re.compile(r"[ \t\r\n\f\v]+")


class _TextExtractor(HTMLParser):
    def __init__(self, base_url: str | None):
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.out: list[str] = []
        self.skip_depth = 0
        self.pre_depth = 0
        self.title: list[str] = []
        self.in_title = False
        self.links: list[str | None] = []  # href per open <a>
        self.link_text: list[list[str]] = []
        self.list_depth = 0

    # --- output helpers ---------------------------------------------------

    def _emit(self, text: str) -> None:
        if self.link_text:
            self.link_text[-1].append(text)
        else:
            self.out.append(text)

    def _newline(self, count: int = 1) -> None:
        if self.link_text:
            self._emit(" ")
            return
        # Only as many line breaks as are missing: nested blocks do not stack up blank lines.
        have = 0
        for piece in reversed(self.out):
            stripped = piece.rstrip(" ")
            have += len(stripped) - len(stripped.rstrip("\n"))
            if stripped.strip("\n"):
                break
        if self.out and have < count:
            self.out.append("\n" * (count - have))

    # --- parser callbacks --------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
            return
        if tag in _SKIP:
            if tag not in _VOID:
                self.skip_depth += 1
            return
        if self.skip_depth:
            return
        if tag == "base":
            href = dict(attrs).get("href")
            if href and self.base_url:
                self.base_url = urljoin(self.base_url, href)
            return
        if tag in ("ul", "ol"):
            self.list_depth += 1
        if tag == "pre":
            self.pre_depth += 1
        if tag in _HEADINGS:
            self._newline(2)
            self._emit("#" * _HEADINGS[tag] + " ")
        elif tag == "li":
            self._newline()
            self._emit("\x01" * max(self.list_depth - 1, 0) + "- ")  # indent, kept through collapsing
        elif tag == "br":
            self._newline()
        elif tag in ("td", "th"):
            self._emit(" | ")
        elif tag == "img":
            alt = dict(attrs).get("alt")
            if alt:
                self._emit(f"[image: {alt}]")
        elif tag == "a":
            self.links.append(dict(attrs).get("href"))
            self.link_text.append([])
        elif tag in _BLOCK:
            self._newline(2 if tag in ("p", "pre", "blockquote", "table") else 1)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
            return
        if tag in _SKIP:
            if self.skip_depth and tag not in _VOID:
                self.skip_depth -= 1
            return
        if self.skip_depth:
            return
        if tag in ("ul", "ol") and self.list_depth:
            self.list_depth -= 1
        if tag == "pre" and self.pre_depth:
            self.pre_depth -= 1
        if tag == "a" and self.link_text:
            text = _SPACES.sub(" ", "".join(self.link_text.pop())).strip()
            href = self.links.pop()
            url = urljoin(self.base_url, href) if (href and self.base_url) else href
            if url and not url.startswith(("javascript:", "#")) and url != text:
                self._emit(f"{text} ({url})" if text else f"({url})")
            else:
                self._emit(text)
            return
        if tag in _HEADINGS or (tag in _BLOCK and tag != "li"):
            self._newline(2 if tag in _HEADINGS or tag in ("p", "pre", "blockquote", "table") else 1)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
            return
        if self.skip_depth:
            return
        if self.pre_depth:
            self._emit(data.replace("\n", "\x00"))  # protected from whitespace collapsing
        else:
            self._emit(_SPACES.sub(" ", data))


def html_to_text(html: str, base_url: str | None = None) -> str:
    """Readable text of an HTML document. ``base_url`` makes links absolute.

    Never raises on malformed HTML; the parser is forgiving."""
    parser = _TextExtractor(base_url)
    try:
        parser.feed(html.replace("\x00", ""))
        parser.close()
    except Exception:  # html.parser is lenient, but be sure a bad page never crashes a tool
        pass
    parser.skip_depth = 0  # an unclosed <script> must not keep the links below open
    while parser.link_text:  # an unclosed <a>
        parser.handle_endtag("a")
    body = "".join(parser.out)
    lines = []
    for line in body.split("\n"):
        # A line holding preformatted text keeps its spacing.
        lines.append(line.rstrip() if "\x00" in line else _SPACES.sub(" ", line).strip())
    text = "\n".join(lines)
    # Preformatted newlines come back; runs of blank lines shrink to one.
    text = text.replace("\x00", "\n").replace("\x01", "  ")
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    title = _SPACES.sub(" ", "".join(parser.title)).strip()
    if title and not text.startswith(title):
        text = f"{title}\n\n{text}" if text else title
    return text
