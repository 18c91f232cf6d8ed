"""The page's session list says who is attached to each session (issue 33
§3), in a real browser against a real ``serve --web``."""

from __future__ import annotations

import json
import time

import pytest

from tests.web.conftest import screenshot, signed_in_page

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _listed_text(page, session_id: str, wanted: str, *, seconds: float = 30) -> str:
    """Refresh the list until the item of ``session_id`` contains ``wanted``; its text."""
    deadline = time.monotonic() + seconds
    while True:
        item = page.locator(".session-open", has_text=session_id)
        text = item.first.inner_text() if item.count() else ""
        if wanted in text:
            return text
        assert time.monotonic() < deadline, f"{wanted!r} not in {session_id}'s item: {page.inner_text('#sessions')}"
        page.wait_for_timeout(300)
        page.click("#refresh")


def test_the_list_shows_a_terminal_attached_to_a_session_and_forgets_it_when_it_leaves(browser, server):
    """The browser's list and ``--list-sessions`` both count it."""
    ran = server.cli("-p", "a session a terminal watches", "-o", "json")
    assert ran.returncode == 0, ran.stderr
    session_id = json.loads(ran.stdout)["session_id"]
    context, page, watch = signed_in_page(browser, server)
    before = _listed_text(page, session_id, session_id)
    assert "attached" not in before
    terminal = server.popen("attach", "--watch", "--label", "terminal", "-o", "stream-json", session_id)
    try:
        text = _listed_text(page, session_id, "1 attached: terminal (watching)")
        screenshot(page, "session-list-attached")
        # The terminal's own listing counts it too.
        listed = server.cli("--list-sessions")
        assert f"[{session_id}] (1 attached)" in listed.stdout, listed.stdout + listed.stderr
    finally:
        terminal.terminate()
        terminal.wait(timeout=30)
    assert "a session a terminal watches" in text
    after = _listed_text(page, session_id, "turn", seconds=5)
    deadline = time.monotonic() + 30
    while "attached" in after:
        assert time.monotonic() < deadline, after
        page.wait_for_timeout(300)
        page.click("#refresh")
        after = _listed_text(page, session_id, "turn", seconds=5)
    assert not watch.dialogs and not watch.foreign and not watch.console_errors
    context.close()


def test_a_card_names_the_project_and_a_prompting_terminal_by_what_it_is(browser, server, fake):
    """Issue 46 §4: the card shows the session's project (its directory's
    name; the path as its title) and a client running ``-p`` as
    "terminal", not "client 1"."""
    import httpx

    httpx.post(f"{fake.url}/_script", timeout=10, json=[
        {"text": "first"}, {"text": "slow " * 40, "chunks": 40, "chunk_delay": 0.25}]).raise_for_status()
    ran = server.cli("-p", "the first prompt", "-o", "json")
    assert ran.returncode == 0, ran.stderr
    session_id = json.loads(ran.stdout)["session_id"]
    context, page, watch = signed_in_page(browser, server)
    prompting = server.popen("--resume", session_id, "-p", "a slow second prompt")
    try:
        text = _listed_text(page, session_id, "1 attached: terminal")
        project = page.locator(".session-open", has_text=session_id).first.locator(".session-project")
        assert project.inner_text() == server.home.name
        assert project.get_attribute("title") == str(server.home)
        assert "client 1" not in text
        screenshot(page, "session-card-project-terminal")
    finally:
        prompting.wait(timeout=60)
    assert not watch.console_errors
    context.close()
