"""The two ends of a stdio connection: a spawned command's pipes (client) and
this process's own stdin/stdout (server)."""

from __future__ import annotations

from abc import abstractmethod

import errno
import logging
import os
import signal
import sys

import trio

from gemini_split.transport import (
    ConnectFailed,
    ConnectionBroken,
    ConnectionClosed,
    MessageStream,
    MessageTooLarge,
)

from ._framing import LineSplitter, LineTooLong, LineWriter, decode_line, encode_line

log = logging.getLogger("gemini_split_stdio")

_CHUNK = 65536

#: How much of a command's stderr a :class:`CommandStream` keeps.
STDERR_TAIL_BYTES = 4096

# Once a command's stdout has ended it is normally exiting; this long is
# allowed for its exit status (and the last of its stderr) to come in.
_EXIT_STATUS_GRACE = 2.0
_STDERR_GRACE = 0.2


# --- errors ---------------------------------------------------------------------


class CommandExited(ConnectionBroken):
    """The spawned command ended the connection: it exited, or closed its
    end of a pipe. The message says how and ends with the tail of its stderr.

    ``returncode`` is its exit status (negative: killed by that signal), or
    None if it is still running; ``stderr_tail`` the last few KiB of its
    stderr, as text.
    """

    def __init__(self, reason: str, *, returncode: int | None, stderr_tail: str):
        super().__init__(reason)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class CommandFailed(ConnectFailed, CommandExited):
    """The spawned command ended before it sent a single line: the connection
    never really opened (a wrong host, a program missing on the far side, a
    refused login).

    It is a :class:`ConnectFailed`, what a caller opening a connection
    expects, and a :class:`ConnectionBroken`, what a caller reading expects,
    since a spawned command can only be found dead on first use.
    """


# --- the line stream both ends share ----------------------------------------------


class _LineStream(MessageStream):
    """Messages as lines over a pair of Trio fd streams.

    ``send`` writes under a lock and waits for the pipe (back-pressure, no
    buffering of our own). A send cancelled part-way through a line leaves
    the rest to be written first by the next send, so the peer never sees a
    torn line; one cancelled before any byte went out sends nothing.
    """

    # Pipes to a process on this machine; what that process does with the
    # bytes (ssh encrypts them) is the user's choice of command.
    private = True

    def __init__(
        self,
        reader: trio.lowlevel.FdStream,
        writer: trio.lowlevel.FdStream,
        *,
        max_message_size: int,
        peer: str,
    ):
        self.peer = peer
        self._reader = reader
        self._writer = writer
        self._lines = LineSplitter(max_message_size)
        self._send_lock = trio.Lock()
        self._lines_out = LineWriter(self._write, lambda: trio.lowlevel.wait_writable(self._writer.fileno()))
        self._closed = False
        self._input_error: ConnectionBroken | None = None
        self._output_error: ConnectionBroken | None = None
        self._lines_received = 0

    # -- receiving

    async def receive(self) -> str:
        """The next message.

        Raises :class:`MessageTooLarge` for a line over the limit, which is
        discarded; unlike on WebSocket the stream goes on working after it.
        Raises :class:`ConnectionBroken` once the input has ended, and
        :class:`ConnectionClosed` after :meth:`aclose`.
        """
        await trio.lowlevel.checkpoint()
        while True:
            if self._closed:
                raise ConnectionClosed("connection closed")
            if self._input_error is not None:
                raise self._input_error
            item = self._lines.next_line()
            if item is None:
                await self._read_more()
                continue
            self._lines_received += 1
            if isinstance(item, LineTooLong):
                raise MessageTooLarge(item.describe())
            message = decode_line(item)
            if message is not None:
                return message

    async def _read_more(self) -> None:
        try:
            data = await self._reader.receive_some(_CHUNK)
        except trio.ClosedResourceError:
            raise ConnectionClosed("connection closed") from None
        except trio.BrokenResourceError:
            data = b""
        if data:
            self._lines.feed(data)
            return
        self._input_error = await self._input_ended(self._lines.unterminated())
        raise self._input_error

    # -- sending

    async def send(self, message: str) -> None:
        line = encode_line(message)
        async with self._send_lock:
            if self._closed:
                raise ConnectionClosed("connection closed")
            if self._output_error is not None:
                raise self._output_error
            try:
                await self._lines_out.write_line(line)
            except trio.ClosedResourceError:
                raise ConnectionClosed("connection closed") from None
            except OSError as exc:
                if exc.errno == errno.EBADF:
                    raise ConnectionClosed("connection closed") from None
                self._output_error = await self._output_broken()
                raise self._output_error from exc

    def _write(self, data: memoryview) -> int:
        fd = self._writer.fileno()
        if fd < 0:
            raise trio.ClosedResourceError
        return os.write(fd, data)

    # -- closing

    async def aclose(self, reason: str = "closed") -> None:
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        self._closed = True
        await self._shutdown()

    # -- what each end does differently

    @abstractmethod
    async def _input_ended(self, unterminated: bytes) -> ConnectionBroken: ...

    @abstractmethod
    async def _output_broken(self) -> ConnectionBroken: ...

    @abstractmethod
    async def _shutdown(self) -> None: ...


