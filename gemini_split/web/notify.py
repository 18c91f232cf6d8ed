"""``serve --notify-webhook URL``: a short message when an approval waits or
a turn ends, for a phone whose page is closed.

Every such moment is told, whoever is attached (the server cannot tell
whether a browser tab is visible), at most one message per session per
:data:`MIN_INTERVAL` seconds (an approval always beats a turn's end). The
JSON is ntfy-compatible — ``{"topic", "title", "message", "click"}``: a URL
with a one-segment path (``https://ntfy.sh/my-topic``) is posted to its
root with that segment as ``topic``, as ntfy's JSON publishing wants; any
other URL gets the JSON as it is, without ``topic``. Without ``detail`` a
message names the session by id only: no prompt text, no session title
(it is the first prompt), no tool arguments; with it, the tool's name and
what it acts on (the command, or the file or path: never what it would
write) and the session's title, each shortened to one line.

Sending never slows a turn: events go into a bounded queue (dropped when
full) and one task posts them, each bounded by :data:`TIMEOUT`; a failure
is logged once until a post succeeds again.
"""

from __future__ import annotations

import logging
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import trio

from gemini_split.protocol import Finished, ServerEvent, ToolAwaitingApproval

log = logging.getLogger(__name__)

#: Seconds between two messages about one session.
MIN_INTERVAL = 30.0
#: Seconds one post may take.
TIMEOUT = 5.0
#: Messages waiting to be posted; more are dropped.
QUEUE = 64


@dataclass
class Notifier:
    url: str
    detail: bool = False
    #: The page's address for ``click`` links (``http(s)://host:port``), or "".
    base_url: str = ""
    min_interval: float = MIN_INTERVAL
    _last: dict[str, float] = field(default_factory=dict)
    _failing: bool = False

    def __post_init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[dict[str, Any]](QUEUE)
        parts = urllib.parse.urlsplit(self.url)
        segments = [s for s in parts.path.split("/") if s]
        if len(segments) == 1 and not parts.query:
            self.post_url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/", "", ""))
            self.topic: str | None = segments[0]
        else:
            self.post_url, self.topic = self.url, None

    def observe(self, session: Any, events: list[tuple[ServerEvent, str]]) -> None:
        """Events a session logged (called on the server's thread, never
        waits)."""
        for event, _ in events:
            if isinstance(event, ToolAwaitingApproval):
                tool = f" ({event.tool}{_target(event)})" if self.detail else ""
                self._queue(session, "Approval waiting", f"A tool call{tool} waits for your approval", True)
            elif isinstance(event, Finished):
                self._queue(session, "Turn finished", "The agent finished its turn", False)

    def _queue(self, session: Any, title: str, message: str, urgent: bool) -> None:
        now = trio.current_time()
        sid = str(session.id)
        last = self._last.get(sid)
        if last is not None and now - last < self.min_interval and not urgent:
            return
        if last is not None and now - last < self.min_interval / 10:
            return
        self._last[sid] = now
        name = f"session {sid}"
        if self.detail and getattr(session, "title", ""):
            shown = "".join(ch for ch in " ".join(session.title.split()) if ch.isprintable())
            name = f"{shown[:60]} ({sid})"
        payload: dict[str, Any] = {"title": f"gemini-split: {title}", "message": f"{message}: {name}"}
        if self.topic:
            payload["topic"] = self.topic
        if self.base_url:
            payload["click"] = f"{self.base_url}/#session={urllib.parse.quote(sid)}"
        try:
            self._send.send_nowait(payload)
        except trio.WouldBlock:
            log.debug("notification dropped: %d waiting already", QUEUE)

    async def run(self) -> None:
        """Post queued messages until cancelled."""
        import httpx  # lazy: gemini_split/lazy_imports.py

        async with httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False) as http:
            async for payload in self._receive:
                try:
                    with trio.fail_after(TIMEOUT + 1):
                        answer = await http.post(self.post_url, json=payload)
                    answer.raise_for_status()
                except (httpx.HTTPError, trio.TooSlowError) as exc:
                    if not self._failing:
                        # The URL may hold a secret topic: logged by host only.
                        host = urllib.parse.urlsplit(self.url).hostname or "?"
                        why = (f"HTTP {exc.response.status_code}" if isinstance(exc, httpx.HTTPStatusError)
                               else type(exc).__name__)  # httpx's text quotes the URL
                        log.warning("cannot post a notification to %s: %s (said once until one works)", host, why)
                        self._failing = True
                    continue
                if self._failing:
                    log.info("notifications are posted again")
                    self._failing = False


#: Characters of a command or path a detailed message quotes at most.
TARGET_CHARS = 120


def _target(event: ToolAwaitingApproval) -> str:
    """``: <command or path>`` of an approval question (``--notify-detail``),
    one line, bounded; "" when it names neither."""
    params = event.parameters if isinstance(event.parameters, dict) else {}
    target = event.command or params.get("file_path") or params.get("path") or params.get("dir_path") or ""
    if not isinstance(target, str) or not target:
        return ""
    line = " ".join(target.split())  # newlines and control characters: no second line in a phone's banner
    line = "".join(ch for ch in line if ch.isprintable())
    return ": " + (line if len(line) <= TARGET_CHARS else line[:TARGET_CHARS - 1] + "…")
