"""One request's lifecycle, written once for every kind of request.

A request (a prompt, a ``compress``, a re-proposing ``rewind``) starts with
one ``request_started`` (sent by whoever starts it) and ends with exactly
one ``finished`` or one ``error`` carrying its ``request_id``. Between them
:class:`RequestRun` does what every kind shares:

* the record that it runs is written beside it (``record_start``): its end
  waits for that write, so the store sees its start before its turn;
* its body runs in a cancel scope (``cancel`` stops it at once);
* paced bodies take their place among the server's requests
  (answer-first, :mod:`..priority`: answered once their first output is
  written to a client) and give it back when they end;
* failures become the error it ends with: a body's own
  (:class:`RequestFailed`), the model's (:func:`model_error`), and any bug
  (``internal``: a bug ends the request, never the session); a request the
  server stopped (:meth:`RequestRun.cancel` with a reason) ends with that
  reason;
* its state is saved (durable) before ``finished`` is sent: a client that
  saw ``finished`` can always resume it.

What differs per kind is its :class:`Body`.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import trio

from gemini_split.errors import GeminiSplitError
from gemini_split.protocol import ApiStats, Error, ErrorCode, Finished, ServerEvent, Usage

from ...model.base import ModelAuthError, ModelError
from ..priority import AnswerFirst, Pace
from ..views import View

log = logging.getLogger(__name__)


class RequestFailed(GeminiSplitError):
    """A body's own reason to end its request with an error (``code``)."""

    code = ErrorCode.INTERNAL

    def __init__(self, message: str, code: ErrorCode | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code


def model_error(exc: ModelError) -> tuple[ErrorCode, str]:
    """The error a request ends with when the model call failed."""
    if isinstance(exc, ModelAuthError):
        return ErrorCode.MODEL_AUTH, str(exc)
    code = ErrorCode.RATE_LIMITED if exc.status == 429 else (
        ErrorCode.MODEL_UNAVAILABLE if exc.retryable else ErrorCode.MODEL_ERROR)
    return code, str(exc)


@dataclass
class Outcome:
    """What a body reports once it has ended."""

    #: The usage its end carries (None: an ``error`` carries none, a
    #: ``finished`` an empty one), its model calls and their API stats.
    usage: Usage | None = None
    turns: int = 1
    api: ApiStats | None = None
    #: Whether the session's state changed and is saved before the end.
    save: bool = True
    #: Events sent after the save, before the end (``compressed``).
    told: tuple[ServerEvent, ...] = ()


class Body(Protocol):
    """What one kind of request does."""

    #: Whether it takes a place among the server's requests (it streams
    #: the model's answer) — answer-first pacing.
    paced: bool

    async def run(self, pace: Pace | None) -> None:
        """Do the work; raise :class:`RequestFailed` or a model error to end
        with an error. Cancellation may come at any await."""

    def ended(self) -> None:
        """The run is over however it ended: hand its state back to the
        session. Synchronous (it runs while cancelled too)."""

    def outcome(self) -> Outcome:
        """Apply its result to the session (before the save) and say how it
        ends."""


class RequestState(enum.Enum):
    RUNNING = "running"      # its body runs; cancel stops it
    ENDING = "ending"        # the body is over: saving, then its end is sent
    ENDED = "ended"          # its ``finished`` or ``error`` is sent


class RequestRun:
    """One request from its start to its one end."""

    def __init__(self, request_id: str, body: Body, *, origin: View | None, priority: AnswerFirst,
                 record_start: Callable[[str], Awaitable[None]], save: Callable[[str], Awaitable[None]],
                 emit_nowait: Callable[[ServerEvent], None], on_ended: Callable[[], None],
                 when_delivered: Callable[[Callable[[], None]], None] | None = None):
        self.request_id = request_id
        self.body = body
        #: The view whose prompt started it: its client tool calls go
        #: there (None once it left, or when it was not attached).
        self.origin = origin
        self.scope = trio.CancelScope()
        self.state = RequestState.RUNNING
        #: Set when the server (not the user) stopped it: it then ends with
        #: this error instead of ``finished`` / ``cancelled``.
        self.stopped_because: tuple[ErrorCode, str] | None = None
        self._priority = priority
        self._record_start = record_start
        self._save = save
        self._emit_nowait = emit_nowait
        self._on_ended = on_ended
        #: Calls back once what was emitted so far is written (the session's
        #: ``Broadcast.when_delivered``): a paced request counts as answered
        #: when its first output has reached a client.
        self._when_delivered = when_delivered

    def cancel(self, because: tuple[ErrorCode, str] | None = None) -> None:
        """Stop it now; ``because`` is for the server's own reasons."""
        self.stopped_because = because
        self.scope.cancel()

    async def run(self, nursery: trio.Nursery) -> None:
        """Run it to its end (the record of its start written in ``nursery``)."""
        rid = self.request_id
        recorded = trio.Event()
        nursery.start_soon(self._recorded, recorded)
        error: tuple[ErrorCode, str] | None = None
        pace = self._priority.request(when_delivered=self._when_delivered) if self.body.paced else None
        try:
            with self.scope:
                try:
                    await self.body.run(pace)
                except RequestFailed as exc:
                    error = (exc.code, str(exc))
                except ModelError as exc:
                    error = model_error(exc)
                except Exception as exc:  # a bug must end the request, not the session
                    log.exception("request %s failed", rid)
                    error = (ErrorCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            # What follows (the save, the next request's start) is written
            # after the record of this one's start.
            self.state = RequestState.ENDING
            if pace is not None:
                pace.done()
            with trio.CancelScope(shield=True):
                await recorded.wait()
            self._on_ended()
            self.body.ended()
        cancelled = self.scope.cancelled_caught
        if cancelled and self.stopped_because is not None:
            error = self.stopped_because
        outcome = self.body.outcome()
        if outcome.save:
            await self._save(rid)
        for event in outcome.told:
            self._emit_nowait(event)
        if error is not None:
            self._emit_nowait(Error(request_id=rid, in_reply_to=rid, code=error[0].value, message=error[1],
                                    usage=outcome.usage, api=outcome.api))
        else:
            self._emit_nowait(Finished(request_id=rid, usage=outcome.usage or Usage(), turns=outcome.turns,
                                       reason="cancelled" if cancelled else "stop", api=outcome.api))
        self.state = RequestState.ENDED

    async def _recorded(self, done: trio.Event) -> None:
        try:
            await self._record_start(self.request_id)
        finally:
            done.set()
