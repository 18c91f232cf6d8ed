"""``serve --web`` end to end, as a browser sees it: a real ``serve``
subprocess, its page and API fetched with httpx, its WebSocket opened with
``websockets`` carrying the cookie and Origin a browser would send, pairing
links printed by ``gemini-split pair``. (The page itself, in a real
browser: tests/ui/web, the page engineer's Playwright tests.)"""

from __future__ import annotations

import json
import socket
import time
from typing import NamedTuple

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from gemini_split.protocol import PROTOCOL_VERSION
from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY, client, daemon

ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789"
SECURITY = {
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}

pytestmark = pytest.mark.timeout(90)  # a server and several clients start on a loaded 2-core machine


@pytest.fixture
def page(tmp_path):
    """Stand-in page files (the real page is the page engineer's): served
    through the hidden --web-static DIR."""
    d = tmp_path / "static"
    (d / "vendor").mkdir(parents=True)
    (d / "index.html").write_text('<!doctype html><script src="/static/app.js"></script>\n')
    (d / "app.js").write_text("console.log('page');\n")
    (d / "style.css").write_text("body{}\n")
    (d / "vendor" / "lib.js").write_text("/* vendored */\n")
    (d / ".secret").write_text("dot-files are never served\n")
    return d


@pytest.fixture
def auth_config(tmp_path):
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({"tokens": {ALICE: {"userId": "alice"}, BOB: {"userId": "bob"}}}))
    return path


def web_server(tmp_path, fake, page, *args):
    return daemon(tmp_path, fake, "--web", "--web-static", str(page), "--state-dir", str(tmp_path / "state"), *args)


def http_of(address: str) -> str:
    return address.replace("ws://", "http://", 1)


