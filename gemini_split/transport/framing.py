"""JSON-lines framing, sans-IO: messages to lines and lines back to messages.

No trio here, no file descriptors: bytes in, lines out, so the rules are
tested without an event loop.

The rule (the stdio plugin's docstring says why; the ``unix:`` plugin uses it too),
and :class:`LineWriter`, which both use to write whole lines:

* A message that is not empty, does not start with ``"`` and contains no
  ``\\n`` or ``\\r`` goes on the wire **as is**, followed by ``\\n``. Every
  protocol message is a compact JSON object, so the protocol always travels
  this way: one JSON object per line, readable and typeable by a person.
* Any other text (empty, multi-line, starting with a quote, or not encodable
  as UTF-8) goes as a JSON *string literal* on one line: ``"line one\\nline
  two"``. A line that starts with ``"`` and parses as a JSON string is
  decoded back to that string; so every text round-trips exactly.
* Reading tolerates a ``\\r\\n`` line end and skips empty lines.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import msgspec


def encode_line(message: str) -> bytes:
    """The line (with its ``\\n``) that carries ``message``."""
    if message and message[0] != '"' and "\n" not in message and "\r" not in message:
        try:
            return message.encode("utf-8") + b"\n"
        except UnicodeEncodeError:  # a lone surrogate: escape it below
            pass
    import json  # here: the usual message needs no quoting (json costs ~1.5 ms to import)

    try:
        return json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(message).encode("ascii") + b"\n"


def decode_line(line: bytes) -> str | None:
    """The message a line (without its ``\\n``) carries, or None for an empty
    line, which carries nothing.

    Bytes that are not UTF-8 are replaced (U+FFFD), so whatever a misbehaving
    peer printed still reaches the layer above as text it can show. A line
    that starts with ``"`` but is not a JSON string is delivered as is, for the
    protocol layer to reject.
    """
    if line.endswith(b"\r"):
        line = line[:-1]
    if not line:
        return None
    text = line.decode("utf-8", errors="replace")
    if text[0] == '"':
        import json  # here: a quoted line is rare (json costs ~1.5 ms to import)

        try:
            value = json.loads(text)
        except ValueError:
            return text
        if isinstance(value, str):
            return value
    return text


class LineTooLong(msgspec.Struct, frozen=True):
    """A line went over the limit; its bytes are being (or were) discarded.

    ``size`` is the line's length when known (it ended within the data
    already seen), else None: at least ``limit + 1``.
    """

    limit: int
    size: int | None = None

    def describe(self) -> str:
        size = f"{self.size} bytes" if self.size is not None else f"more than {self.limit} bytes"
        return f"a line of {size} is over the limit of {self.limit} bytes; it was discarded"


class LineSplitter:
    """Splits a byte stream into lines of at most ``max_line`` bytes.

    ``feed`` data, then call ``next_line`` until it returns None. A line over
    the limit yields one :class:`LineTooLong` as soon as the limit is crossed;
    the rest of that line is dropped as it arrives, so the buffer never holds
    much more than ``max_line`` plus one chunk.
    """

    def __init__(self, max_line: int):
        self.max_line = max_line
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no newline
        self._discarding = False

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def next_line(self) -> bytes | LineTooLong | None:
        """The next complete line (without ``\\n``), a :class:`LineTooLong`,
        or None when more data is needed."""
        if self._discarding:
            end = self._buffer.find(b"\n")
            if end < 0:
                self._buffer.clear()
                return None
            del self._buffer[: end + 1]
            self._discarding = False
            self._scanned = 0
        end = self._buffer.find(b"\n", self._scanned)
        if end >= 0:
            self._scanned = 0
            if end > self.max_line:
                del self._buffer[: end + 1]
                return LineTooLong(self.max_line, end)
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            return line
        if len(self._buffer) > self.max_line:
            self._buffer.clear()
            self._scanned = 0
            self._discarding = True
            return LineTooLong(self.max_line)
        self._scanned = len(self._buffer)
        return None

    def unterminated(self) -> bytes:
        """What is left that no newline ended (at end of input, a torn line
        that is not delivered as a message)."""
        return b"" if self._discarding else bytes(self._buffer)


class LineWriter:
    """Writes whole lines to a non-blocking file descriptor or socket, so
    that a cancelled send never leaves half a line on the wire.

    ``write(data) -> int`` writes what the kernel takes now (raising
    ``BlockingIOError`` when it takes nothing); ``wait_writable()`` waits
    until it may take more. A line cancelled before its first byte went out
    is dropped, as if never sent; one cancelled after that is finished first
    by the next :meth:`write_line`, so the peer always reads whole lines.
    ``OSError`` from ``write`` (other than ``BlockingIOError``) drops the rest
    of the line and propagates; every other exception propagates as is."""

    def __init__(self, write: Callable[[memoryview], int], wait_writable: Callable[[], Awaitable[None]]):
        self._write = write
        self._wait_writable = wait_writable
        self._unsent: memoryview | None = None
        self._started = False

    async def write_line(self, line: bytes) -> None:
        if self._unsent is not None:
            await self._flush()  # the rest of a line a cancelled send began
        self._unsent = memoryview(line)
        self._started = False
        try:
            await self._flush()
        except BaseException:
            if not self._started:
                self._unsent = None  # not a byte went out: as if never sent
            raise

    async def _flush(self) -> None:
        while self._unsent:
            try:
                written = self._write(self._unsent)
            except BlockingIOError:
                await self._wait_writable()
                continue
            except OSError:
                self._unsent = None
                raise
            self._unsent = self._unsent[written:]
            self._started = True
        self._unsent = None
