"""Paired browsers shared by ``serve --web --store redis://`` replicas (issue
33): two real serve processes on one real redis-server, codes from
``gemini-split pair``, the page's HTTP and WebSocket side as a browser sends
them (httpx, websockets: the cookie and the page's Origin)."""

from __future__ import annotations

import hashlib
import json
import threading
import time

import httpx
import pytest
import trio
from websockets.exceptions import ConnectionClosed, InvalidStatus

from gemini_split.protocol import Error
from gemini_split.testing import redis_server as rs
from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY, client
from tests.e2e.test_web_serve import ALICE, BOB, SignedIn, browser_socket, exchange, http_of, pair_link, post_code
from tests.server.resume.test_resume_e2e import _free_port
from .replicas import replica

pytestmark = [pytest.mark.skipif(not rs.available(), reason=rs.MISSING),
              pytest.mark.timeout(150)]  # two servers start, and restart, on a loaded 2-core machine

HELLO = {"type": "hello", "id": "h", "client": "web", "protocol_version": None}


@pytest.fixture
def page(tmp_path):
    d = tmp_path / "static"
    d.mkdir()
    (d / "index.html").write_text("<!doctype html>\n")
    return d


@pytest.fixture
def auth_config(tmp_path):
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({"tokens": {ALICE: {"userId": "alice"}, BOB: {"userId": "bob"}}}))
    return path


def hello(ws) -> dict:
    from gemini_split.protocol import PROTOCOL_VERSION

    return exchange(ws, {**HELLO, "protocol_version": PROTOCOL_VERSION}, "connected")


def me(address: str, signed: SignedIn) -> httpx.Response:
    return httpx.get(http_of(address) + "/api/me", headers=signed.headers())


def web_replica(tmp_path, fake, url, port, page, auth_config, name):
    return replica(tmp_path, fake, url, port, "--web", "--web-static", str(page), "--auth-config", str(auth_config),
                   name=name)


def test_a_code_from_one_replica_signs_in_once_on_another_and_the_cookie_works_on_both(
        tmp_path, redis_server, page, auth_config):
    url = redis_server.url_with_prefix()
    port_a, port_b = _free_port(), _free_port()
    a, b = f"ws://127.0.0.1:{port_a}", f"ws://127.0.0.1:{port_b}"
    with FakeGemini(api_key=API_KEY) as fake, \
            web_replica(tmp_path, fake, url, port_a, page, auth_config, "a"), \
            web_replica(tmp_path, fake, url, port_b, page, auth_config, "b"):
        code = pair_link(a, tmp_path, "--token", ALICE).partition("#")[2]
        on_b = post_code(http_of(b), code)
        again_on_a = post_code(http_of(a), code)
        again_on_b = post_code(http_of(b), code)
        cookie = SignedIn.of(on_b)
        seen_by = {name: me(address, cookie) for name, address in (("a", a), ("b", b))}
        with browser_socket(a, cookie) as ws:
            on_a_socket = hello(ws)["type"]
        listed_b = client(["pair", "--list", "--server", b, "--token", ALICE], cwd=tmp_path)
        listed_bob = client(["pair", "--list", "--server", b, "--token", BOB], cwd=tmp_path)
    logs = (tmp_path / "a.log").read_text() + (tmp_path / "b.log").read_text()
    # Everything Redis was told is in its append-only file: hashes only.
    written = b"".join(p.read_bytes() for p in redis_server.directory.rglob("*") if p.is_file())
    assert cookie.cookie.encode() not in written and cookie.page.encode() not in written
    assert code.encode() not in written
    assert hashlib.sha256(f"{cookie.cookie}\n{cookie.page}".encode()).hexdigest().encode() in written
    assert on_b.status_code == 200 and on_b.json()["user"] == "alice"
    assert again_on_a.status_code == again_on_b.status_code == 410
    assert again_on_a.json()["error"] == again_on_b.json()["error"] == "used"
    assert "used already" in again_on_a.json()["message"]
    assert {name: (r.status_code, r.json()["user"]) for name, r in seen_by.items()} == {
        "a": (200, "alice"), "b": (200, "alice")}
    assert on_a_socket == "connected"
    browser_id = on_b.json()["browser"]
    assert listed_b.returncode == 0 and browser_id in listed_b.stdout, listed_b.stderr
    assert listed_bob.returncode == 0 and browser_id not in listed_bob.stdout
    assert cookie.cookie not in logs and cookie.page not in logs and code not in logs