def pair_link(address, tmp_path, *more) -> str:
    result = client(["pair", "--no-qr", "--server", address, *more], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    link = result.stdout.strip().splitlines()[-1]
    assert link.startswith(f"{http_of(address)}/pair#"), link
    return link


def post_code(base: str, code: str, *, origin: str | None = None, content_type="application/json") -> httpx.Response:
    return httpx.post(f"{base}/api/pair", content=json.dumps({"code": code}), headers={
        "Origin": origin or base, "Content-Type": content_type, "User-Agent": "TestBrowser/1.0"})


class SignedIn(NamedTuple):
    """A paired browser's sign-in as the page holds it: its cookie and its
    page token (the two together sign it in)."""

    cookie: str
    page: str

    @classmethod
    def of(cls, answer: httpx.Response) -> SignedIn:
        return cls(answer.cookies.get("gs_browser") or "none", answer.json().get("page") or "none")

    def headers(self, **more: str) -> dict:
        """What the page's ``fetch`` sends: the cookie and the page token."""
        return {"Cookie": f"gs_browser={self.cookie}", "X-GS-Page": self.page, **more}

    def socket_url(self, address: str) -> str:
        return f"{address}/?page={self.page}"


def sign_in(address, tmp_path, *more) -> SignedIn:
    """Pair a browser as ``gemini-split pair`` would have it; its sign-in."""
    base = http_of(address)
    code = pair_link(address, tmp_path, *more).partition("#")[2]
    answer = post_code(base, code)
    assert answer.status_code == 200, answer.text
    return SignedIn.of(answer)


def browser_socket(address, signed: SignedIn | None, *, origin: str | None = None):
    """The page's WebSocket: its page token in the URL, its cookie in the header."""
    headers = {"Cookie": f"gs_browser={signed.cookie}"} if signed else {}
    return connect(signed.socket_url(address) if signed else address, origin=origin or http_of(address),
                   additional_headers=headers, open_timeout=10)


def exchange(ws, message: dict, until: str) -> dict:
    """Send ``message`` as the page would (stamped) and read up to the
    answer of type ``until`` (or an error)."""
    ws.send(json.dumps({**message, "timestamp": int(time.time() * 1000)}))
    while True:
        reply = json.loads(ws.recv(timeout=15))
        if reply["type"] in (until, "error"):
            return reply


def test_every_page_and_file_carries_the_strict_csp_and_the_right_type(tmp_path, page):
    with FakeGemini(api_key=API_KEY) as fake, web_server(tmp_path, fake, page) as (_, address):
        base = http_of(address)
        answers = {path: httpx.get(base + path) for path in (
            "/", "/pair", "/static/app.js", "/static/style.css", "/static/vendor/lib.js", "/static/nope.js",
            "/api/me", "/api/nothing")}
        etag = answers["/static/app.js"].headers["etag"]
        again = httpx.get(base + "/static/app.js", headers={"If-None-Match": etag})
    for path, answer in answers.items():
        for name, value in SECURITY.items():
            assert answer.headers.get(name) == value, (path, name)
    assert answers["/"].status_code == answers["/pair"].status_code == 200
    assert answers["/"].text.startswith("<!doctype html>")
    assert answers["/"].headers["content-type"] == "text/html; charset=utf-8"
    assert answers["/static/app.js"].headers["content-type"] == "text/javascript; charset=utf-8"
    assert answers["/static/style.css"].headers["content-type"] == "text/css; charset=utf-8"
    assert answers["/static/vendor/lib.js"].text == "/* vendored */\n"
    assert answers["/static/nope.js"].status_code == 404
    assert answers["/api/me"].status_code == 401 and answers["/api/me"].json()["error"] == "signed_out"
    assert answers["/api/nothing"].status_code == 404
    assert again.status_code == 304


def test_serve_web_says_where_the_page_is_and_how_to_pair(tmp_path, page):
    with FakeGemini(api_key=API_KEY) as fake, web_server(tmp_path, fake, page) as (proc, address):
        line = proc.stderr.readline()
    assert f"the web page is at {http_of(address)}/" in line, line
    assert f"gemini-split pair --server {address}" in line


def test_path_traversal_and_garbage_requests_are_refused(tmp_path, page):
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "secret.txt").write_text("TOP SECRET\n")
    with FakeGemini(api_key=API_KEY) as fake, web_server(tmp_path, fake, page) as (_, address):
        base = http_of(address)
        host, port = address.removeprefix("ws://").rsplit(":", 1)
        answers = []
        for path in ("/static/../secret.txt", "/static/%2e%2e/secret.txt", "/static//etc/passwd",
                     "/static/.secret", "/static/", "/static/vendor", "/../secret.txt", "/static/app.js%00.html"):
            with socket.create_connection((host, int(port)), timeout=10) as raw:
                raw.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
                answers.append((path, raw.makefile("rb").read().decode("latin-1")))
        huge = httpx.post(f"{base}/api/pair", content=b"x" * 100_000,
                          headers={"Origin": base, "Content-Type": "application/json"})
        garbage = post_code(base, "")
        not_json = httpx.post(f"{base}/api/pair", content=b"\xff\xfe{", headers={
            "Origin": base, "Content-Type": "application/json"})
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            raw.sendall(b"\x16\x03\x01\x02\x00binary")
            binary = raw.makefile("rb").read().decode("latin-1")
        alive = httpx.get(base + "/")
    for path, text in answers:
        assert text.startswith("HTTP/1.1 404") or text.startswith("HTTP/1.1 400"), (path, text[:80])
        assert "TOP SECRET" not in text and "root:" not in text and "never served" not in text
    assert huge.status_code == 413
    assert garbage.status_code == 400 and not_json.status_code == 400
    assert binary.startswith("HTTP/1.1 400")
    assert alive.status_code == 200


def test_a_pairing_link_signs_in_once_and_then_says_it_was_used(tmp_path, page):
    with FakeGemini(api_key=API_KEY) as fake, web_server(tmp_path, fake, page) as (_, address):
        base = http_of(address)
        link = pair_link(address, tmp_path)
        code = link.partition("#")[2]
        first = post_code(base, code)
        second = post_code(base, code)
        unknown = post_code(base, "not-a-code")
        me = httpx.get(base + "/api/me", headers=SignedIn.of(first).headers())
        alone = httpx.get(base + "/api/me", headers={"Cookie": f"gs_browser={first.cookies['gs_browser']}"})
        listed = client(["pair", "--list", "--server", address], cwd=tmp_path)
    assert first.status_code == 200
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert f"Max-Age={30 * 86400}" in cookie and "Secure" not in cookie  # plain http on loopback
    assert second.status_code == 410 and second.json()["error"] == "used"
    assert me.status_code == 200 and alone.status_code == 401  # the cookie alone signs nothing in
    assert unknown.status_code == 400 and unknown.json()["error"] == "unknown"
    assert me.status_code == 200
    assert me.json() | {"browser": None} == {"user": "", "server": "gemini-split", "protocol_version": PROTOCOL_VERSION,
                                            "server_tools": False, "browser": None}
    assert listed.returncode == 0, listed.stderr
    assert me.json()["browser"] in listed.stdout and "TestBrowser/1.0" in listed.stdout


