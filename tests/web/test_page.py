"""The browser page against a real ``serve`` and the fake Gemini server, in
headless chromium: what a person sees and can do (tests/web/conftest.py)."""

from __future__ import annotations

import json
import time

import pytest
from playwright.sync_api import expect

from tests.web.conftest import running_server, screenshot, signed_in_page

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _open_listed_session(page, title_part: str, *, seconds: float = 20):
    """Refresh the list until a session titled with ``title_part`` shows, then open it."""
    deadline = time.monotonic() + seconds
    while True:
        item = page.locator(".session-open", has_text=title_part)
        if item.count():
            item.first.click()
            return
        assert time.monotonic() < deadline, f"no session titled {title_part!r}: {page.inner_text('#sessions')}"
        page.wait_for_timeout(300)
        page.click("#refresh")


def _new_session_and_prompt(page, prompt: str):
    page.click("#new-session")
    page.wait_for_selector("#session:not([hidden])")
    expect(page.locator("#status")).to_have_text("")
    page.fill("#prompt", prompt)
    page.keyboard.press("Enter")


def test_the_list_shows_a_terminal_session_and_attaching_mid_answer_shows_the_whole_turn_once(
        browser, server, fake):
    words = " ".join(f"word{i:02d}" for i in range(40))
    _script(fake, [{"text": words, "chunks": 20, "chunk_delay": 0.25}])
    terminal = server.popen("-p", "count the words slowly")
    try:
        context, page, watch = signed_in_page(browser, server)
        _open_listed_session(page, "count the words slowly")
        expect(page.locator("#log")).to_contain_text("word39", timeout=30000)
        page.wait_for_selector(".turn .end")
        text = page.inner_text("#log")
        assert text.count("word00") == 1 and text.count("word39") == 1, text
        assert text.count("count the words slowly") == 1
        assert words in text.replace("\n", " ")
        assert not watch.dialogs and not watch.foreign
        context.close()
    finally:
        terminal.wait(timeout=60)
    assert words in terminal.stdout.read()


def test_a_prompt_from_the_browser_streams_in_the_browser_and_in_an_attached_terminal(browser, server, fake):
    context, page, watch = signed_in_page(browser, server)
    _new_session_and_prompt(page, "first prompt from the browser")
    page.wait_for_selector(".turn .end")
    session_id = page.get_attribute("#title", "title")
    watcher = server.popen("attach", "--watch", "-o", "stream-json", session_id)
    try:
        expect(page.locator("#attached")).to_contain_text("2", timeout=20000)
        page.fill("#prompt", "second line one")
        page.keyboard.press("Shift+Enter")
        page.keyboard.type("second line two")
        page.keyboard.press("Enter")
        expect(page.locator("#log")).to_contain_text("Echo: second line one\nsecond line two")
        assert page.locator(".turn").count() == 2
        deadline = time.monotonic() + 20
        seen = []
        while time.monotonic() < deadline:
            line = watcher.stdout.readline()
            if not line:
                break
            event = json.loads(line)
            seen.append(event)
            if event["type"] == "finished" and any(e.get("prompt") == "second line one\nsecond line two"
                                                   for e in seen):
                break
        texts = "".join(e.get("content", "") for e in seen if e["type"] == "text_delta")
        assert "Echo: second line one\nsecond line two" in texts
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)
    assert not watch.dialogs and not watch.foreign and not watch.console_errors
    context.close()


def _script(fake, turns):
    import httpx
    httpx.post(f"{fake.url}/_script", json=turns, timeout=10).raise_for_status()


def _write_turns(path: str, content: str):
    return [{"function_calls": [{"name": "write_file", "args": {"file_path": path, "content": content}}]},
            {"text": "Finished writing."}]


