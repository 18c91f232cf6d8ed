"""The stdio transport: protocol messages as JSON lines over a pipe.

Anything that can run a command and carry its stdin and stdout becomes a way
to reach a server, most usefully ssh, which needs no open port, no TLS and no
token of our own::

    gemini-split --server 'stdio:ssh box gemini-split serve --stdio'

Addresses
---------

``stdio:COMMAND ARGS…`` (connect)
    Spawn the command, split like a POSIX shell splits words but with no
    shell, in its own session and process group, and talk over its stdin and
    stdout. Every ``open_connection`` spawns its own process. The command runs
    without a controlling terminal, so it must not prompt (for ssh: keys or an
    agent, ideally ``-o BatchMode=yes``).

``stdio:`` or ``stdio:-`` (serve)
    This process's own stdin and stdout: exactly one connection. ``serve``
    returns when it ends instead of serving forever — the session is over
    when stdin closes.

Framing
-------

One message per line, ``\\n``-terminated, UTF-8. Every protocol message is a
compact JSON object and goes on the wire **as is**, so the wire is plain
JSON lines that a person or another implementation can read and type.

The transport still carries *any* text exactly, as the interface promises:
text that could not travel as a bare line (empty, containing ``\\n`` or
``\\r``, starting with ``"``, or not encodable as UTF-8) travels as a JSON
string literal on one line, and a line that is a JSON string literal is
decoded back. Every line is thus one JSON value. The protocol never needs
the escape; it exists for arbitrary text (the conformance suite sends
multi-line messages) and costs protocol messages nothing. Readers accept
``\\r\\n`` line ends and skip empty lines.

The size limit applies to the line as it travels, in bytes (without the
``\\n``). A longer line is dropped as it arrives, never buffered whole, and
``receive`` raises :class:`MessageTooLarge` — after which, **unlike**
WebSocket and the :class:`MessageStream` default, the stream goes on working:
the line was skipped and the next one is intact, so the protocol layer can
answer with an ``error`` and carry on. Bytes that are not UTF-8 are replaced
with U+FFFD; a line that is not JSON is delivered as is, for the protocol
layer to reject.

Connect options read from ``ConnectOptions.extra``
--------------------------------------------------

``show_stderr`` (bool)
    Copy the command's stderr to ours as it arrives. Either way its last
    4 KiB are kept: :meth:`CommandStream.stderr_tail`.
``cwd`` (str), ``env`` (mapping)
    The command's working directory and complete environment (default: ours).
``close_grace`` (float, default 1.5)
    Seconds ``aclose`` waits for the command to exit after closing its
    stdin, and again after SIGTERM, before SIGKILL.

Errors
------

A command that cannot start raises :class:`ConnectFailed` from
``open_connection``. A command that exits is found out on first use:
:class:`CommandFailed` (a :class:`ConnectFailed` *and* a
:class:`ConnectionBroken`) if it had not sent a line yet, else
:class:`CommandExited` (a :class:`ConnectionBroken`); both messages give the
exit status and the tail of its stderr.

POSIX only. The transport authenticates nobody (``principal`` is None): ssh
did that, and ``serve`` ignores ``ServeOptions.authenticate``. Serving puts
stdin and stdout in non-blocking mode while the connection lasts; when they
are a terminal (a person typing), stderr shares that mode.
"""

from __future__ import annotations

from ._framing import decode_line, encode_line
from ._streams import (
    STDERR_TAIL_BYTES,
    CommandExited,
    CommandFailed,
    CommandStream,
    StdioServerStream,
)
from ._transport import SERVE_ADDRESS, StdioTransport, parse_command

__all__ = [
    "STDERR_TAIL_BYTES",
    "SERVE_ADDRESS",
    "CommandExited",
    "CommandFailed",
    "CommandStream",
    "StdioServerStream",
    "StdioTransport",
    "decode_line",
    "encode_line",
    "parse_command",
    "transport",
]

transport = StdioTransport()
