"""A Unix socket listener and connections, on non-blocking stdlib sockets
driven by Trio's low-level readiness waits (no trio.socket wrappers)."""

from __future__ import annotations

import errno
import logging
import os
import socket
import stat
import struct
from typing import Any

import trio

from gemini_split._trio_util import ACCEPT_CAPACITY_ERRNOS, AcceptBackoff
from gemini_split.transport.framing import LineSplitter, LineTooLong, LineWriter, decode_line, encode_line
from gemini_split.transport import (
    ConnectFailed,
    ConnectionBroken,
    ConnectionClosed,
    ConnectionHandler,
    ConnectOptions,
    MessageStream,
    MessageTooLarge,
    ServeOptions,
    Transport,
    TransportError,
    run_handler,
)

log = logging.getLogger("gemini_split_unix")

_CHUNK = 65536
_BACKLOG = 128
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
#: Seconds a refused connection stays open for the peer to read why.
_REFUSE_LINGER = 1.0


def socket_path(address: str) -> str:
    """The socket path of ``unix:/PATH`` (or ``unix://PATH``); raises
    :class:`ConnectFailed` for anything that is not an absolute path."""
    scheme, _, rest = address.partition(":")
    if scheme.lower() != "unix":
        raise ConnectFailed(f"{address!r} is not a unix: address")
    if rest.startswith("//"):
        rest = rest[2:]
    if not rest.startswith("/"):
        raise ConnectFailed(f"{address!r}: expected unix:/ABSOLUTE/PATH/TO/SOCKET")
    return rest


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a connected Unix socket,
    as the kernel recorded it when the connection was made."""
    _pid, uid, _gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    return uid


class UnixStream(MessageStream):
    """One connection: JSON lines over a connected Unix socket.

    ``send`` writes under a lock and waits for the socket (back-pressure, no
    buffer of our own). A send cancelled part-way through a line leaves the
    rest to be written first by the next send, so the peer never sees a torn
    line; one cancelled before any byte went out sends nothing. ``aclose``
    closes the socket at once (the peer reads end-of-file)."""

    private = True  # never leaves this machine

    def __init__(self, sock: socket.socket, *, max_message_size: int, peer: str, same_user: bool):
        sock.setblocking(False)
        self.peer = peer
        self.same_user = same_user
        self._sock = sock
        self._lines = LineSplitter(max_message_size)
        self._send_lock = trio.Lock()
        self._lines_out = LineWriter(self._sock.send, lambda: trio.lowlevel.wait_writable(self._sock))
        self._closed = False
        self._eof: ConnectionBroken | None = None
        self._broken: ConnectionBroken | None = None

    async def receive(self) -> str:
        await trio.lowlevel.checkpoint()
        while True:
            if self._closed:
                raise ConnectionClosed("connection closed")
            if self._eof is not None:
                raise self._eof
            item = self._lines.next_line()
            if item is None:
                await self._read_more()
                continue
            if isinstance(item, LineTooLong):
                raise MessageTooLarge(item.describe())
            message = decode_line(item)
            if message is not None:
                return message

    async def _read_more(self) -> None:
        while True:
            try:
                data = self._sock.recv(_CHUNK)
                break
            except BlockingIOError:
                pass
            except OSError as exc:
                if self._closed or exc.errno == errno.EBADF:
                    raise ConnectionClosed("connection closed") from None
                data = b""
                break
            try:
                await trio.lowlevel.wait_readable(self._sock)
            except trio.ClosedResourceError:
                raise ConnectionClosed("connection closed") from None
        if data:
            self._lines.feed(data)
            return
        torn = self._lines.unterminated()
        reason = f"{self.peer} closed the connection"
        if torn:
            reason += f" in the middle of a line ({len(torn)} bytes)"
        self._eof = ConnectionBroken(reason)
        raise self._eof

    async def send(self, message: str) -> None:
        line = encode_line(message)
        async with self._send_lock:
            if self._closed:
                raise ConnectionClosed("connection closed")
            if self._broken is not None:
                raise self._broken
            try:
                await self._lines_out.write_line(line)
            except trio.ClosedResourceError:
                raise ConnectionClosed("connection closed") from None
            except OSError as exc:
                if self._closed or exc.errno == errno.EBADF:
                    raise ConnectionClosed("connection closed") from None
                self._broken = ConnectionBroken(f"{self.peer} stopped reading: {exc.strerror or exc}")
                raise self._broken from exc

    async def aclose(self, reason: str = "closed") -> None:
        if not self._closed:
            self._closed = True
            trio.lowlevel.notify_closing(self._sock)
            self._sock.close()
        await trio.lowlevel.checkpoint()


class UnixTransport(Transport):
    name = "Unix socket"

    async def open_connection(self, address: str, options: ConnectOptions) -> MessageStream:
        path = socket_path(address)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with trio.fail_after(options.connect_timeout):
                await _connect(sock, path)
            uid = peer_uid(sock)
        except trio.TooSlowError:
            sock.close()
            raise ConnectFailed(f"cannot connect to {path}: no answer within {options.connect_timeout:g} s") from None
        except FileNotFoundError:
            sock.close()
            raise ConnectFailed(f"cannot connect to {path}: no socket there (is the server running?)") from None
        except ConnectionRefusedError:
            sock.close()
            raise ConnectFailed(f"cannot connect to {path}: nobody accepts on it (a server that died?)") from None
        except OSError as exc:
            sock.close()
            raise ConnectFailed(f"cannot connect to {path}: {exc.strerror or exc}") from None
        if uid != os.geteuid():
            sock.close()
            raise ConnectFailed(
                f"refusing {path}: its server runs as uid {uid}, not as you (uid {os.geteuid()}); "
                "a local daemon must be your own")
        return UnixStream(sock, max_message_size=options.max_message_size, peer=f"unix:{path}", same_user=True)

    async def serve(self, address: str, handler: ConnectionHandler, options: ServeOptions,
                    *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        path = socket_path(address)
        allowed = {os.geteuid(), *options.extra.get("allowed_uids", ())}
        listener = _listen(path)
        bound = os.stat(path).st_ino
        backoff = AcceptBackoff(path, log)
        try:
            async with trio.open_nursery() as nursery:
                task_status.started(f"unix:{path}")
                while True:
                    await trio.lowlevel.wait_readable(listener)
                    try:
                        sock, _ = listener.accept()
                    except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                        continue
                    except OSError as exc:
                        if exc.errno in ACCEPT_CAPACITY_ERRNOS:
                            await backoff.failed(exc)  # one bounded line per run, not one per 0.1 s
                            continue
                        raise
                    backoff.succeeded()
                    uid = peer_uid(sock)
                    if uid not in allowed:
                        log.warning("refused a connection on %s from uid %d", path, uid,
                                    extra={"refusal": "foreign uid"})
                        nursery.start_soon(_refuse, sock, uid)
                        continue
                    stream = UnixStream(sock, max_message_size=options.max_message_size,
                                        peer=f"uid {uid} on {path}", same_user=True)
                    nursery.start_soon(run_handler, handler, stream)
        finally:
            trio.lowlevel.notify_closing(listener)
            listener.close()
            _remove_if_ours(path, bound)


async def _connect(sock: socket.socket, path: str) -> None:
    sock.setblocking(False)
    while True:
        try:
            sock.connect(path)
            return
        except (BlockingIOError, InterruptedError):
            # A Unix socket's backlog is full: EAGAIN means try again, not
            # "in progress" as on TCP.
            await trio.sleep(0.005)


def _listen(path: str) -> socket.socket:
    """A listening socket at ``path`` (mode 0600), replacing a dead server's
    socket file; raises :class:`TransportError` when the directory is not
    private or a live server is there."""
    directory = os.path.dirname(path) or "."
    try:
        info = os.stat(directory)
    except OSError as exc:
        raise TransportError(f"cannot listen on {path}: {exc.strerror or exc}") from None
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise TransportError(
            f"refusing to listen on {path}: its directory {directory} must be yours and closed to "
            f"others (mode 0700), not mode {stat.S_IMODE(info.st_mode):04o} owned by uid {info.st_uid}")
    _clear_stale(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        os.chmod(path, 0o600)
        sock.listen(_BACKLOG)
    except OSError as exc:
        sock.close()
        raise TransportError(f"cannot listen on {path}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


def _clear_stale(path: str) -> None:
    """Remove the socket file of a server that is gone; refuse to touch a
    live one or anything that is not a socket."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise TransportError(f"cannot listen on {path}: something that is not a socket is there")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        log.info("removing %s: the server that made it is gone", path)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return
    except OSError:
        pass  # e.g. a full backlog: somebody is alive there
    finally:
        probe.close()
    raise TransportError(f"cannot listen on {path}: another server is accepting connections there")


def _remove_if_ours(path: str, inode: int) -> None:
    try:
        if os.lstat(path).st_ino == inode:
            os.unlink(path)
    except OSError:
        pass


async def _refuse(sock: socket.socket, uid: int) -> None:
    """Say why in one fatal protocol ``error`` line (what a client expects
    in answer to its hello), let the client's hello arrive (a peer whose
    hello met a closed socket would see a broken pipe, not the reason), then
    close."""
    import json  # the server side only: a client's start-up never needs it

    line = json.dumps({
        "type": "error", "id": "refused", "timestamp": 0, "code": "unauthorized", "fatal": True,
        "message": f"this server only serves its own user; uid {uid} is refused",
    }, separators=(",", ":")).encode() + b"\n"
    sock.setblocking(False)
    try:
        sock.send(line)  # one short line fits any fresh socket buffer
        with trio.move_on_after(_REFUSE_LINGER):
            while True:
                await trio.lowlevel.wait_readable(sock)
                if not sock.recv(_CHUNK):
                    break
    except OSError:
        pass
    finally:
        trio.lowlevel.notify_closing(sock)
        sock.close()