@pytest.mark.parametrize("answer", ["Yes, once", "No"])
def test_a_write_file_approval_answered_in_the_browser_decides_whether_the_file_is_written(
        browser, server, fake, answer):
    _script(fake, _write_turns("hello.txt", "hello from the model\n"))
    context, page, watch = signed_in_page(browser, server)
    _new_session_and_prompt(page, "write hello.txt")
    card = page.wait_for_selector(".approval")
    assert "write_file" in card.inner_text()
    assert "hello from the model" in card.inner_text()
    for label in ("Yes, once", "No", "No, and tell the model"):
        assert page.get_by_role("button", name=label, exact=True).is_visible()
    screenshot(page, f"approval-desktop-{'yes' if answer.startswith('Yes') else 'no'}")
    page.get_by_role("button", name=answer, exact=True).click()
    page.wait_for_selector(".turn .end")
    page.wait_for_selector(".approval", state="detached")
    written = list(server.workspaces.rglob("hello.txt"))
    if answer.startswith("Yes"):
        assert len(written) == 1 and written[0].read_text() == "hello from the model\n"
        assert page.inner_text(".tool .tool-status").lower() == "done"
    else:
        assert written == []
    assert not watch.dialogs and not watch.foreign and not watch.console_errors
    context.close()


def test_cancel_from_the_browser_stops_the_answer(browser, server, fake):
    _script(fake, [{"text": "slow " * 200, "chunks": 100, "chunk_delay": 0.2}])
    context, page, watch = signed_in_page(browser, server)
    _new_session_and_prompt(page, "answer slowly")
    expect(page.locator("#log")).to_contain_text("slow")
    page.click("#cancel")
    end = page.wait_for_selector(".turn .end")
    assert end.inner_text() == "cancelled"
    assert page.is_disabled("#cancel")
    context.close()


def test_hostile_model_text_renders_inert_and_bounded(browser, server, fake):
    hostile = ("<img src=x onerror=alert(1)> <script>alert(2)</script>\n\n"
               "[click me](javascript:alert(3)) ![pic](http://evil.example/pixel.png) http://evil.example/auto\n\n"
               "\x1b[31mred\x1b[0m \u202eevil\n\n"
               "```python\nprint('highlighted')\n```\n\n"
               + "\n".join(f"line {i}" for i in range(10000)))
    _script(fake, [{"text": hostile, "chunks": 4}])
    context, page, watch = signed_in_page(browser, server)
    _new_session_and_prompt(page, "say something hostile")
    page.wait_for_selector(".turn .end", timeout=30000)
    page.wait_for_timeout(500)
    log = page.locator("#log")
    text = log.inner_text()
    assert "<img src=x onerror=alert(1)>" in text  # shown as text
    assert log.locator("img").count() == 0
    assert log.locator("script").count() == 0
    assert page.locator("a[href^='javascript:' i]").count() == 0
    assert "\u241b[31mred" in text and "\x1b" not in text  # ESC made visible
    assert "<U+202E>" in text
    assert log.locator(".hljs-built_in, .hljs-string").count() > 0  # code highlighted
    assert "line 1980" in text and "line 9999" not in text
    more = page.locator("button.more")
    assert "more lines" in more.first.inner_text()
    screenshot(page, "hostile-desktop")
    assert not watch.dialogs, watch.dialogs
    assert not watch.foreign, watch.foreign
    assert not [e for e in watch.console_errors if "Content Security Policy" in e], watch.console_errors
    context.close()


def test_the_page_reconnects_by_itself_after_the_server_restarts(browser, tmp_path, fake):
    with running_server(tmp_path, fake) as server:
        context, page, watch = signed_in_page(browser, server)
        _new_session_and_prompt(page, "before the restart")
        page.wait_for_selector(".turn .end")
        server.stop()
        expect(page.locator("#status")).to_contain_text("reconnecting", timeout=15000)
        server.start()
        expect(page.locator("#status")).to_have_text("", timeout=30000)
        page.fill("#prompt", "after the restart")
        page.keyboard.press("Enter")
        expect(page.locator("#log")).to_contain_text("Echo: after the restart")
        text = page.inner_text("#log")
        assert text.count("Echo: before the restart") == 1
        assert text.count("Echo: after the restart") == 1
        context.close()


@pytest.mark.parametrize("size,scheme", [((390, 844), "dark"), ((1280, 800), "light")])
def test_screenshots_of_a_session_at_phone_and_desktop_sizes(browser, server, fake, size, scheme):
    _script(fake, [
        {"thought": "The user wants a function.",
         "text": "Here is a **small** function:\n\n```python\ndef add(a, b):\n    return a + b\n```\n\n"
                 "It adds two numbers. See `add` in *math.py*."},
    ])
    _script(fake, _write_turns("math.py", "def add(a, b):\n    return a + b\n"))
    width, height = size
    context, page, watch = signed_in_page(browser, server, width=width, height=height, color_scheme=scheme)
    _new_session_and_prompt(page, "write an add function")
    page.wait_for_selector(".turn .end")
    page.fill("#prompt", "save it to math.py")
    page.keyboard.press("Enter")
    page.wait_for_selector(".approval")
    name = "phone" if width < 600 else "desktop"
    screenshot(page, f"session-{name}-{scheme}")
    page.click("#back")
    page.wait_for_selector(".session-open")
    screenshot(page, f"sessions-{name}-{scheme}")
    assert not watch.console_errors, watch.console_errors
    context.close()


