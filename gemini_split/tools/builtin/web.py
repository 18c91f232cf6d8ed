"""``web_fetch``: the URLs in a prompt, fetched and returned as readable text.

gemini-cli's ``web_fetch(prompt)``: the prompt holds up to
:data:`MAX_URLS` ``http(s)://`` URLs and says what to do with them; each
URL is fetched here, on the client, and the texts are returned together
(the model that wrote the prompt then does what it asked). gemini-cli has a
second model call do that step; here the answer goes back to the same
model, which keeps the pages on the machine that fetched them.

Only ``http`` and ``https`` URLs (redirects included, at most
``max_redirects``); the download stops at ``max_bytes`` and the whole fetch
at ``timeout`` seconds; HTML becomes text (:func:`html_to_text`), other
textual types are returned as they are, binary content is refused.

With a ``guard`` (a server running the tool, :mod:`.web_guard`) every
connection, redirects included, goes only to addresses the guard allows:
public ones and the operator's allow-list.
"""

from __future__ import annotations

import codecs
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import trio

from gemini_split.tools.base import Tool, ToolContext, ToolFailed, ToolKind

if TYPE_CHECKING:
    import httpx

    from ..workspace import Workspace
    from .web_guard import AddressGuard

DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_CHARS = 100_000
# Patterns here are compiled on first use (re's own cache), not at import:
# a one-shot run that never needs them does not pay ~0.1-0.4 ms each.
_TEXT_TYPES = r"^(text/|application/(json|xml|javascript|x-javascript|ecmascript|[\w.+-]*\+(json|xml))\b)"
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_META_CHARSET = rb"""<meta[^>]+charset\s*=\s*["']?([\w-]+)"""  # re.IGNORECASE


#: URLs one prompt may name (gemini-cli's limit).
MAX_URLS = 20
_URL = r"https?://[^\s<>\"'`]*"  # re.IGNORECASE


def urls_in(prompt: str) -> list[str]:
    """The ``http(s)://`` URLs in ``prompt``, in order, without repeats,
    trailing punctuation (``.``, ``,``, ``;``…) or an unbalanced closing
    bracket (``(see https://x.org/a)``)."""
    found: list[str] = []
    for match in re.finditer(_URL, prompt, re.IGNORECASE):
        url = match.group(0)
        while True:
            trimmed = url.rstrip(".,;:!?")
            for close, open_ in ((")", "("), ("]", "[")):
                if trimmed.endswith(close) and trimmed.count(close) > trimmed.count(open_):
                    trimmed = trimmed[:-1]
            if trimmed == url:
                break
            url = trimmed
        if url not in found:
            found.append(url)
    return found


