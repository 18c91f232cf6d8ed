"""Signing a browser in with the link ``gemini-split pair`` prints, as the
page shows it (needs ``serve --web``: docs/web.md)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.web.conftest import Watch, pair_link

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_a_pairing_link_signs_the_browser_in_once_and_a_reused_one_is_refused_clearly(browser, server):
    link = pair_link(server)
    first = browser.new_context()
    page = first.new_page()
    page.goto(link)
    page.wait_for_url(f"{server.origin}/")
    page.wait_for_selector("#sessions:not([hidden])")
    expect(page.locator("#who")).to_contain_text("alice")
    first.close()
    second = browser.new_context()
    page = second.new_page()
    watch = Watch(page, server.origin)
    page.goto(link)
    expect(page.locator("#signin-title")).to_have_text("Pairing refused")
    expect(page.locator("#signin-text")).to_contain_text("already used")
    assert "#" not in page.url  # the code left the address bar
    assert not watch.foreign
    second.close()


def test_a_browser_without_a_pairing_is_told_how_to_sign_in(browser, server):
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{server.origin}/")
    expect(page.locator("#signin-text")).to_contain_text("gemini-split pair")
    context.close()


def test_an_expired_pairing_link_is_refused_clearly(browser, tmp_path, fake):
    import time

    from tests.web.conftest import running_server

    with running_server(tmp_path, fake, "--web-pair-ttl", "1") as server:
        link = pair_link(server)
        time.sleep(2)
        context = browser.new_context()
        page = context.new_page()
        page.goto(link)
        expect(page.locator("#signin-title")).to_have_text("Pairing refused")
        expect(page.locator("#signin-text")).to_contain_text("expired")
        context.close()


def test_sign_out_forgets_the_browser(browser, server):
    context = browser.new_context()
    page = context.new_page()
    page.goto(pair_link(server))
    page.wait_for_selector("#sessions:not([hidden])")
    page.click("#logout")
    expect(page.locator("#signin-title")).to_have_text("Signed out")
    page.reload()
    expect(page.locator("#signin-title")).to_have_text("Not signed in")
    context.close()
