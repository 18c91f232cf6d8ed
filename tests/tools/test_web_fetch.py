"""web_fetch against a real HTTP server on 127.0.0.1, and HTML to text."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gemini_split.tools.approval import ApprovalMode
from gemini_split.tools.htmltext import html_to_text
from gemini_split.tools.registry import ToolRegistry
from gemini_split.tools.builtin.web import WebFetchTool

from .conftest import Env

PAGE = """<!doctype html><html><head><title>Test  Page</title>
<style>body { color: red }</style><script>var secret = "SCRIPT-CONTENT";</script></head>
<body><nav><a href="/">Home</a></nav>
<h1>Main   heading</h1><p>First <b>paragraph</b> with a <a href="/docs/x.html">relative link</a>
and &amp; an entity.</p>
<ul><li>alpha</li><li>beta</li></ul>
<pre>  keep
    spacing</pre>
</body></html>"""

ROUTES = {
    "/page.html": (200, "text/html; charset=utf-8", PAGE.encode()),
    "/plain.txt": (200, "text/plain", b"just text\n"),
    "/data.json": (200, "application/json", b'{"a": 1}'),
    "/latin1.html": (200, "text/html; charset=iso-8859-1", "<p>caf\u00e9</p>".encode("latin-1")),
    "/image.png": (200, "image/png", b"\x89PNG\r\n\x1a\n\x00\x00"),
    "/big.txt": (200, "text/plain", b"x" * 300_000),
    "/missing": (404, "text/html", b"<h1>Not here</h1>"),
}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/page.html")
            self.end_headers()
            return
        if self.path == "/to-file":
            self.send_response(302)
            self.send_header("Location", "file:///etc/passwd")
            self.end_headers()
            return
        if self.path == "/slow":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            try:
                for _ in range(50):
                    self.wfile.write(b"tick\n")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass
            return
        status, ctype, body = ROUTES.get(self.path, (404, "text/plain", b"no route"))
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def fetcher(env: Env, **kw):
    return env.executor(ApprovalMode.YOLO, registry=ToolRegistry([WebFetchTool(**kw)]))


async def test_fetch_html_as_text(env: Env, server: str):
    out = await env.run("web_fetch", {"prompt": f"{server}/page.html"}, executor=fetcher(env))
    assert out.failure is None, out.failure
    text = out.result
    assert text.startswith(f"Content of {server}/page.html [text/html]:")
    assert "Test Page" in text and "# Main heading" in text
    assert "First paragraph with a relative link (" + server + "/docs/x.html) and & an entity." in text
    assert "- alpha\n- beta" in text and "  keep\n    spacing" in text
    assert "SCRIPT-CONTENT" not in text and "color: red" not in text and "<" not in text


async def test_fetch_other_text_types(env: Env, server: str):
    ex = fetcher(env)
    out = await env.run("web_fetch", {"prompt": f"{server}/plain.txt"}, executor=ex)
    assert out.result.endswith("just text\n")
    out = await env.run("web_fetch", {"prompt": f"{server}/data.json"}, executor=ex)
    assert out.result.endswith('{"a": 1}')
    out = await env.run("web_fetch", {"prompt": f"{server}/latin1.html"}, executor=ex)
    assert out.result.endswith("café")


async def test_redirects_are_followed_and_shown(env: Env, server: str):
    out = await env.run("web_fetch", {"prompt": f"{server}/redirect"}, executor=fetcher(env))
    assert f"Content of {server}/page.html (redirected from {server}/redirect)" in out.result
    out = await env.run("web_fetch", {"prompt": f"{server}/to-file"}, executor=fetcher(env))
    assert out.failure is not None and out.failure.code in {"unsupported_scheme", "fetch_failed"}
    assert "root:" not in out.text()


async def test_size_cap(env: Env, server: str):
    out = await env.run("web_fetch", {"prompt": f"{server}/big.txt"}, executor=fetcher(env, max_bytes=10_000, max_chars=5_000))
    assert out.failure is None
    assert "download stopped at 9 KiB" in out.result and "cut at 5000" in out.result
    assert out.result.count("x") <= 5_000 + 10


async def test_time_limit(env: Env, server: str):
    start = time.monotonic()
    out = await env.run("web_fetch", {"prompt": f"{server}/slow"}, executor=fetcher(env, timeout=0.5))
    assert out.failure is not None and out.failure.code == "timeout"
    assert time.monotonic() - start < 3


async def test_refusals(env: Env, server: str):
    ex = fetcher(env)
    for url, code in [
        ("file:///etc/passwd", "unsupported_scheme"), ("ftp://example.com/x", "unsupported_scheme"),
        ("javascript:alert(1)", "no_url"), ("example.com/page", "no_url"),
        ("http://", "invalid_url"), (" ".join(f"{server}/{i}" for i in range(21)), "too_many_urls"),
        (f"{server}/image.png", "unsupported_content"), (f"{server}/missing", "http_error"),
        ("http://127.0.0.1:1/", "fetch_failed"),
    ]:
        out = await env.run("web_fetch", {"prompt": url}, executor=ex)
        assert out.failure is not None and out.failure.code == code, (url, out.failure, out.result)
        assert "Traceback" not in out.failure.message
    out = await env.run("web_fetch", {"prompt": f"{server}/missing"}, executor=ex)
    assert "404" in out.failure.message and "Not here" in out.failure.message


def test_html_to_text_edge_cases():
    assert html_to_text("") == ""
    assert html_to_text("<p>unclosed <b>tags <a href='x'>link") == "unclosed tags link (x)"
    assert html_to_text("<p>a</p>\n\n\n<p>b</p>") == "a\n\nb"
    assert html_to_text("<a href='x'>t<script>never closed") == "t (x)"
    assert html_to_text("<div><div><p>deep</p></div></div>") == "deep"
    assert html_to_text("a<br>b<br/>c") == "a\nb\nc"
    assert html_to_text("<table><tr><th>h1</th><th>h2</th></tr><tr><td>1</td><td>2</td></tr></table>") == "| h1 | h2\n| 1 | 2"
    assert html_to_text("<a href='#top'>top</a> <a href='javascript:x()'>js</a>") == "top js"
    assert html_to_text("<img alt='logo'><svg><text>drop</text></svg>ok") == "[image: logo]ok"
    assert html_to_text("x &lt;y&gt; &#x263A;") == "x <y> \u263a"
    assert html_to_text("<a href='/a'>A</a>", "https://h.example/b/c") == "A (https://h.example/a)"


def test_urls_are_found_in_a_prompt_as_gemini_cli_takes_them():
    from gemini_split.tools.builtin.web import urls_in

    prompt = ("Compare https://a.example/x, (see https://b.example/y) and [https://c.example/z]. "
              "Also https://a.example/x again and http://d.example/p?q=1#f.")
    assert urls_in(prompt) == ["https://a.example/x", "https://b.example/y", "https://c.example/z",
                               "http://d.example/p?q=1#f"]
    assert urls_in("https://w.example/wiki/Foo_(bar) is it") == ["https://w.example/wiki/Foo_(bar)"]


async def test_several_urls_in_one_prompt(env: Env, server: str):
    out = await env.run("web_fetch", {"prompt": f"Summarise {server}/plain.txt and {server}/missing, then "
                                                f"{server}/data.json."}, executor=fetcher(env))
    assert out.failure is None, out.failure
    text = out.result
    assert text.index(f"Content of {server}/plain.txt") < text.index(f"Could not fetch {server}/missing") \
        < text.index(f"Content of {server}/data.json")
    assert "[http_error]" in text
