"""A pairing link as a person gets it: the URL on the origin the client
reached, and its QR code for a terminal (``gemini-split pair``, ``/remote``)."""

from __future__ import annotations

import io
import urllib.parse

from gemini_split.protocol import PairedLink


def link_for(server: str, reply: PairedLink) -> str:
    """The page's pairing link on the origin the client reached
    (``ws://h:p`` → ``http://h:p/pair#CODE``); the code rides in the fragment
    so it never reaches a server log or a Referer."""
    parts = urllib.parse.urlsplit(server)
    scheme = {"ws": "http", "wss": "https", "http": "http", "https": "https"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        return reply.url or f"{reply.path}#{reply.code}"
    netloc = parts.netloc.rpartition("@")[2]  # never a user:password into the link
    return f"{scheme}://{netloc}{reply.path}#{reply.code}"


def qr_text(url: str) -> str:
    """``url`` as a QR code drawn with half blocks for a terminal."""
    # segno: pure Python, no dependencies, terminal rendering built in.
    import segno  # lazy: gemini_split/lazy_imports.py

    buffer = io.StringIO()
    segno.make(url, error="m").terminal(out=buffer, compact=True)
    return buffer.getvalue()