class WebFetchTool(Tool):
    """``web_fetch(prompt)``. ``timeout`` (seconds for the whole fetch),
    ``max_bytes`` (downloaded at most), ``max_chars`` (text returned at
    most) and ``max_redirects`` are the client's settings. ``transport`` is
    an optional ``httpx.AsyncBaseTransport`` (tests, proxies). ``guard``
    (:class:`~.web_guard.AddressGuard`): connect only to the addresses it
    allows, checked on every connection (a server's tools; ``transport`` is
    then not used)."""

    name = "web_fetch"
    kind = ToolKind.NETWORK
    description = (
        "Fetches the web pages or text resources whose http(s) URLs appear in "
        f"the prompt (up to {MAX_URLS}) and returns their content as readable text "
        "(HTML is converted: headings, lists, links as 'text (url)'; scripts and "
        "styles dropped), for you to do what the prompt asks with them. Large "
        "pages are truncated with a note. Binary content (images, archives, PDFs) "
        "is refused."
    )
    parameters = {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": (
                "What to do, with the full http:// or https:// URL(s) to fetch in it, e.g. "
                "'Summarise https://example.com/changelog and list breaking changes'.")},
        },
        "required": ["prompt"],
    }

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_chars: int = DEFAULT_MAX_CHARS,
        max_redirects: int = 5,
        transport: httpx.AsyncBaseTransport | None = None,
        guard: AddressGuard | None = None,
    ):
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.max_chars = max_chars
        self.max_redirects = max_redirects
        self.transport = transport
        self.guard = guard

    def describe(self, args: dict[str, Any], workspace: Workspace) -> str:
        urls = urls_in(str(args.get("prompt", ""))) or ["(no URL)"]
        return (f"Fetch {', '.join(urls)} (HTTP GET, at most {self.max_bytes // 1024} KiB and "
                f"{self.timeout:g} s each)")

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        prompt: str = args["prompt"]
        urls = urls_in(prompt)
        if not urls:
            if "://" in prompt:
                raise ToolFailed("unsupported_scheme", "the prompt names no http or https URL; only those can be "
                                 "fetched", "to read a local file use read_file")
            raise ToolFailed("no_url", "the prompt contains no http:// or https:// URL",
                             "put the full URL(s) to fetch in the prompt")
        if len(urls) > MAX_URLS:
            raise ToolFailed("too_many_urls", f"the prompt names {len(urls)} URLs; at most {MAX_URLS} are fetched",
                             "split the work into several calls")
        if len(urls) == 1:
            return await self._fetch(urls[0])
        parts: list[str] = []
        failures: list[ToolFailed] = []
        for url in urls:
            try:
                parts.append(await self._fetch(url))
            except ToolFailed as failed:
                failures.append(failed)
                parts.append(f"Could not fetch {url}: {failed} [{failed.code}]")
        if len(failures) == len(urls):
            raise failures[0]
        return "\n\n---\n\n".join(parts)

    async def _fetch(self, url: str) -> str:
        url = _check_url(url)
        import httpx  # not needed until a page is fetched: keeps client start-up fast

        from .web_guard import AddressRefused, guarded_transport  # imports httpcore, as httpx does

        transport = guarded_transport(self.guard) if self.guard is not None else self.transport
        body = b""
        truncated = False
        with trio.move_on_after(self.timeout) as deadline:
            try:
                async with httpx.AsyncClient(
                    follow_redirects=True,
                    max_redirects=self.max_redirects,
                    timeout=httpx.Timeout(self.timeout),
                    headers={"User-Agent": "gemini-split web_fetch", "Accept": "text/html,text/*;q=0.9,*/*;q=0.5"},
                    transport=transport,
                    trust_env=self.guard is None,
                ) as client:
                    async with client.stream("GET", url) as response:
                        final_url = str(response.url)
                        content_type = response.headers.get("content-type", "")
                        status = response.status_code
                        chunks: list[bytes] = []
                        size = 0
                        async for chunk in response.aiter_bytes():
                            chunks.append(chunk)
                            size += len(chunk)
                            if size > self.max_bytes:
                                truncated = True
                                break
                        body = b"".join(chunks)[: self.max_bytes]
            except AddressRefused as exc:
                raise ToolFailed(
                    "address_refused",
                    f"{url} was not fetched: {exc}; web_fetch on this server reaches public addresses only "
                    "(redirects included)",
                    "the page is on the server's own or a private network; the server's operator can allow it "
                    "with serve --web-fetch-allow",
                ) from None
            except httpx.TooManyRedirects:
                raise ToolFailed("fetch_failed", f"{url}: more than {self.max_redirects} redirects") from None
            except httpx.UnsupportedProtocol as exc:
                raise ToolFailed("unsupported_scheme", f"{url}: redirected to an unsupported URL ({exc})", "only http and https can be fetched") from None
            except httpx.HTTPError as exc:
                raise ToolFailed("fetch_failed", f"{url} could not be fetched: {type(exc).__name__}: {exc}", "check the URL; the site may be down or unreachable") from None
        if deadline.cancelled_caught:
            raise ToolFailed("timeout", f"fetching {url} took longer than {self.timeout:g} s", "try again later or another URL")
        return self._render(url, final_url, status, content_type, body, truncated)

    def _render(self, url: str, final_url: str, status: int, content_type: str, body: bytes, truncated: bool) -> str:
        mime = content_type.split(";", 1)[0].strip().lower()
        is_html = mime in _HTML_TYPES or (not mime and body.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")))
        if not is_html and mime and not re.match(_TEXT_TYPES, mime):
            raise ToolFailed("unsupported_content", f"{final_url} is {mime}, not text", "fetch an HTML or text page instead")
        if not mime and b"\x00" in body[:8192]:
            raise ToolFailed("unsupported_content", f"{final_url} returned binary content")
        text = body.decode(_charset(content_type, body if is_html else b""), errors="replace")
        if is_html:
            from ..htmltext import html_to_text  # html.parser: only when a page is fetched

            text = html_to_text(text, final_url)
        if status >= 400:
            raise ToolFailed(
                "http_error", f"{final_url} answered HTTP {status}." + (f" The page says:\n{text[:1000]}" if text.strip() else ""),
                "check the URL" if status < 500 else "the server failed; try again later",
            )
        notes = []
        if truncated:
            notes.append(f"the download stopped at {self.max_bytes // 1024} KiB")
        if len(text) > self.max_chars:
            notes.append(f"the text was cut at {self.max_chars} of {len(text)} characters")
            text = text[: self.max_chars]
        head = f"Content of {final_url}" + (f" (redirected from {url})" if final_url != url else "") + f" [{mime or 'unknown type'}]:\n\n"
        tail = "".join(f"\n\n[truncated: {n}]" for n in notes)
        return head + text + tail


def _check_url(url: str) -> str:
    url = url.strip()
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ToolFailed("invalid_url", f"{url!r} is not a valid URL: {exc}") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ToolFailed(
            "unsupported_scheme",
            f"{url!r}: only http and https URLs can be fetched" + (f", not {parts.scheme}" if parts.scheme else ""),
            "to read a local file use read_file",
        )
    if not parts.hostname:
        raise ToolFailed("invalid_url", f"{url!r} has no host")
    if any(c in url for c in "\x00\r\n\t "):
        raise ToolFailed("invalid_url", f"{url!r} contains whitespace or control characters", "percent-encode them")
    return url


def _charset(content_type: str, html_head: bytes) -> str:
    m = re.search(r"charset\s*=\s*[\"']?([\w-]+)", content_type, re.IGNORECASE)
    name = m.group(1) if m else None
    if name is None and html_head:
        m2 = re.search(_META_CHARSET, html_head[:4096], re.IGNORECASE)
        name = m2.group(1).decode("ascii", "replace") if m2 else None
    try:
        return codecs.lookup(name).name if name else "utf-8"
    except LookupError:
        return "utf-8"