def test_a_second_users_browser_cannot_see_or_open_the_first_users_sessions(browser, server, fake):
    context, page, watch = signed_in_page(browser, server, user="alice")
    _new_session_and_prompt(page, "alice's secret plan")
    page.wait_for_selector(".turn .end")
    alice_session = page.get_attribute("#title", "title")
    context.close()
    context, page, watch = signed_in_page(browser, server, user="bob")
    page.wait_for_selector("#sessions:not([hidden])")
    expect(page.locator("#status")).to_have_text("")
    assert "secret plan" not in page.inner_text("body")
    assert page.locator(".session-open").count() == 0
    page.goto(page.url.split("#")[0] + f"#session={alice_session}")
    page.reload()
    expect(page.locator("#log .error-line")).to_contain_text("unknown_session")
    assert "secret plan" not in page.inner_text("body")
    context.close()


def test_every_page_carries_a_strict_csp_and_the_page_breaks_none_of_it(browser, server, fake):
    context, page, watch = signed_in_page(browser, server)
    for path in ("/", "/static/app.js", "/static/style.css", "/static/vendor/markdown-it/markdown-it.min.js"):
        response = page.request.get(page.url.split("#")[0].rstrip("/") + path)
        csp = response.headers.get("content-security-policy", "")
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, (path, csp)
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    _new_session_and_prompt(page, "hello")
    page.wait_for_selector(".turn .end")
    assert not [e for e in watch.console_errors if "Content Security Policy" in e], watch.console_errors
    context.close()


def test_the_keyboard_alone_opens_a_session_prompts_and_approves(browser, server, fake):
    _script(fake, _write_turns("keys.txt", "typed\n"))
    context, page, watch = signed_in_page(browser, server)
    page.wait_for_selector("#sessions:not([hidden])")
    page.focus("#new-session")
    page.keyboard.press("Enter")
    expect(page.locator("#prompt")).to_be_focused()
    expect(page.locator("#status")).to_have_text("")
    page.keyboard.type("write keys.txt")
    page.keyboard.press("Enter")
    page.wait_for_selector(".approval")
    expect(page.get_by_role("button", name="Yes, once", exact=True)).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_selector(".turn .end")
    assert [p.read_text() for p in server.workspaces.rglob("keys.txt")] == ["typed\n"]
    context.close()


def test_an_approval_shows_the_command_with_control_characters_visible_and_a_long_diff_capped(
        browser, server, fake):
    command = "printf '\x1b[2J\x1b]0;owned\x07'; echo hi"
    _script(fake, [{"function_calls": [{"name": "run_shell_command", "args": {"command": command}}]},
                   {"text": "Not run."},
                   *_write_turns("long.txt", "".join(f"row {i}\n" for i in range(100)))])
    context, page, watch = signed_in_page(browser, server)
    _new_session_and_prompt(page, "clear the screen")
    card = page.wait_for_selector(".approval")
    shown = page.inner_text(".approval .command")
    assert "\x1b" not in shown and "\x07" not in shown
    assert "printf '\u241b[2J\u241b]0;owned\u2407'; echo hi" == shown
    page.get_by_role("textbox", name="Tell the model what to do instead").fill("use clear instead")
    page.get_by_role("button", name="No, and tell the model").click()
    page.wait_for_selector(".turn .end")
    request = [r for r in fake.requests if r.get("action") == "streamGenerateContent"][-1]
    assert "use clear instead" in json.dumps(request["body"])
    page.fill("#prompt", "write long.txt")
    page.keyboard.press("Enter")
    card = page.wait_for_selector(".approval")
    diff = page.locator(".approval .diff")
    assert "row 30" in diff.inner_text() and "row 99" not in diff.inner_text()
    page.get_by_role("button", name="Show all").click()
    assert "row 99" in diff.inner_text()
    page.get_by_role("button", name="No", exact=True).click()
    page.wait_for_selector(".approval", state="detached")
    assert list(server.workspaces.rglob("long.txt")) == []
    context.close()