def test_a_revoke_on_one_replica_closes_the_open_page_on_another_at_once(tmp_path, redis_server, page, auth_config):
    url = redis_server.url_with_prefix()
    port_a, port_b = _free_port(), _free_port()
    a, b = f"ws://127.0.0.1:{port_a}", f"ws://127.0.0.1:{port_b}"
    with FakeGemini(api_key=API_KEY) as fake, \
            web_replica(tmp_path, fake, url, port_a, page, auth_config, "a"), \
            web_replica(tmp_path, fake, url, port_b, page, auth_config, "b"):
        cookie = SignedIn.of(post_code(http_of(a), pair_link(a, tmp_path, "--token", ALICE).partition("#")[2]))
        kept = SignedIn.of(post_code(http_of(b), pair_link(b, tmp_path, "--token", ALICE).partition("#")[2]))
        browser_id = me(a, cookie).json()["browser"]
        with browser_socket(a, cookie) as ws:
            hello(ws)
            me(a, cookie)  # a's cache holds the browser now: the revocation must reach it
            revoked = client(["pair", "--revoke", browser_id, "--server", b, "--token", ALICE], cwd=tmp_path)
            started = time.monotonic()
            with pytest.raises(ConnectionClosed):
                while True:
                    ws.recv(timeout=10)
            closed_after = time.monotonic() - started
        refused = {}
        for name, address in (("a", a), ("b", b)):
            with pytest.raises(InvalidStatus) as caught:
                browser_socket(address, cookie)
            refused[name] = caught.value.response.status_code
        after = {name: me(address, cookie).status_code for name, address in (("a", a), ("b", b))}
        other = me(a, kept).status_code
    assert revoked.returncode == 0, revoked.stderr
    assert closed_after < 5
    assert refused == {"a": 401, "b": 401} and after == {"a": 401, "b": 401}
    assert other == 200  # only that browser was signed out
    assert "was signed out on another replica" in (tmp_path / "a.log").read_text()


def test_a_restart_of_both_replicas_keeps_the_browser_signed_in(tmp_path, redis_server, page, auth_config):
    url = redis_server.url_with_prefix()
    with FakeGemini(api_key=API_KEY) as fake:
        port_a, port_b = _free_port(), _free_port()
        a, b = f"ws://127.0.0.1:{port_a}", f"ws://127.0.0.1:{port_b}"
        with web_replica(tmp_path, fake, url, port_a, page, auth_config, "a"), \
                web_replica(tmp_path, fake, url, port_b, page, auth_config, "b"):
            cookie = SignedIn.of(post_code(http_of(a), pair_link(b, tmp_path, "--token", ALICE).partition("#")[2]))
            pending = pair_link(a, tmp_path, "--token", ALICE).partition("#")[2]
        port_a, port_b = _free_port(), _free_port()
        a, b = f"ws://127.0.0.1:{port_a}", f"ws://127.0.0.1:{port_b}"
        with web_replica(tmp_path, fake, url, port_a, page, auth_config, "a2"), \
                web_replica(tmp_path, fake, url, port_b, page, auth_config, "b2"):
            after = {name: me(address, cookie) for name, address in (("a", a), ("b", b))}
            with browser_socket(b, cookie) as ws:
                works = hello(ws)["type"]
            late_code = post_code(http_of(b), pending)
    assert {name: (r.status_code, r.json()["user"]) for name, r in after.items()} == {
        "a": (200, "alice"), "b": (200, "alice")}
    assert works == "connected"
    assert late_code.status_code == 200  # a code given before the restart still works once


