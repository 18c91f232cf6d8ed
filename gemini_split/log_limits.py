"""Bounds on what a peer can make the log say (issue 13 §4).

Two logging filters, put on the handler that writes the program's log
(:func:`limit_log_handler`):

:class:`BoundedLines`
    Every message is one line of at most ``MAX_MESSAGE_CHARS`` characters:
    control characters (newlines included) are shown escaped, so a client's
    text cannot forge log lines or move a terminal's cursor, and a longer
    message is cut with a note of how much was left out. Tracebacks (our own
    bugs) are left alone.

:class:`RefusalDigest`
    Log calls that refuse a peer mark themselves with
    ``extra={"refusal": KIND}`` (KIND: ``"HTTP 401"``, ``"bad message"``…).
    Of each kind, at most ``burst`` lines are written per ``window``
    seconds; the rest are counted, and the next line the handler writes after
    the window is preceded by one summary: ``… 9,812 more refused (HTTP 401)
    in the last 60 s``. So 10,000 wrong tokens write a handful of lines,
    and the operator still sees that they happened.

:class:`LibraryRecords`
    Records of other libraries' loggers (trio, grpc, h11, …: anything not
    ``gemini_split*``) are held to the same bounds, since what a peer sends
    can make a library log too (grpcio logs every message it cannot
    deserialize, with its traceback): their exception becomes part of the
    one line (type and message, no traceback), and those at WARNING or above
    are rate-limited like refusals, per logger and exception type.
"""

from __future__ import annotations

import logging
import re

#: Longest message kept whole (characters); the rest is cut.
MAX_MESSAGE_CHARS = 2000

# Patterns here are compiled on first use (re's own cache), not at import:
# a one-shot run that never needs them does not pay ~0.1-0.4 ms each.
_CONTROL = r"[\x00-\x1f\x7f-\x9f\u2028\u2029]"


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char, f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def one_bounded_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` as one printable line of at most about ``limit`` characters."""
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(text) - limit:,} more characters)"
    return re.sub(_CONTROL, _escape, text)


class BoundedLines(logging.Filter):
    """Makes every record's message one bounded line (see the module doc)."""

    def __init__(self, limit: int = MAX_MESSAGE_CHARS):
        super().__init__()
        self.limit = limit

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: let logging report it
            return True
        bounded = one_bounded_line(message, self.limit)
        if bounded != message:
            record.msg, record.args = bounded, None
        return True


class RefusalDigest(logging.Filter):
    """Rate-limits records marked ``refusal`` per kind, writing a summary of
    what it held back through ``handler`` (see the module doc)."""

    def __init__(self, handler: logging.Handler, *, burst: int = 5, window: float = 60.0):
        super().__init__()
        self.handler = handler
        self.burst = burst
        self.window = window
        #: kind -> [window start, lines written, lines held back]
        self._kinds: dict[str, list[float]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        now = record.created
        self._summarise_finished_windows(now, record)
        kind = getattr(record, "refusal", None)
        if kind is None:
            return True
        state = self._kinds.setdefault(str(kind), [now, 0, 0])
        if state[1] < self.burst:
            state[1] += 1
            return True
        state[2] += 1
        return False

    def _summarise_finished_windows(self, now: float, record: logging.LogRecord) -> None:
        finished = [(kind, state) for kind, state in self._kinds.items() if now - state[0] >= self.window]
        for kind, _ in finished:
            del self._kinds[kind]
        for kind, (start, _, held) in finished:
            if held:
                summary = logging.LogRecord(
                    record.name, logging.WARNING, __file__, 0,
                    "… %s more refused (%s) in the last %d s", (f"{int(held):,}", kind, round(now - start)), None,
                )
                summary.created = now
                self.handler.handle(summary)  # filters run again: no refusal mark, so it passes


class LibraryRecords(logging.Filter):
    """Bounds records of loggers that are not this program's (see the module
    doc). Runs before :class:`RefusalDigest`, which then limits them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "gemini_split" or record.name.startswith(("gemini_split.", "gemini_split_")):
            return True
        exc = record.exc_info[1] if record.exc_info else None
        if record.exc_info or record.stack_info:
            try:
                message = record.getMessage()
            except Exception:  # a broken format string: let logging report it
                return True
            if exc is not None:
                message = f"{message} ({type(exc).__name__}: {exc})" if str(exc) else f"{message} ({type(exc).__name__})"
            record.msg, record.args = message, None
            record.exc_info = record.exc_text = record.stack_info = None
        if record.levelno >= logging.WARNING and getattr(record, "refusal", None) is None:
            record.refusal = f"{record.name}" + (f" {type(exc).__name__}" if exc is not None else "")
        return True


def limit_log_handler(handler: logging.Handler) -> None:
    """Put the filters on ``handler`` (once)."""
    if any(isinstance(f, RefusalDigest) for f in handler.filters):
        return
    handler.addFilter(LibraryRecords())
    handler.addFilter(RefusalDigest(handler))
    handler.addFilter(BoundedLines())
