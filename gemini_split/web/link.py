"""A pairing link as a person gets it: the URL on the origin the client
reached, and its QR code for a terminal (``gemini-split pair``, ``/remote``)."""

from __future__ import annotations

import io
import ipaddress
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


def loopback_note(url: str) -> str | None:
    """What to say when ``url`` is on a loopback address (``127.0.0.1``,
    ``::1``, ``localhost``): only a browser on this same machine can open
    it, so a phone or another computer cannot pair through it. None for
    any other address."""
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        loopback = host == "localhost" or host.endswith(".localhost") or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        return None
    return (f"Note: {host} is a loopback address: this link opens only in a browser on this machine; "
            "a phone or another computer cannot reach it. To pair one, serve on an address it can reach, "
            "with TLS (serve --web --listen 0.0.0.0:8443 --tls-cert … --tls-key …), or through a tunnel: "
            "see \"Pairing a phone\" in the README.")
