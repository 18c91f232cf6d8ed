"""Benchmark: what a browser costs ``serve --web``, against a terminal.

1. **Open**: a session of about 1,000 events (``--turns`` turns of
   ``--chunks`` text deltas from the fake Gemini server); a browser — a
   WebSocket with the paired cookie and the page's Origin, as the page opens
   it — says ``hello`` for that session with ``replay: {limit: 1}`` and the
   time until its last turn's ``finished`` has arrived is measured (the
   server's part of "shows its last turn in ≤ 1 s").
   Then the same in a real browser (headless Debian chromium driven by
   Playwright, when both are installed; ``--no-browser`` skips it): the
   page, signed in with the same cookie, lists the sessions, the session is
   clicked, and the time from the click until the last turn (its prompt,
   answer and end line) is on the screen is the figure, at phone size.
   Both must be ≤ 1 s.
2. **Watch**: ``serve``'s CPU time (utime+stime from /proc) while one
   observer watches ``--prompts`` streamed answers, once as the browser and
   once as a terminal (a token-less loopback WebSocket without Origin, as
   ``attach`` connects); the goal is browser/terminal ≤ 1.1.

    python bench/web.py [--turns 11] [--chunks 100] [--prompts 20] [--rounds 3] [--no-browser] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from websockets.sync.client import connect

from gemini_split.protocol import PROTOCOL_VERSION
from gemini_split.testing.fake_gemini import FakeGemini

GOAL_OPEN_SECONDS = 1.0
GOAL_WATCH_RATIO = 1.1
API_KEY = "bench-key"
CHROMIUM = "/usr/bin/chromium"


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _send(ws, message: dict) -> None:
    ws.send(json.dumps({**message, "timestamp": int(time.time() * 1000)}))


def _until(ws, kind: str, timeout: float = 60) -> dict:
    while True:
        reply = json.loads(ws.recv(timeout=timeout))
        if reply["type"] in (kind, "error"):
            return reply


def _hello(ws, **fields) -> dict:
    _send(ws, {"type": "hello", "id": "h", "client": "bench", "protocol_version": PROTOCOL_VERSION, **fields})
    return _until(ws, "connected")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=11)
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-browser", action="store_true", help="skip the real-browser measurement")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    # Paced, so the deltas are not merged into a few (the outbox coalesces a burst).
    turn = {"text": "word " * args.chunks * 4, "chunks": args.chunks, "chunk_delay": 0.002}
    script = [turn] * (args.turns + 2 * args.prompts * args.rounds + 2)
    with tempfile.TemporaryDirectory() as tmp, FakeGemini(script=script, api_key=API_KEY) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
        env.update(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url)
        serve = subprocess.Popen([sys.executable, "-m", "gemini_split", "serve", "--listen", "127.0.0.1:0", "--web",
                                  "--state-dir", f"{tmp}/state"], cwd=tmp, env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            address = None
            while address is None:
                line = serve.stderr.readline()
                if not line:
                    raise SystemExit("serve did not start")
                found = re.search(r"serving on (ws://\S+)", line)
                address = found.group(1) if found else None
            threading.Thread(target=serve.stderr.read, daemon=True).start()
            base = address.replace("ws://", "http://")
            paired = subprocess.run([sys.executable, "-m", "gemini_split", "pair", "--no-qr", "--server", address],
                                    capture_output=True, text=True, env=env, cwd=tmp, check=True)
            code = paired.stdout.strip().splitlines()[-1].partition("#")[2]
            cookie = httpx.post(f"{base}/api/pair", json={"code": code},
                                headers={"Origin": base}).cookies["gs_browser"]

            def browser():
                return connect(address, origin=base, additional_headers={"Cookie": f"gs_browser={cookie}"})

            # A session of about turns × (chunks + a few) events, driven by a terminal.
            with connect(address) as driver:
                session = _hello(driver)["session_id"]
                for n in range(args.turns):
                    _send(driver, {"type": "generate_content_request", "id": f"r{n}", "prompt": f"turn {n}"})
                    _until(driver, "finished")
                events = _until_state(driver)
            started = time.perf_counter()
            with browser() as page:
                connected = _hello(page, session_id=session, role="observer", replay={"limit": 1})
                assert connected["type"] == "connected", connected
                _until(page, "finished")
            open_seconds = time.perf_counter() - started
            page_seconds = None if args.no_browser else _page_open_seconds(base, cookie, args.turns)

            def watch(make) -> float:
                with connect(address) as driver, make() as watcher:
                    own = _hello(driver)
                    _hello(watcher, session_id=own["session_id"], role="observer")
                    before = _cpu(serve.pid)
                    for n in range(args.prompts):
                        _send(driver, {"type": "generate_content_request", "id": f"w{n}", "prompt": f"w {n}"})
                        _until(driver, "finished")
                        _until(watcher, "finished")
                    return _cpu(serve.pid) - before

            # Interleaved rounds, summed: the machine is shared, one round is noisy.
            terminal = web = 0.0
            for _ in range(args.rounds):
                terminal += watch(lambda: connect(address))
                web += watch(browser)
        finally:
            serve.terminate()
            serve.wait(10)
    result = {"session_events": events, "open_last_turn_seconds": round(open_seconds, 3),
              "page_open_last_turn_seconds": round(page_seconds, 3) if page_seconds is not None else "skipped",
              "serve_cpu_terminal_watcher": round(terminal, 3), "serve_cpu_browser_watcher": round(web, 3),
              "ratio": round(web / terminal, 3) if terminal else None}
    ok = (open_seconds <= GOAL_OPEN_SECONDS and (page_seconds is None or page_seconds <= GOAL_OPEN_SECONDS)
          and (not terminal or web / terminal <= GOAL_WATCH_RATIO))
    if args.json:
        print(json.dumps({**result, "ok": ok}))
    else:
        for key, value in result.items():
            print(f"{key:32} {value}")
        print("within the goals" if ok else "OUTSIDE the goals (≤ 1 s; ≤ 1.1×)")
    return 0 if ok else 1


def _page_open_seconds(base: str, cookie: str, turns: int) -> float | None:
    """Seconds from clicking the session in the page's list until its last
    turn's end line shows, in headless chromium; None when chromium or
    Playwright is not installed (said on stderr)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("page: skipped (playwright is not installed: pip install -e '.[test]')", file=sys.stderr)
        return None
    if not os.path.exists(CHROMIUM):
        print(f"page: skipped (no {CHROMIUM}: apt-get install chromium)", file=sys.stderr)
        return None
    host = base.split("//", 1)[1].rsplit(":", 1)[0]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            context = browser.new_context(viewport={"width": 390, "height": 844})
            context.add_cookies([{"name": "gs_browser", "value": cookie, "domain": host, "path": "/",
                                  "httpOnly": True, "sameSite": "Strict"}])
            page = context.new_page()
            page.set_default_timeout(30000)
            page.goto(f"{base}/")
            item = page.locator(".session-open", has_text="turn 0")
            item.first.wait_for()
            started = time.perf_counter()
            item.first.click()
            last = page.locator(".turn", has_text=f"turn {turns - 1}")
            last.locator(":scope > .end").wait_for()
            seconds = time.perf_counter() - started
            if "word" not in last.inner_text():
                raise SystemExit("page: the last turn shows without its answer")
            return seconds
        finally:
            browser.close()


def _until_state(ws) -> int:
    """The session's last event number (``get_state``)."""
    _send(ws, {"type": "get_state", "id": "st"})
    return int(_until(ws, "state").get("last_seq", 0))


if __name__ == "__main__":
    sys.exit(main())
