"""One JSON-RPC 2.0 peer over a :class:`~gemini_split.transport.MessageStream`.

ACP is symmetric: the editor calls the agent (``session/prompt``) and the
agent calls the editor (``fs/read_text_file``, ``session/request_permission``)
on the same connection. :class:`RpcPeer` reads every message in one task
(:meth:`RpcPeer.run`, started with ``nursery.start``), runs each incoming
request in a task of its own (a ``session/cancel`` must get through while a
``session/prompt`` runs) and answers it once, and matches responses to the
requests we sent (:meth:`RpcPeer.request`). Sends are whole messages, one at
a time, in the order they were made: updates sent before a reply arrive
before it.

The stream is any transport's: the process's stdin/stdout for ``--acp``
(one message per line), a WebSocket for the bridge (one per text frame).

A handler that must send something right *after* its answer (a late
joiner's replay follows its ``initialize`` result) returns
:class:`AnswerThen`.

Error handling: what the peer sends that is not JSON-RPC gets the error the
codec names (:mod:`.jsonrpc`) and the peer goes on; a handler raising
:class:`RpcError` answers with it; any other exception is logged and
answered ``-32603`` (never a traceback on the wire). Once the stream has
ended, :meth:`request` and :meth:`notify` raise :class:`PeerGone`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from gemini_split.errors import GeminiSplitError
from gemini_split.transport import ConnectionBroken, ConnectionClosed, MessageStream, MessageTooLarge

from . import jsonrpc
from .jsonrpc import INTERNAL_ERROR, INVALID_REQUEST, Invalid, Request, Response, RpcError

log = logging.getLogger(__name__)

Handler = Callable[[Request, "RpcPeer"], Awaitable[Any]]

#: Incoming requests handled at once; the reader waits for a free slot.
MAX_CONCURRENT_REQUESTS = 64


class PeerGone(GeminiSplitError):
    """The connection to the ACP peer has ended (it closed, or we did)."""


@dataclass(frozen=True)
class AnswerThen:
    """A handler's ``result``, and ``then``: awaited once the answer has been
    sent (whatever it sends comes after the answer)."""

    result: Any
    then: Callable[[], Awaitable[None]]


class RpcPeer:
    def __init__(self, stream: MessageStream, handler: Handler, *,
                 max_message_size: int = jsonrpc.DEFAULT_MAX_MESSAGE_SIZE):
        self.stream = stream
        self.handler = handler
        self.max_message_size = max_message_size
        self._next_id = 0
        self._pending: dict[jsonrpc.Id, tuple[trio.Event, list[Response]]] = {}
        self._send_lock = trio.Lock()
        self._slots = trio.Semaphore(MAX_CONCURRENT_REQUESTS)
        self._gone: str | None = None
        #: Set when the input has ended: nothing more will be answered.
        self._ending: str | None = None
        #: Seconds requests still running get to answer once the input ends.
        self.answer_grace = 5.0
        #: Set once the stream has ended.
        self.closed = trio.Event()
        #: Whatever the face keeps per connection (the editor's capabilities…).
        self.state: dict[str, Any] = {}

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Read and dispatch until the stream ends; requests still running
        are cancelled then."""
        async with trio.open_nursery() as nursery:
            task_status.started()
            try:
                await self._read(nursery)
                # The input ended (an editor may close its end after its last
                # request): requests running get a moment to answer.
                self._input_ended()
                nursery.cancel_scope.deadline = trio.current_time() + self.answer_grace
            finally:
                if not nursery.cancel_scope.deadline < float("inf"):
                    nursery.cancel_scope.cancel()
        self._end(self._gone or "the connection ended")

    async def _read(self, nursery: trio.Nursery) -> None:
        while True:
            try:
                text = await self.stream.receive()
            except MessageTooLarge as exc:
                await self._send_quietly(jsonrpc.encode_error(None, RpcError(INVALID_REQUEST, f"message too large: {exc}")))
                continue
            except (ConnectionBroken, ConnectionClosed) as exc:
                self._ending = f"the connection ended: {exc.reason}"
                return
            message = jsonrpc.decode(text, max_size=self.max_message_size)
            if isinstance(message, Invalid):
                log.info("refused a JSON-RPC message: %s", message.error.message)
                if message.reply:
                    await self._send_quietly(jsonrpc.encode_error(message.id, message.error))
            elif isinstance(message, Response):
                waiter = self._pending.get(message.id)
                if waiter is not None:
                    waiter[1].append(message)
                    waiter[0].set()
            else:
                await self._slots.acquire()
                nursery.start_soon(self._handle, message)

    async def _handle(self, request: Request) -> None:
        try:
            try:
                result = await self.handler(request, self)
            except RpcError as exc:
                if request.id is not None:
                    await self._send_quietly(jsonrpc.encode_error(request.id, exc))
                else:
                    log.info("notification %s failed: %s", request.method, exc.message)
                return
            except PeerGone:
                return
            except Exception:
                log.exception("ACP method %s failed", request.method)
                if request.id is not None:
                    await self._send_quietly(jsonrpc.encode_error(
                        request.id, RpcError(INTERNAL_ERROR, f"internal error in {request.method}")))
                return
            then = None
            if isinstance(result, AnswerThen):
                result, then = result.result, result.then
            if request.id is not None:
                await self._send_quietly(jsonrpc.encode_result(request.id, result))
            if then is not None:
                try:
                    await then()
                except PeerGone:
                    pass
                except (RpcError, GeminiSplitError) as exc:
                    log.info("after answering %s: %s", request.method, exc)
        finally:
            self._slots.release()

    def _input_ended(self) -> None:
        """No answer can come any more: what waits for one is let go."""
        for done, _box in self._pending.values():
            done.set()

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Call a method of the peer and return its result. Raises
        :class:`RpcError` (the peer's error) or :class:`PeerGone`."""
        if self._ending is not None:
            raise PeerGone(self._ending)
        self._next_id += 1
        msg_id = self._next_id
        done = trio.Event()
        box: list[Response] = []
        self._pending[msg_id] = (done, box)
        try:
            await self._send(jsonrpc.encode_request(method, params, msg_id))
            await done.wait()
        finally:
            self._pending.pop(msg_id, None)
        if not box:
            raise PeerGone(self._gone or self._ending or "the connection ended")
        reply = box[0]
        if reply.error is not None:
            raise reply.error
        return reply.result

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification. Raises :class:`PeerGone`."""
        await self._send(jsonrpc.encode_request(method, params))

    async def notify_many(self, method: str, params: Sequence[dict[str, Any]]) -> None:
        """Send notifications in order, with nothing else between them: a
        send started after this call began (before its first ``await``)
        goes after them all. Raises :class:`PeerGone`."""
        if self._gone is not None:
            raise PeerGone(self._gone)
        async with self._send_lock:
            try:
                await self.stream.send_many([jsonrpc.encode_request(method, p) for p in params])
            except (ConnectionBroken, ConnectionClosed) as exc:
                self._end(f"the connection ended: {exc.reason}")
                raise PeerGone(self._gone or "the connection ended") from None

    async def notify_error(self, error: RpcError) -> None:
        """An error that answers no request (``"id": null``), e.g. a bad
        connection parameter; quietly nothing if the peer has gone."""
        await self._send_quietly(jsonrpc.encode_error(None, error))

    async def _send(self, text: str) -> None:
        if self._gone is not None:
            raise PeerGone(self._gone)
        async with self._send_lock:
            try:
                await self.stream.send(text)
            except (ConnectionBroken, ConnectionClosed) as exc:
                self._end(f"the connection ended: {exc.reason}")
                raise PeerGone(self._gone or "the connection ended") from None

    async def _send_quietly(self, text: str) -> None:
        try:
            await self._send(text)
        except PeerGone:
            pass

    def _end(self, reason: str) -> None:
        if self._gone is None:
            self._gone = reason
        for done, _box in self._pending.values():
            done.set()
        self.closed.set()

    async def aclose(self) -> None:
        self._end("closed by us")
        await self.stream.aclose()