def test_an_expired_link_is_refused_clearly(tmp_path, page):
    with FakeGemini(api_key=API_KEY) as fake, web_server(tmp_path, fake, page, "--web-pair-ttl", "1") as (_, address):
        code = pair_link(address, tmp_path).partition("#")[2]
        time.sleep(1.5)
        late = post_code(http_of(address), code)
    assert late.status_code == 410
    assert late.json()["error"] == "expired" and "expired" in late.json()["message"]


def test_pairing_refuses_another_sites_form_and_non_json_posts(tmp_path, page):
    with FakeGemini(api_key=API_KEY) as fake, web_server(tmp_path, fake, page) as (_, address):
        base = http_of(address)
        code = pair_link(address, tmp_path).partition("#")[2]
        foreign = post_code(base, code, origin="https://evil.example")
        no_origin = httpx.post(f"{base}/api/pair", content=json.dumps({"code": code}),
                               headers={"Content-Type": "application/json"})
        form = post_code(base, code, content_type="application/x-www-form-urlencoded")
        still_good = post_code(base, code)
    assert foreign.status_code == no_origin.status_code == 403
    assert form.status_code == 415
    assert still_good.status_code == 200  # the refused attempts did not spend the code


def test_failed_pairing_codes_are_throttled_like_tokens(tmp_path, page):
    """10 failed codes from one address, then 429 — until the bucket
    refills one code per 6 s, so a guess sent 6 s or more after the first
    may be let through again: only the guesses sent within 5.5 s of the
    first are held to 429 (a loaded CI machine once took over 6 s for 12)."""
    with FakeGemini(api_key=API_KEY) as fake, web_server(tmp_path, fake, page) as (_, address):
        base = http_of(address)
        sent = []
        with httpx.Client() as http:  # one client, as a browser: a new one per post costs ~40 ms of TLS setup
            for n in range(12):
                at = time.monotonic()
                answer = http.post(f"{base}/api/pair", content=json.dumps({"code": f"guess-{n}"}),
                                   headers={"Origin": base, "Content-Type": "application/json"})
                sent.append((at, answer.status_code))
            # A valid code from the same address is taken all the same (T4-5:
            # behind a proxy every user shares the guesser's address).
            code = pair_link(address, tmp_path).partition("#")[2]
            valid = http.post(f"{base}/api/pair", content=json.dumps({"code": code}),
                              headers={"Origin": base, "Content-Type": "application/json"})
            after = http.post(f"{base}/api/pair", content=json.dumps({"code": "guess-again"}),
                              headers={"Origin": base, "Content-Type": "application/json"})
    statuses = [status for _, status in sent]
    assert statuses[:10] == [400] * 10
    within = [status for at, status in sent[10:] if at - sent[0][0] < 5.5]
    assert within, f"the machine was too slow to tell: the 11th guess went {sent[10][0] - sent[0][0]:.1f} s after the first"
    assert within == [429] * len(within), statuses
    assert valid.status_code == 200 and "gs_browser" in valid.cookies, valid.text
    assert after.status_code in (400, 429)  # guessing stays throttled