def test_notifications_are_asked_for_on_a_click_and_sent_when_a_turn_ends_in_a_hidden_tab(browser, server, fake):
    context, page, watch = signed_in_page(browser, server)
    page.wait_for_selector("#sessions:not([hidden])")
    assert page.evaluate("Notification.permission") == "default"  # nothing asked on load
    assert page.is_visible("#notify")
    context.close()

    context, page, watch = signed_in_page(browser, server, permissions=["notifications"], init_script="""
        window.__notes = [];
        window.Notification = class { constructor(title, o) { window.__notes.push([title, o.body]); }
                                       static get permission() { return "granted"; } };
        Object.defineProperty(document, "hidden", { get: () => window.__hidden === true });
    """)
    _new_session_and_prompt(page, "visible turn")
    page.wait_for_selector(".turn .end")
    assert page.evaluate("window.__notes") == []  # the tab was visible
    page.evaluate("window.__hidden = true")
    page.fill("#prompt", "hidden turn")
    page.keyboard.press("Enter")
    expect(page.locator(".turn .end")).to_have_count(2)
    notes = page.evaluate("window.__notes")
    assert notes == [["gemini-split: turn ended", "done"]]
    context.close()


def test_a_sub_agents_work_shows_in_a_block_of_its_own(browser, server, fake, tmp_path):
    agents = tmp_path / "gshome" / "agents"
    agents.mkdir(parents=True)
    (agents / "scout.md").write_text("---\nname: scout\ndescription: Scouts.\ntools: [list_directory]\n---\n"
                                     "You are SCOUT.\n")
    main = "You are gemini-split"
    _script(fake, [
        {"system_contains": main, "function_calls": [{"name": "scout", "args": {"query": "look around"}}]},
        {"system_contains": "SCOUT", "text": "scouting the area",
         "function_calls": [{"name": "list_directory", "args": {"dir_path": "."}}]},
        {"system_contains": "SCOUT", "function_calls": [{"name": "complete_task", "args": {"result": "all clear"}}]},
        {"system_contains": main, "text": "Scout says all clear."},
    ])
    done = server.cli("-p", "send the scout", "--yolo", GEMINI_SPLIT_HOME=str(tmp_path / "gshome"))
    assert done.returncode == 0, done.stderr
    context, page, watch = signed_in_page(browser, server)
    _open_listed_session(page, "send the scout")
    page.wait_for_selector(".turn .end")
    block = page.locator(".agent")
    expect(block.locator("summary").first).to_contain_text("scout")
    block.locator("summary").first.click()  # folded once it finished
    expect(block).to_contain_text("scouting the area")
    expect(block).to_contain_text("list_directory")
    expect(block).to_contain_text("all clear")
    assert "Scout says all clear." not in block.inner_text()
    assert "Scout says all clear." in page.inner_text("#log")
    context.close()


def test_the_page_says_you_for_itself_and_names_the_other_clients(browser, server, fake):
    """Issue 45 item 6: its own prompt, its own approval and its place in
    the attached list are "you"; a terminal is named by its label."""
    _script(fake, _write_turns("mine.txt", "mine\n"))
    context, page, watch = signed_in_page(browser, server)
    _new_session_and_prompt(page, "write mine.txt")
    page.get_by_role("button", name="Yes, once", exact=True).click()
    page.wait_for_selector(".turn .end")
    expect(page.locator(".turn .from")).to_have_text("you")
    expect(page.locator(".decided")).to_have_text("approve by you")
    expect(page.locator("#attached")).to_have_text("1 attached: you")
    session_id = page.get_attribute("#title", "title")
    watcher = server.popen("attach", "--watch", "--label", "laptop", session_id)
    try:
        expect(page.locator("#attached")).to_have_text("2 attached: you, laptop (watching)", timeout=20000)
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)
    expect(page.locator("#attached")).to_have_text("1 attached: you", timeout=20000)
    done = server.cli("--resume", session_id, "-p", "from the terminal")
    assert done.returncode == 0, done.stderr
    expect(page.locator(".turn .from").nth(1)).to_have_text("terminal", timeout=20000)
    assert not watch.dialogs and not watch.foreign and not watch.console_errors
    context.close()