def _preview(data: bytes, limit: int = 200) -> str:
    text = data[:limit].decode("utf-8", errors="replace")
    return repr(text) + ("…" if len(data) > limit else "")


# --- the server end: this process's stdin and stdout --------------------------------


class StdioServerStream(_LineStream):
    """The connection a ``serve("stdio:-")`` handler gets: lines in on
    stdin, lines out on stdout. It ends when stdin does."""

    async def _input_ended(self, unterminated: bytes) -> ConnectionBroken:
        if unterminated:
            return ConnectionBroken(
                f"stdin closed after an unfinished line {_preview(unterminated)}"
            )
        return ConnectionBroken("stdin closed")

    async def _output_broken(self) -> ConnectionBroken:
        return ConnectionBroken("stdout closed: the client stopped reading")

    async def _shutdown(self) -> None:
        # Closing our copy of fd 1 is what gives the client end-of-file.
        self._writer.close()
        self._reader.close()
        await trio.lowlevel.checkpoint()


# --- the client end: a spawned command ---------------------------------------------


class CommandStream(_LineStream):
    """A connection to a spawned command, over its stdin and stdout.

    Extras beyond :class:`MessageStream`:

    * :meth:`stderr_tail` – the last few KiB the command wrote to stderr, to
      show when it misbehaves (prints garbage, never answers the handshake).
    * :attr:`pid` and :attr:`returncode` of the command.

    Resource handling: the command runs in its own session and process group.
    ``aclose`` closes its stdin and stdout and waits ``close_grace`` seconds
    for it to exit, then sends SIGTERM to the group and waits as long again,
    then SIGKILLs whatever is left of the group (stragglers too, even when the
    command itself exited) and reaps the command. It is shielded from
    cancellation, so the command is never left running.

    Error handling: when the command's stdout ends or its stdin breaks,
    ``receive``/``send`` raise :class:`CommandExited` (a
    :class:`ConnectionBroken`) whose message gives the exit status and the
    tail of stderr; :class:`CommandFailed` (also a :class:`ConnectFailed`) if
    it had not sent a line yet.
    """

    def __init__(
        self,
        process: trio.Process,
        command: str,
        *,
        max_message_size: int,
        show_stderr: bool = False,
        close_grace: float = 1.5,
    ):
        assert process.stdin is not None and process.stdout is not None
        assert process.stderr is not None
        super().__init__(
            process.stdout,  # type: ignore[arg-type]
            process.stdin,  # type: ignore[arg-type]
            max_message_size=max_message_size,
            peer=f"stdio:{command} (pid {process.pid})",
        )
        self._process = process
        self._command = command
        self._close_grace = close_grace
        self._stderr = _StderrTail(STDERR_TAIL_BYTES, forward=show_stderr)
        # A stream has no nursery of its own; stderr must be drained even when
        # nobody is receiving, or a chatty command would block on it.
        trio.lowlevel.spawn_system_task(
            self._stderr.drain, process.stderr, name=f"stderr of {self.peer}"
        )

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        """The command's exit status once it has been reaped, else None."""
        return self._process.returncode

    def stderr_tail(self) -> str:
        """The last :data:`STDERR_TAIL_BYTES` of the command's stderr so far,
        decoded (undecodable bytes replaced)."""
        return self._stderr.text()

    async def _input_ended(self, unterminated: bytes) -> ConnectionBroken:
        return await self._exited_error(unterminated)

    async def _output_broken(self) -> ConnectionBroken:
        return await self._exited_error(b"")

    async def _exited_error(self, unterminated: bytes) -> CommandExited:
        with trio.move_on_after(_EXIT_STATUS_GRACE):
            await self._process.wait()
        with trio.move_on_after(_STDERR_GRACE):
            await self._stderr.finished.wait()
        code = self._process.returncode
        if code is None:
            what = "closed its end of the pipe"
        elif code < 0:
            what = f"was killed by {_signal_name(-code)}"
        else:
            what = f"exited with status {code}"
        said_nothing = self._lines_received == 0
        reason = f"{self._command!r} {what}"
        if said_nothing:
            reason += " before saying anything"
        if unterminated:
            reason += f", leaving an unfinished line {_preview(unterminated)}"
        tail = self.stderr_tail().rstrip()
        if tail:
            reason += ". The end of its stderr:\n" + "\n".join(
                "  " + line for line in tail.splitlines()
            )
        else:
            reason += " (its stderr was empty)"
        error = CommandFailed if said_nothing else CommandExited
        return error(reason, returncode=code, stderr_tail=tail)

    async def _shutdown(self) -> None:
        with trio.CancelScope(shield=True):
            # End of file on its stdin is the polite goodbye; closing its
            # stdout too unblocks a command stuck writing to us.
            self._writer.close()
            self._reader.close()
            with trio.move_on_after(self._close_grace):
                await self._process.wait()
            if self._process.returncode is None:
                self._signal_group(signal.SIGTERM)
                with trio.move_on_after(self._close_grace):
                    await self._process.wait()
            self._signal_group(signal.SIGKILL)
            await self._process.wait()
            with trio.move_on_after(_STDERR_GRACE):
                await self._stderr.finished.wait()
            self._process.stderr.close()  # type: ignore[union-attr]

    def _signal_group(self, signum: int) -> None:
        # start_new_session made the command the leader of a group whose id
        # is its pid; the group outlives the leader while stragglers remain.
        try:
            os.killpg(self._process.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class _StderrTail:
    """Drains a command's stderr, keeping the last ``limit`` bytes and
    optionally copying everything to our own stderr."""

    def __init__(self, limit: int, *, forward: bool):
        self._limit = limit
        self._forward = forward
        self._data = bytearray()
        self._cut = False
        self.finished = trio.Event()

    async def drain(self, stream: trio.abc.ReceiveStream) -> None:
        # A system task: it must never raise.
        try:
            while data := await stream.receive_some(_CHUNK):
                self._data += data
                if len(self._data) > self._limit:
                    del self._data[: -self._limit]
                    self._cut = True
                if self._forward:
                    _copy_to_stderr(data)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass
        except Exception:
            log.exception("reading a command's stderr failed")
        finally:
            self.finished.set()

    def text(self) -> str:
        data = bytes(self._data)
        if self._cut:  # do not start in the middle of a UTF-8 character
            data = data.lstrip(bytes(range(0x80, 0xC0)))
        return data.decode("utf-8", errors="replace")


def _copy_to_stderr(data: bytes) -> None:
    try:
        sys.stderr.flush()
        buffer = getattr(sys.stderr, "buffer", None)
        if buffer is not None:
            buffer.write(data)
            buffer.flush()
        else:
            sys.stderr.write(data.decode("utf-8", errors="replace"))
    except (OSError, ValueError):
        pass