def test_a_cookie_signs_in_as_its_user_who_sees_only_their_own_sessions(tmp_path, page, auth_config):
    with FakeGemini(api_key=API_KEY) as fake, \
            web_server(tmp_path, fake, page, "--auth-config", str(auth_config)) as (_, address):
        done = client(["--server", address, "--token", ALICE, "-p", "alice's secret plan", "-o", "json"],
                      cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        alice_session = json.loads(done.stdout)["session_id"]
        alice = sign_in(address, tmp_path, "--token", ALICE)
        bob = sign_in(address, tmp_path, "--token", BOB)
        me = httpx.get(http_of(address) + "/api/me", headers=bob.headers()).json()
        with browser_socket(address, alice) as ws:
            assert exchange(ws, {"type": "hello", "id": "h", "client": "web", "protocol_version": PROTOCOL_VERSION}, "connected")["type"] == "connected"
            alice_sees = exchange(ws, {"type": "list_sessions", "id": "l"}, "sessions")
        with browser_socket(address, bob) as ws:
            exchange(ws, {"type": "hello", "id": "h", "client": "web", "protocol_version": PROTOCOL_VERSION}, "connected")
            bob_sees = exchange(ws, {"type": "list_sessions", "id": "l"}, "sessions")
        with browser_socket(address, bob) as ws:
            opened = exchange(ws, {"type": "hello", "id": "h", "client": "web", "protocol_version": PROTOCOL_VERSION, "session_id": alice_session,
                                   "role": "observer"}, "connected")
    assert me["user"] == "bob"
    assert alice_session in [s["id"] for s in alice_sees.get("sessions", ())], alice_sees
    assert alice_session not in [s["id"] for s in bob_sees.get("sessions", ())]
    assert opened["type"] == "error" and opened["code"] == "unknown_session"
    assert "secret plan" not in json.dumps(bob_sees) + json.dumps(opened)


def test_a_socket_from_another_origin_or_without_a_cookie_and_its_page_token_is_refused(tmp_path, page, auth_config):
    """T4-7: the cookie is sent to every port of the host, where a program can
    replay it: without the page token (kept in the page's origin's own
    storage) it signs nothing in."""
    with FakeGemini(api_key=API_KEY) as fake, \
            web_server(tmp_path, fake, page, "--auth-config", str(auth_config)) as (_, address):
        cookie = sign_in(address, tmp_path, "--token", ALICE)
        refused = {}
        for name, kwargs in {
            "foreign origin": {"signed": cookie, "origin": "https://evil.example"},
            "no cookie": {"signed": None},
            "wrong cookie": {"signed": SignedIn("forged", cookie.page)},
            "cookie alone": {"signed": SignedIn(cookie.cookie, "")},
            "another page's token": {"signed": SignedIn(cookie.cookie, "forged-page-token")},
        }.items():
            with pytest.raises(InvalidStatus) as caught:
                browser_socket(address, **kwargs)
            refused[name] = caught.value.response.status_code
        with browser_socket(address, cookie) as ws:
            works = exchange(ws, {"type": "hello", "id": "h", "client": "web", "protocol_version": PROTOCOL_VERSION}, "connected")["type"]
    assert refused == {"foreign origin": 403, "no cookie": 401, "wrong cookie": 401, "cookie alone": 401,
                       "another page's token": 401}
    assert works == "connected"


def test_revoking_a_browser_closes_its_open_page_at_once(tmp_path, page, auth_config):
    with FakeGemini(api_key=API_KEY) as fake, \
            web_server(tmp_path, fake, page, "--auth-config", str(auth_config)) as (_, address):
        cookie = sign_in(address, tmp_path, "--token", ALICE)
        kept = sign_in(address, tmp_path, "--token", ALICE)
        me = httpx.get(http_of(address) + "/api/me", headers=cookie.headers()).json()
        with browser_socket(address, cookie) as ws:
            exchange(ws, {"type": "hello", "id": "h", "client": "web", "protocol_version": PROTOCOL_VERSION}, "connected")
            bob_tries = client(["pair", "--revoke", me["browser"], "--server", address, "--token", BOB], cwd=tmp_path)
            exchange(ws, {"type": "list_sessions", "id": "l"}, "sessions")  # bob could not touch it
            revoked = client(["pair", "--revoke", me["browser"], "--server", address, "--token", ALICE],
                             cwd=tmp_path)
            with pytest.raises(ConnectionClosed):
                while True:
                    ws.recv(timeout=10)
        with pytest.raises(InvalidStatus) as caught:
            browser_socket(address, cookie)
        after = httpx.get(http_of(address) + "/api/me", headers=cookie.headers())
        other = httpx.get(http_of(address) + "/api/me", headers=kept.headers())
    assert bob_tries.returncode != 0 and "no paired browser" in bob_tries.stderr
    assert revoked.returncode == 0, revoked.stderr
    assert caught.value.response.status_code == 401
    assert after.status_code == 401 and other.status_code == 200


def test_a_paired_browser_cannot_pair_or_sign_out_browsers_so_revoking_it_leaves_nothing_behind(
        tmp_path, page, auth_config):
    """A cookie never mints cookies: a browser's connection may list the
    user's browsers, not make a pairing code (whose browser would outlive
    ``pair --revoke`` of its parent) nor revoke one."""
    with FakeGemini(api_key=API_KEY) as fake, \
            web_server(tmp_path, fake, page, "--auth-config", str(auth_config)) as (_, address):
        cookie = sign_in(address, tmp_path, "--token", ALICE)
        me = httpx.get(http_of(address) + "/api/me", headers=cookie.headers()).json()
        with browser_socket(address, cookie) as ws:
            exchange(ws, {"type": "hello", "id": "h", "client": "web", "protocol_version": PROTOCOL_VERSION},
                     "connected")
            link = exchange(ws, {"type": "pair", "id": "p1", "action": "link"}, "error")
            revoke = exchange(ws, {"type": "pair", "id": "p2", "action": "revoke", "browser_id": me["browser"]},
                              "error")
            listed = exchange(ws, {"type": "pair", "id": "p3", "action": "list"}, "paired_browsers")
        still = httpx.get(http_of(address) + "/api/me", headers=cookie.headers())
    assert link["code"] == revoke["code"] == "forbidden"
    assert "in a terminal" in link["message"]
    assert [b["id"] for b in listed["browsers"]] == [me["browser"]]
    assert still.status_code == 200  # its own revoke was refused too


def test_paired_browsers_survive_a_restart_and_only_hashes_are_kept(tmp_path, page):
    with FakeGemini(api_key=API_KEY) as fake:
        with web_server(tmp_path, fake, page) as (_, address):
            cookie = sign_in(address, tmp_path)
        with web_server(tmp_path, fake, page) as (proc, address):
            me = httpx.get(http_of(address) + "/api/me", headers=cookie.headers())
            logout = httpx.post(http_of(address) + "/api/logout", content=b"{}", headers=cookie.headers(
                **{"Origin": http_of(address), "Content-Type": "application/json"}))
            after = httpx.get(http_of(address) + "/api/me", headers=cookie.headers())
        log = proc.stderr.read()
    stored = b"".join(p.read_bytes() for p in (tmp_path / "state").iterdir() if p.is_file())
    assert me.status_code == 200
    assert logout.status_code == 200 and "Max-Age=0" in logout.headers["set-cookie"]
    assert after.status_code == 401
    for secret in cookie:
        assert secret.encode() not in stored and secret not in log


class _Hook:
    """A webhook receiver: a real HTTP server on a thread, keeping what is posted."""

    def __init__(self, delay: float = 0):
        import http.server
        import threading

        received = self.received = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                received.append((self.path, self.headers.get("content-type"), json.loads(body)))
                time.sleep(delay)  # a slow receiver: answers late (or never, for the sender)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, count: int, timeout: float = 15) -> list:
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.received

    def close(self):
        self.server.shutdown()
        self.server.server_close()  # a handler still sleeping is a daemon thread


def test_the_webhook_hears_a_turn_end_ntfy_style_without_the_prompt(tmp_path, page):
    hook = _Hook()
    try:
        with FakeGemini(api_key=API_KEY) as fake, \
                web_server(tmp_path, fake, page, "--notify-webhook", f"{hook.url}/my-topic") as (_, address):
            done = client(["--server", address, "-p", "my very secret prompt", "-o", "json"], cwd=tmp_path)
            assert done.returncode == 0, done.stderr
            session = json.loads(done.stdout)["session_id"]
            received = hook.wait(1)
    finally:
        hook.close()
    assert len(received) == 1
    path, content_type, payload = received[0]
    assert path == "/" and content_type == "application/json"
    assert payload == {"topic": "my-topic", "title": "gemini-split: Turn finished",
                       "message": f"The agent finished its turn: session {session}",
                       "click": f"{http_of(address)}/#session={session}"}


def test_a_dead_webhook_neither_slows_a_turn_nor_floods_the_log(tmp_path, page):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/hooks/secret-path?token=hidden"
    with FakeGemini(api_key=API_KEY) as fake, \
            web_server(tmp_path, fake, page, "--notify-webhook", dead) as (proc, address):
        started = time.monotonic()
        for n in range(2):
            done = client(["--server", address, "-p", f"hi {n}", "--resume", "latest"] if n else
                          ["--server", address, "-p", "hi"], cwd=tmp_path)
            assert done.returncode == 0, done.stderr
        took = time.monotonic() - started
        time.sleep(1)
    log = proc.stderr.read()
    assert took < 20
    assert log.count("cannot post a notification") == 1
    assert "secret-path" not in log and "hidden" not in log


def test_remote_in_the_repl_prints_a_link_that_signs_a_browser_in(tmp_path, page):
    import sys

    from tests.ui.repl.pty_driver import ENTER, PtyProcess, plain
    from tests.ui.repl.test_repl import _environ

    with FakeGemini(api_key=API_KEY) as fake, web_server(tmp_path, fake, page) as (_, address):
        repl = PtyProcess([sys.executable, "-m", "gemini_split", "--server", address],
                          env=_environ(tmp_path, NO_COLOR="1"), cwd=str(tmp_path), cols=200)
        try:
            repl.expect(r"/help for commands", timeout=20)
            repl.type("/remote")
            repl.send(ENTER)
            found = repl.expect(r"(http://127\.0\.0\.1:\d+/pair#[A-Za-z0-9_-]+)", timeout=20)
            repl.expect(r"a phone", timeout=10)  # a loopback link: said that a phone cannot open it
            text = plain(repl.text)
        finally:
            repl.close()
        signed_in = post_code(http_of(address), found.group(1).partition("#")[2])
    assert signed_in.status_code == 200
    assert "█" in text  # the QR code


def test_under_tls_the_link_is_https_and_the_cookie_is_secure(tmp_path, page):
    import ssl

    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_file, key_file, ca_file = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    ca.cert_pem.write_to_path(str(ca_file))
    context = ssl.create_default_context(cafile=str(ca_file))
    with FakeGemini(api_key=API_KEY) as fake, \
            web_server(tmp_path, fake, page, "--tls-cert", str(cert_file), "--tls-key", str(key_file)) as (_, address):
        assert address.startswith("wss://")
        base = address.replace("wss://", "https://", 1)
        result = client(["pair", "--no-qr", "--server", address, "--ca", str(ca_file)], cwd=tmp_path)
        link = result.stdout.strip().splitlines()[-1]
        answer = httpx.post(f"{base}/api/pair", json={"code": link.partition("#")[2]},
                            headers={"Origin": base}, verify=context)
        signed = SignedIn.of(answer)
        with connect(signed.socket_url(address), origin=base, additional_headers={"Cookie": f"gs_browser={signed.cookie}"},
                     ssl=context, open_timeout=10) as ws:
            works = exchange(ws, {"type": "hello", "id": "h", "client": "web",
                                  "protocol_version": PROTOCOL_VERSION}, "connected")["type"]
    assert link.startswith(f"{base}/pair#")
    assert answer.status_code == 200 and "; Secure" in answer.headers["set-cookie"]
    assert works == "connected"


def test_behind_a_tls_terminating_proxy_the_page_pairs_and_signs_in_on_its_https_origin(tmp_path, page, auth_config):
    """What nginx sends for a page on https://agent.example (Host, X-Forwarded-Proto:
    https, from 127.0.0.1): believed only from a --trusted-proxy, so the page is on
    its own origin, its cookie is Secure and its WebSocket is admitted."""
    public = "https://agent.example"
    proxied = {"Host": "agent.example", "X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.7"}

    def pair_and_open(address) -> tuple[httpx.Response, int | str]:
        code = pair_link(address, tmp_path, "--token", ALICE).partition("#")[2]
        answer = httpx.post(f"{http_of(address)}/api/pair", content=json.dumps({"code": code}), headers={
            **proxied, "Origin": public, "Content-Type": "application/json"})
        signed = SignedIn.of(answer) if answer.status_code == 200 else SignedIn("none", "none")
        host, port = address.removeprefix("ws://").rsplit(":", 1)
        try:  # the proxy's connection: to the server's port, asking for the public name
            with connect(signed.socket_url("ws://agent.example"),
                         sock=socket.create_connection((host, int(port)), timeout=10),
                         origin=public, open_timeout=10,
                         additional_headers={"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.7",
                                             "Cookie": f"gs_browser={signed.cookie}"}) as ws:
                return answer, exchange(ws, {"type": "hello", "id": "h", "client": "web",
                                             "protocol_version": PROTOCOL_VERSION}, "connected")["type"]
        except InvalidStatus as exc:
            return answer, exc.response.status_code

    with FakeGemini(api_key=API_KEY) as fake:
        with web_server(tmp_path, fake, page, "--auth-config", str(auth_config),
                        "--trusted-proxy", "127.0.0.1") as (_, address):
            trusted_pair, trusted_socket = pair_and_open(address)
        with web_server(tmp_path, fake, page, "--auth-config", str(auth_config)) as (_, address):
            untrusted_pair, untrusted_socket = pair_and_open(address)
    assert trusted_pair.status_code == 200, trusted_pair.text
    assert "Secure" in trusted_pair.headers["set-cookie"]
    assert trusted_socket == "connected"
    # From a peer nobody named a proxy, X-Forwarded-Proto is a client's word: the https page is foreign.
    assert untrusted_pair.status_code == 403 and untrusted_socket == 403