def test_two_replicas_redeeming_one_code_at_the_same_moment_sign_in_one_browser(
        tmp_path, redis_server, page, auth_config):
    url = redis_server.url_with_prefix()
    port_a, port_b = _free_port(), _free_port()
    a, b = f"ws://127.0.0.1:{port_a}", f"ws://127.0.0.1:{port_b}"
    with FakeGemini(api_key=API_KEY) as fake, \
            web_replica(tmp_path, fake, url, port_a, page, auth_config, "a"), \
            web_replica(tmp_path, fake, url, port_b, page, auth_config, "b"):
        statuses = []
        for _ in range(3):
            code = pair_link(a, tmp_path, "--token", ALICE).partition("#")[2]
            answers: list[int] = []
            go = threading.Barrier(4)

            def redeem(address: str) -> None:
                go.wait()
                answers.append(post_code(http_of(address), code).status_code)

            threads = [threading.Thread(target=redeem, args=(address,)) for address in (a, b, a, b)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            statuses.append(sorted(answers))
        listed = client(["pair", "--list", "--server", a, "--token", ALICE], cwd=tmp_path)
    assert statuses == [[200, 410, 410, 410]] * 3
    assert listed.stdout.count("TestBrowser/1.0") == 3, listed.stdout


def test_while_redis_is_away_a_browser_is_told_to_retry_never_signed_out(tmp_path, page, auth_config):
    port = _free_port()
    address = f"ws://127.0.0.1:{port}"
    with rs.RedisServer(tmp_path / "redis") as redis, FakeGemini(api_key=API_KEY) as fake, \
            web_replica(tmp_path, fake, redis.url_with_prefix(), port, page, auth_config, "a"):
        cookie = SignedIn.of(post_code(http_of(address), pair_link(address, tmp_path, "--token", ALICE).partition("#")[2]))
        redis.stop()
        # A cookie this replica has not seen lately must be asked of Redis.
        unknown = me(address, SignedIn("never-seen-cookie", "never-seen-page"))
        with pytest.raises(InvalidStatus) as caught:
            browser_socket(address, SignedIn("never-seen-cookie", "never-seen-page"))
        code = post_code(http_of(address), "some-code")
        redis.start()
        after = me(address, cookie)
    assert unknown.status_code == 503 and unknown.json()["error"] == "unavailable"
    assert caught.value.response.status_code == 503
    assert code.status_code == 503
    assert after.status_code == 200 and after.json()["user"] == "alice"


async def test_a_client_relayed_to_another_replica_gets_a_pairing_link_there_too(redis_server):
    """/remote in a REPL whose session runs on another replica: the relay
    answers ``pair`` from the shared store (the runner never hears it)."""
    from gemini_split.protocol import Pair, PairedBrowsers, PairedLink
    from gemini_split.web.pairing import Pairing

    from tests.server.attach.test_attach_server import hello as attach
    from tests.server.replicas.test_relay import _turn, two_replicas

    with trio.fail_after(30):
        async with two_replicas(redis_server, [{"text": "hi"}]) as (services, (at_a, at_b)):
            for service in services:
                service.pairing = Pairing(service.store.paired_browsers())
            async with attach(at_a, label="laptop") as (local, first):
                *_, done = await _turn(local, "first")
                async with attach(at_b, session_id=first.session_id, label="phone", last_seq=done.seq) as (
                        relayed, _):
                    assert services[1].relays == 1  # it is relayed, not run on b
                    await relayed.send(Pair(action="link"))
                    *_, link = await relayed.receive_until(lambda m: isinstance(m, PairedLink | Error))
                    browser, _cookie, _page = await services[0].pairing.redeem(link.code, "Phone/1")
                    await relayed.send(Pair(action="list"))
                    *_, listed = await relayed.receive_until(lambda m: isinstance(m, PairedBrowsers | Error))
    assert isinstance(link, PairedLink) and link.code
    assert isinstance(listed, PairedBrowsers) and [b.id for b in listed.browsers] == [browser.id]
