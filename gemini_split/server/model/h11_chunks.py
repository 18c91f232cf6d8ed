"""h11's chunked-body reader, handing over every whole chunk received at once.

A streamed Gemini answer is a chunked HTTP body with one SSE event per HTTP
chunk. h11 turns each chunk into its own ``Data`` event, and every event
then climbs h11's state machine, httpcore's and httpx's layers one by one:
about 17 µs an event here, most of what a server streaming a fast answer
spends. :class:`MergingChunkedReader` reads the chunks with h11's own
:class:`h11._readers.ChunkedReader` (same parsing, same errors) but keeps
going while the receive buffer holds more, and returns one ``Data`` with
all their bytes: the body is byte for byte the same, in fewer, larger
pieces (each piece then costs what one event did). The body's first chunk
is the exception: it is handed over alone, so a reader gets the answer's
first event without waiting for the rest to be scanned. An end of message or an
error found while merging is held back and reported by the next call, after
the data before it, exactly as h11 would have (tests/server/gemini checks both
readers give the same body, trailers and errors for any split of the input).

What changes for h11's users: a ``Data`` event may span several chunks
(``chunk_start`` is the first's, ``chunk_end`` the last's); h11 documents
chunk boundaries as carrying no meaning, and httpcore ignores them.

:func:`install` puts the reader in h11's reader table (process-wide: h11
offers no per-connection hook, and httpcore builds its h11 connections
itself). :mod:`.gemini` installs it when a server first talks to Gemini.
"""

from __future__ import annotations

import re
from typing import Any

import h11
from h11 import _readers

#: Bytes gathered into one ``Data`` at most (the size of one httpcore read).
MAX_MERGED = 64 * 1024


class MergingChunkedReader(_readers.ChunkedReader):
    """h11's ``ChunkedReader``; a ``Data`` holds every whole chunk buffered."""

    def __init__(self) -> None:
        super().__init__()
        #: An EndOfMessage or an error met while merging: the next call's.
        self._held: Any = None
        #: The body's first chunk has been handed over (alone: see below).
        self._started = False

    def __call__(self, buf: Any) -> h11.Data | h11.EndOfMessage | None:
        held = self._held
        if held is not None:
            self._held = None
            if isinstance(held, BaseException):
                raise held
            return held
        first = super().__call__(buf)
        if not self._started:
            # The body's first chunk goes on alone, before the rest of the
            # buffer is scanned: it carries the answer's first event, what
            # its reader waits for (the time to first delta). A busy server
            # finds whole answers buffered; the rest is read next call.
            self._started = type(first) is h11.Data
            return first
        if type(first) is not h11.Data or self._bytes_in_chunk or not buf:
            return first
        pieces = [first.data]
        size = len(first.data)
        last = first
        while buf and size < MAX_MERGED:
            size += _take_whole_chunks(buf, pieces, MAX_MERGED - size)
            if not buf or size >= MAX_MERGED:
                break
            # What the scan leaves (a partial chunk, the last chunk, a
            # malformed header) is h11's to read.
            try:
                event = super().__call__(buf)
            except h11.ProtocolError as exc:
                self._held = exc
                break
            if type(event) is not h11.Data:
                self._held = event  # None (more data needed) is "nothing held"
                break
            pieces.append(event.data)
            size += len(event.data)
            last = event
            if self._bytes_in_chunk:  # a partial chunk: the buffer is empty
                break
        if len(pieces) == 1:
            return first
        return h11.Data(data=b"".join(pieces), chunk_start=first.chunk_start, chunk_end=last.chunk_end)


def _take_whole_chunks(buf: Any, pieces: list, limit: int) -> int:
    """Move the data of the whole chunks at the start of ``buf`` (each
    ``\\r\\n`` footer of the one before, header, data) into ``pieces``, up
    to about ``limit`` bytes; stop at anything else. Returns the bytes
    taken. The reader is left as after a chunk's data: its footer next.

    One scan and one cut of h11's buffer instead of three extractions and
    an event per chunk (what h11's reader does, and what :meth:`__call__`
    falls back to for the rest). A header taken here is a plain size
    (:data:`_PLAIN_HEADER`, what servers send); one with an extension or
    padding is left to h11's reader."""
    data = buf._data
    pos = taken = 0
    end_of_data = len(data)
    match = _PLAIN_HEADER.match
    while taken < limit:
        header = match(data, pos)
        if header is None:
            break
        size = int(header[1], 16)
        start = header.end()
        if size == 0 or start + size > end_of_data:
            break
        pieces.append(data[start:start + size])
        taken += size
        pos = start + size
    if pos:
        buf._extract(pos)
    return taken


#: The previous chunk's footer and a chunk header that is a size alone (h11's
#: ``chunk_header`` without extension or padding), in one match.
_PLAIN_HEADER = re.compile(rb"\r\n([0-9A-Fa-f]{1,20})\r\n")

_installed = False


def install() -> None:
    """Make h11 read chunked bodies with :class:`MergingChunkedReader`
    (idempotent)."""
    global _installed
    if _installed:
        return
    readers = _readers.READERS[h11.SEND_BODY]
    if readers.get("chunked") is not _readers.ChunkedReader:
        return  # another h11 (or someone else's reader): leave it alone
    readers["chunked"] = MergingChunkedReader
    _installed = True
