"""The stdio transport: addresses, spawning a command, taking over stdio."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from typing import Any

import trio

from gemini_split.transport import (
    ConnectFailed,
    ConnectionHandler,
    ConnectOptions,
    MessageStream,
    ServeOptions,
    Transport,
    TransportError,
    run_handler,
)

from ._streams import CommandStream, StdioServerStream

#: The address ``serve`` reports: this process's own stdin and stdout.
SERVE_ADDRESS = "stdio:-"


def parse_command(address: str) -> list[str]:
    """The argv of ``stdio:COMMAND ARGS…``, split the way a POSIX shell
    splits words (quotes and backslashes), with no shell involved: no
    variables, globs, pipes or redirections."""
    _, _, command = address.partition(":")
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ConnectFailed(f"cannot read the command in {address!r}: {exc}") from None
    if not argv or argv == ["-"]:
        raise ConnectFailed(
            f"{address!r} names no command to run; "
            "e.g. stdio:ssh box gemini-split serve --stdio"
        )
    return argv


class StdioTransport(Transport):
    """``stdio:COMMAND ARGS…`` to connect, ``stdio:`` or ``stdio:-`` to serve.

    See the package docstring for the framing and the options it reads.
    """

    name = "stdio"

    async def open_connection(self, address: str, options: ConnectOptions) -> MessageStream:
        """Spawn the command and return a :class:`CommandStream` over its pipes.

        Raises :class:`ConnectFailed` at once if the command cannot start (not
        found, not executable). One that starts and then dies is found out on
        first use: see :class:`CommandStream`.
        """
        _require_posix()
        argv = parse_command(address)
        extra = options.extra
        try:
            process = await trio.lowlevel.open_process(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                # Its own session and process group: our terminal's Ctrl-C is
                # ours to handle, and aclose can end everything it started.
                start_new_session=True,
                cwd=extra.get("cwd"),
                env=extra.get("env"),
            )
        except OSError as exc:
            raise ConnectFailed(_cannot_start(argv[0], exc, extra.get("cwd"))) from exc
        return CommandStream(
            process,
            argv[0],
            max_message_size=options.max_message_size,
            show_stderr=bool(extra.get("show_stderr")),
            close_grace=float(extra.get("close_grace", 1.5)),
        )

    async def serve(
        self,
        address: str,
        handler: ConnectionHandler,
        options: ServeOptions,
        *,
        task_status: Any = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run ``handler`` for the one connection this process's stdin and
        stdout carry, and **return when it ends** (unlike other transports,
        which serve until cancelled): the session is over when stdin closes.

        Calls ``task_status.started("stdio:-")`` before running the handler.

        Resource handling: from the call on, for the rest of the process's
        life, fd 0 reads ``/dev/null`` and fd 1 is a copy of fd 2, so a stray
        ``print``, a library's output or a child process can neither corrupt
        the protocol on stdout nor steal its input. Only the stream's private
        copies of the original fds carry protocol, and closing the stream
        closes them, which the client sees as end of file.

        Error handling: a second call in the same process raises
        :class:`TransportError`; so does an address other than ``stdio:`` or
        ``stdio:-``. The handler's failures are logged by
        :func:`~gemini_split.transport.run_handler`, never raised.
        """
        _require_posix()
        _, _, rest = address.partition(":")
        if rest.strip() not in ("", "-"):
            raise TransportError(
                f"the stdio transport serves only this process's own stdin and "
                f"stdout ('stdio:' or 'stdio:-'), not {address!r}"
            )
        protocol_in, protocol_out = _take_over_stdio()
        stream = StdioServerStream(
            trio.lowlevel.FdStream(protocol_in),
            trio.lowlevel.FdStream(protocol_out),
            max_message_size=options.max_message_size,
            peer="stdio client",
        )
        task_status.started(SERVE_ADDRESS)
        await run_handler(handler, stream)


_stdio_taken = False


def _take_over_stdio() -> tuple[int, int]:
    """Private copies of fds 0 and 1 for the protocol; fd 0 then reads
    /dev/null and fd 1 writes to stderr. Once per process."""
    global _stdio_taken
    if _stdio_taken:
        raise TransportError("this process's stdin and stdout already carry a connection")
    try:
        protocol_in = os.dup(0)
        protocol_out = os.dup(1)
    except OSError as exc:
        raise TransportError(f"stdin or stdout is not open: {exc}") from exc
    null = os.open(os.devnull, os.O_RDWR)
    try:
        os.dup2(null, 0)
        try:
            os.dup2(2, 1)
        except OSError:  # no stderr either: stray output goes nowhere
            os.dup2(null, 1)
    finally:
        os.close(null)
    _stdio_taken = True
    return protocol_in, protocol_out


def _cannot_start(program: str, exc: OSError, cwd: str | None) -> str:
    if isinstance(exc, FileNotFoundError):
        if cwd is not None and not os.path.isdir(cwd):
            return f"cannot start {program!r}: its working directory {cwd!r} does not exist"
        return f"cannot start {program!r}: command not found (is it installed and on PATH?)"
    if isinstance(exc, PermissionError):
        return f"cannot start {program!r}: permission denied (is it executable?)"
    return f"cannot start {program!r}: {exc.strerror or exc}"


def _require_posix() -> None:
    if sys.platform == "win32":
        raise TransportError("the stdio transport needs a POSIX system (Linux, macOS)")
