"""The state of a session's request, kept by applying events to it.

Plain synchronous code: no I/O, no clock, no event loop. One
:class:`RequestTracker` answers "which request runs, which tool calls wait
for an answer, which approvals wait for a decision" wherever that is asked:
each protocol :class:`~.connection.Connection` keeps one for its connection
(its rules check a message first, then change the tracker), and a server
session runs one over the events it logs, which is what a client attaching
is told (``connected.active_request_id`` / ``pending_tool_calls`` /
``pending_approvals``).
"""

from __future__ import annotations

import msgspec

from .messages import (
    Error,
    Finished,
    RequestStarted,
    ServerEvent,
    ToolAwaitingApproval,
    ToolCallAnswered,
    ToolDecided,
    ToolExecutionRequest,
)

#: Settled approval call ids a tracker remembers (see :attr:`RequestTracker.decided`).
DECIDED_KEPT = 1024


class RequestState(msgspec.Struct):
    """The request a session is running, as both ends see it."""

    request_id: str
    #: ``tool_execution_request`` ids the client has not answered yet.
    pending_calls: set[str] = msgspec.field(default_factory=set)
    #: ``tool_awaiting_approval`` call ids no ``tool_decided`` has settled yet.
    awaiting_decision: set[str] = msgspec.field(default_factory=set)


class RequestTracker:
    """The running request (or None) and the approvals settled lately.

    The small methods change the state one step and check nothing (a
    caller that must refuse what breaks the protocol checks first, as the
    connection's rules do); :meth:`apply` takes one logged session event,
    trusted (the server's own log)."""

    def __init__(self) -> None:
        self.request: RequestState | None = None
        #: Approval call ids settled already, and how (``decided``,
        #: ``expired``, ``ended``); the most recent :data:`DECIDED_KEPT`.
        self.decided: dict[str, str] = {}

    # --- one step each ---------------------------------------------------------

    def begin(self, request_id: str) -> RequestState:
        """``request_id`` runs (with nothing pending yet)."""
        self.request = RequestState(request_id)
        return self.request

    def call_requested(self, call_id: str) -> None:
        if self.request is not None:
            self.request.pending_calls.add(call_id)

    def call_answered(self, call_id: str) -> None:
        if self.request is not None:
            self.request.pending_calls.discard(call_id)

    def awaiting(self, call_id: str) -> None:
        if self.request is not None:
            self.request.awaiting_decision.add(call_id)

    def settled(self, call_id: str, how: str) -> None:
        """An approval question no longer takes a decision (``how``:
        ``decided``, ``expired`` or ``ended``)."""
        if self.request is not None:
            self.request.awaiting_decision.discard(call_id)
        self.decided.pop(call_id, None)
        self.decided[call_id] = how
        while len(self.decided) > DECIDED_KEPT:
            del self.decided[next(iter(self.decided))]

    def end(self) -> None:
        """The running request ended: its open questions are settled
        (``ended``)."""
        if self.request is not None:
            for call_id in sorted(self.request.awaiting_decision):
                self.settled(call_id, "ended")
        self.request = None

    def restore(self, request: RequestState | None, decided: dict[str, str] | None = None) -> None:
        """Continue from ``request`` (a copy is kept) and, when given, the
        approvals settled already."""
        self.request = (None if request is None else
                        RequestState(request.request_id, set(request.pending_calls), set(request.awaiting_decision)))
        if decided is not None:
            self.decided = dict(decided)

    # --- a logged event --------------------------------------------------------------

    def apply(self, event: ServerEvent) -> None:
        """Follow one event of the session's log, in ``seq`` order."""
        if isinstance(event, RequestStarted):
            self.begin(event.request_id)
        elif isinstance(event, ToolExecutionRequest):
            self.call_requested(event.id)
        elif isinstance(event, ToolCallAnswered):
            self.call_answered(event.call_id)
        elif isinstance(event, ToolAwaitingApproval):
            self.awaiting(event.call_id)
        elif isinstance(event, ToolDecided):
            self.settled(event.call_id, "expired" if event.decision == "expired" else "decided")
        elif isinstance(event, Finished | Error):
            if self.request is not None and event.request_id is not None \
                    and event.request_id == self.request.request_id:
                self.end()

    # --- what an attaching client is told ------------------------------------------------

    @property
    def active_request_id(self) -> str | None:
        return self.request.request_id if self.request is not None else None

    @property
    def pending_tool_calls(self) -> tuple[str, ...]:
        return tuple(sorted(self.request.pending_calls)) if self.request is not None else ()

    @property
    def pending_approvals(self) -> tuple[str, ...]:
        return tuple(sorted(self.request.awaiting_decision)) if self.request is not None else ()
