"""The browser page (gemini_split/web/static/) in a real browser: headless
Debian chromium driven by Playwright, against a real ``gemini-split serve``
subprocess and the fake Gemini server.

The page comes from ``serve --web`` (docs/web.md), and the browser signs
in through the link ``gemini-split pair`` prints."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("GEMINI_SPLIT_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts")) / "web"
API_KEY = "web-key"
TOKENS = {"alice-web-token-0123456789": "alice", "bob-web-token-0123456789": "bob"}

if not os.path.exists(CHROMIUM):
    pytest.skip(f"the browser tests need Debian's chromium at {CHROMIUM} (apt-get install chromium)",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the browser tests need playwright (the [test] extra)")


def env(home: Path, **extra) -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    e.update(HOME=str(home), XDG_STATE_HOME=str(home / ".state"), XDG_CONFIG_HOME=str(home / ".config"),
             XDG_DATA_HOME=str(home / ".data"), **extra)
    return e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A ``gemini-split serve`` on a fixed loopback port (so it can be
    restarted where the browser reconnects)."""

    def __init__(self, tmp_path: Path, fake: FakeGemini, *args: str):
        self.home = tmp_path / "home"
        self.home.mkdir(exist_ok=True)
        self.workspaces = tmp_path / "workspaces"
        self.workspaces.mkdir(exist_ok=True)
        self.auth = tmp_path / "auth.json"
        self.auth.write_text(json.dumps({"tokens": {t: {"userId": u, "permissions": ["chat"]} for t, u in TOKENS.items()}}))
        self.fake = fake
        self.args = args
        self.port = free_port()
        self.address = f"ws://127.0.0.1:{self.port}"
        self.origin = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self) -> None:
        extra = ["--web"]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gemini_split", "serve", "--listen", f"127.0.0.1:{self.port}", "--server-tools",
             "--workspace-root", str(self.workspaces), "--auth-config", str(self.auth), *extra, *self.args],
            cwd=self.home, env=env(self.home, GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=self.fake.url),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            if re.search(r"serving on ", line):
                # Keep reading stderr so the server never blocks on a full pipe.
                import threading
                threading.Thread(target=self.proc.stderr.read, daemon=True).start()
                return
        raise AssertionError(f"serve did not start: {self.proc.stderr.read() if self.proc.poll() is not None else ''}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def cli(self, *args: str, user: str = "alice", timeout: float = 60, **env_extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gemini_split", "--server", self.address,
                               "--token", token_of(user), *args],
                              cwd=self.home, env=env(self.home, **env_extra), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)

    def popen(self, *args: str, user: str = "alice") -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "gemini_split", "--server", self.address,
                                 "--token", token_of(user), *args],
                                cwd=self.home, env=env(self.home), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def token_of(user: str) -> str:
    return next(t for t, u in TOKENS.items() if u == user)


@pytest.fixture
def fake():
    with FakeGemini(api_key=API_KEY) as f:
        yield f


@contextmanager
def running_server(tmp_path, fake, *args):
    server = Server(tmp_path, fake, *args)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(tmp_path, fake):
    with running_server(tmp_path, fake) as s:
        yield s


@pytest.fixture(scope="session")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        yield b
        b.close()


class Watch:
    """What a page did that it must not: dialogs, requests to other hosts,
    console errors (CSP violations among them)."""

    def __init__(self, page, origin: str):
        self.dialogs: list[str] = []
        self.foreign: list[str] = []
        self.console_errors: list[str] = []
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        ws_origin = origin.replace("http", "ws", 1)
        page.on("request", lambda r: None if r.url.startswith((origin, ws_origin, "data:"))
                else self.foreign.append(r.url))
        page.on("console", lambda m: self.console_errors.append(m.text) if m.type == "error" else None)


def signed_in_page(browser, server: Server, *, width: int = 1280, height: int = 800, color_scheme: str = "light",
                   user: str = "alice", init_script: str | None = None, **options):
    """A new browser context (``options``: more of its options) signed in
    to ``server`` as ``user`` and its page at ``/``, ``init_script`` run in
    every page first; returns ``(context, page, watch)``."""
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=color_scheme, **options)
    if init_script:
        context.add_init_script(init_script)
    page = context.new_page()
    page.set_default_timeout(15000)
    watch = Watch(page, server.origin)
    page.goto(pair_link(server, user))
    page.wait_for_url(f"{server.origin}/")
    return context, page, watch


def pair_link(server: Server, user: str = "alice") -> str:
    result = server.cli("pair", user=user)
    match = re.search(r"https?://\S+/pair#\S+", result.stdout + result.stderr)
    assert match, f"no pairing link in: {result.stdout!r} {result.stderr!r}"
    return match.group(0)


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path
