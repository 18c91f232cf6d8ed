"""The ``unix:`` transport: protocol messages as JSON lines over a Unix
domain socket, for the per-user local daemon (``GEMINI_SERVER_MODE=local``).

Addresses
---------

``unix:/PATH/TO/SOCKET`` (an absolute path; ``unix://PATH`` is read the same).

Who gets in
-----------

Only the user the server runs as. Each accepted connection's peer
credentials (``SO_PEERCRED``: the connecting process's uid, set by the
kernel, not by the peer) are checked against the server's effective uid; a
connection from any other uid gets one fatal ``error`` line (code
``unauthorized``) and is closed, before the handler ever sees it. No token
is needed, and the stream is marked :attr:`MessageStream.same_user`, which
is what lets a ``hello`` hand the server the caller's own settings (see
``docs/protocol.md``, *hello.caller*). ``ServeOptions.extra["allowed_uids"]``
adds uids (root's tools; tests).

The client checks the server the same way: a socket whose listener runs as
another uid (someone else's socket at a path we were given) is refused with
:class:`ConnectFailed` before a byte is sent.

The socket file is created ``0600`` in a directory that must be the
server's own and closed to others (``0700``), so nobody else can even reach
it. A socket file left by a server that died (nobody accepts on it) is
removed and replaced; one that a live server still accepts on is not touched
(``serve`` fails with :class:`TransportError`). The listener removes its
socket file when it stops, unless another server has replaced it meanwhile.

Framing
-------

The stdio transport's JSON lines (:mod:`gemini_split.transport.framing`): one message
per ``\\n``-terminated line, any text round-trips exactly, and a line over
``max_message_size`` bytes is dropped as it arrives and raises
:class:`MessageTooLarge` while the stream goes on working.

Linux (``SO_PEERCRED``) only.
"""

from __future__ import annotations

from ._transport import UnixStream, UnixTransport, peer_uid, socket_path

__all__ = ["UnixStream", "UnixTransport", "peer_uid", "socket_path", "transport"]

transport = UnixTransport()
