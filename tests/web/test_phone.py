"""The page on a phone (390×844, light and dark): it follows a streaming
answer while the reader is at the bottom and stops when they scroll up;
code keeps its lines, tables their borders, an approval's choices fit the
screen. Screenshots of each state are kept in test-artifacts/web/."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.web.conftest import screenshot, signed_in_page

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

PHONE = {"width": 390, "height": 844}

#: JavaScript: how far the bottom of the page is below the bottom of the view.
BELOW = "document.documentElement.scrollHeight - (window.scrollY + window.innerHeight)"


def _script(fake, turns):
    httpx.post(f"{fake.url}/_script", json=turns, timeout=10).raise_for_status()


def _wait_until(page, expression: str, *, seconds: float = 20) -> None:
    """Poll ``expression`` in the page until it is true (the page's CSP
    forbids the eval that ``page.wait_for_function`` needs)."""
    deadline = time.monotonic() + seconds
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"still false after {seconds} s: {expression}"
        page.wait_for_timeout(50)


def _prompt_in_a_new_session(page, prompt: str):
    page.click("#new-session")
    page.wait_for_selector("#session:not([hidden])")
    _wait_until(page, "document.getElementById('status').textContent === ''")
    page.fill("#prompt", prompt)
    page.keyboard.press("Enter")


def _long_answer(lines: int) -> str:
    return "\n\n".join(f"Paragraph {i:02d} of the answer, long enough to take a line or two on a phone."
                       for i in range(lines))


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_page_follows_a_streaming_answer_until_the_reader_scrolls_up(browser, server, fake, scheme):
    _script(fake, [{"text": _long_answer(150), "chunks": 150, "chunk_delay": 0.1}])
    context, page, watch = signed_in_page(browser, server, color_scheme=scheme, **PHONE)
    _prompt_in_a_new_session(page, "tell me a long story")

    # While it streams, sampled every half second: the newest text stays in view.
    _wait_until(page, "document.documentElement.scrollHeight > window.innerHeight + 400")
    samples = []
    for _ in range(6):
        page.wait_for_timeout(500)
        samples.append((page.evaluate("document.documentElement.scrollHeight"), page.evaluate(BELOW)))
    assert samples[-1][0] > samples[0][0], f"the answer stopped growing while sampled: {samples}"
    assert all(below <= 80 for _, below in samples), f"the view fell behind the answer (height, px below): {samples}"
    assert page.locator("#jump").is_hidden()
    screenshot(page, f"phone-following-{scheme}")

    # The reader scrolls up: the view stays where they put it, and offers the way back.
    page.mouse.move(195, 400)
    page.mouse.wheel(0, -1500)
    page.wait_for_timeout(300)
    held = page.evaluate("window.scrollY")
    height = page.evaluate("document.documentElement.scrollHeight")
    _wait_until(page, f"document.documentElement.scrollHeight > {height} + 200")  # more came meanwhile
    assert abs(page.evaluate("window.scrollY") - held) <= 2, "the view moved while the reader was reading above"
    jump = page.locator("#jump")
    jump.wait_for(state="visible")
    screenshot(page, f"phone-scrolled-up-{scheme}")

    # "Jump to latest" goes back down and follows again.
    jump.click()
    page.wait_for_selector(".turn .end", timeout=30000)
    page.wait_for_timeout(300)
    assert page.evaluate(BELOW) <= 80
    assert "Paragraph 149" in page.inner_text("#log")
    assert page.locator("#jump").is_hidden()
    assert not watch.dialogs and not watch.foreign and not watch.console_errors
    context.close()


def test_an_approval_arriving_after_streamed_text_is_brought_into_view(browser, server, fake):
    _script(fake, [
        {"text": _long_answer(25), "chunks": 25, "chunk_delay": 0.05,
         "function_calls": [{"name": "write_file", "args": {"file_path": "notes.txt", "content": "hello\n"}}]},
        {"text": "Written."},
    ])
    context, page, watch = signed_in_page(browser, server, **PHONE)
    _prompt_in_a_new_session(page, "write the notes")
    card = page.wait_for_selector(".approval", timeout=30000)
    page.wait_for_timeout(300)
    box = card.bounding_box()
    assert box is not None and box["y"] >= 0 and box["y"] + 40 <= PHONE["height"], box
    # The streamed text before the call is in view too, just above the card.
    assert page.evaluate(BELOW) <= 80
    screenshot(page, "phone-approval-arrives")
    page.get_by_role("button", name="Yes, once", exact=True).click()
    page.wait_for_selector(".turn .end", timeout=30000)
    context.close()


CODE = """Here is the function:

```python
def handler(event):
    if event.kind == "save":
        return store.write_the_whole_document_to_disk_with_a_name_long_enough(event.document, overwrite=True)  # LONG-LINE-END
    return None
```

| setting | default | meaning |
|---|---|---|
| general.checkpointing.enabled | false | commit the workspace to a shadow repository before each edit |
| model.compressionThreshold | 0.5 | compress the history past this share of the context window |
"""

#: JavaScript: how many line boxes the long code line takes (1 when it does not wrap).
LONG_LINE_BOXES = """(pre) => {
  const text = pre.textContent;
  const start = text.indexOf("        return store."), end = text.indexOf("LONG-LINE-END") + "LONG-LINE-END".length;
  const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  let pos = 0, node;
  while ((node = walker.nextNode())) {
    const len = node.data.length;
    if (start >= pos && start < pos + len) range.setStart(node, start - pos);
    if (end > pos && end <= pos + len) { range.setEnd(node, end - pos); break; }
    pos += len;
  }
  return new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top))).size;
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_code_keeps_its_lines_tables_their_borders_and_choices_fit_a_phone(browser, server, fake, scheme):
    _script(fake, [
        {"text": CODE, "function_calls": [{"name": "write_file",
                                           "args": {"file_path": "handler.py", "content": "print('hi')\n"}}]},
        {"text": "Done."},
    ])
    context, page, watch = signed_in_page(browser, server, color_scheme=scheme, **PHONE)
    _prompt_in_a_new_session(page, "show me the handler")
    page.wait_for_selector(".approval", timeout=30000)

    pre = page.wait_for_selector(".md pre")
    assert "        return store." in pre.text_content()  # the indentation is kept
    assert pre.evaluate(LONG_LINE_BOXES) == 1, "the long code line wrapped"
    assert pre.evaluate("(p) => p.scrollWidth > p.clientWidth"), "the code block does not scroll sideways"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), "the page scrolls sideways"

    cell = page.wait_for_selector(".md td")
    assert cell.evaluate("(c) => getComputedStyle(c).borderTopStyle") == "solid"
    assert cell.evaluate("(c) => parseFloat(getComputedStyle(c).borderTopWidth)") >= 1
    table = page.wait_for_selector(".md table")
    assert table.evaluate("(t) => t.getBoundingClientRect().right <= window.innerWidth + 1")

    buttons = page.locator(".approval .choices button")
    boxes = [buttons.nth(i).bounding_box() for i in range(buttons.count())]
    choices = page.locator(".approval .choices").bounding_box()
    assert len(boxes) >= 2
    assert len({round(b["y"]) for b in boxes}) == len(boxes), f"choices share a row: {boxes}"
    assert all(abs(b["width"] - choices["width"]) <= 2 for b in boxes), f"choices of different widths: {boxes}"
    page.locator(".md pre").scroll_into_view_if_needed()
    screenshot(page, f"phone-code-table-{scheme}")
    page.locator(".approval").scroll_into_view_if_needed()
    screenshot(page, f"phone-approval-choices-{scheme}")
    page.get_by_role("button", name="No", exact=True).click()
    page.wait_for_selector(".turn .end", timeout=30000)
    assert not watch.console_errors
    context.close()


def test_pair_on_a_loopback_server_says_a_phone_cannot_open_the_link(server):
    result = server.cli("pair", "--no-qr")
    assert result.returncode == 0, result.stderr
    assert "/pair#" in result.stdout
    assert "loopback address" in result.stderr and "phone" in result.stderr
    assert "Pairing a phone" in result.stderr


def test_a_link_on_a_reachable_address_gets_no_loopback_note():
    from gemini_split.web.link import loopback_note

    assert loopback_note("https://box.example:8443/pair#abc") is None
    assert loopback_note("http://192.0.2.7:8080/pair#abc") is None
    for url in ("http://127.0.0.1:8080/pair#c", "http://[::1]:8080/pair#c", "http://localhost:8080/pair#c"):
        assert "loopback" in (loopback_note(url) or ""), url
