"""Tool calls a client runs: ``tool_execution_request`` out, the first
``tool_execution_response`` back.

A call goes to the client whose prompt started the request (its *origin*);
when the origin is gone, it is handed over (asked again, same id, unlogged,
``handover``) to every attached driver offering the tool, and the first
answer wins (``tool_call_answered`` tells the others). One
:class:`ClientCalls` per session; the waiting is :class:`~.asks.Asks`'.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from msgspec.structs import replace

from gemini_split.protocol import (
    Error,
    ErrorCode,
    ServerEvent,
    ToolCallAnswered,
    ToolExecutionRequest,
    ToolExecutionResponse,
    ToolFailure,
    quote,
)
from gemini_split.stamping import stamp

from ..views import View
from .asks import Ask, Asks
from .run import RequestRun

log = logging.getLogger(__name__)


class ClientCalls:
    """The client tool calls of one session.

    ``emit`` sends an event to every view (logged); ``active()`` names the
    running request (its ``origin``: None once it left); ``views()`` the
    attached views."""

    def __init__(self, session_id: str, *, emit: Callable[[ServerEvent], Awaitable[None]],
                 emit_nowait: Callable[[ServerEvent], None], active: Callable[[], RequestRun | None],
                 views: Callable[[], list[View]]):
        self.session_id = session_id
        self._emit = emit
        self._emit_nowait = emit_nowait
        self._active = active
        self._views = views
        self.asks: Asks[ToolExecutionRequest, ToolExecutionResponse] = Asks()
        #: Calls whose ``tools_away`` notice went out.
        self._told: set[str] = set()

    async def call(self, request_id: str, name: str, args: dict[str, Any], *, wait: float, agent_id: int = 0,
                   on_call: Callable[[str, str, dict[str, Any]], None] | None = None
                   ) -> tuple[Any, ToolFailure | None]:
        """Ask the client to run a tool (for the agent ``agent_id``; its
        call id told to ``on_call(call_id, name, args)`` first); wait for
        its answer or ``wait`` seconds."""
        event = stamp(ToolExecutionRequest(request_id=request_id, tool=name, parameters=args,
                                           timeout=wait, agent_id=agent_id))
        if on_call is not None:
            on_call(event.id, name, args)
        active = self._active()

        async def send(request: ToolExecutionRequest) -> None:
            await self._emit(request)
            if not any(self._runs(view, name) for view in self._views()):
                self._say_nobody_runs(request.id or "", name, wait)

        response = await self.asks.ask(event.id, event, send=send, timeout=wait,
                                       offered=active.origin if active is not None else None)
        if response is None:
            log.warning("session %s: client did not answer %s (%s) within %ss", self.session_id, event.id, name,
                        wait)
            return None, ToolFailure(
                code="timeout",
                message=f"the client did not answer within {wait:g} seconds",
                hint="the user's machine may be busy or disconnected; do not retry the same call",
            )
        return response.result, response.error

    def answer(self, response: ToolExecutionResponse, view: View) -> None:
        """``view``'s answer: the first one settles the call; a late one is
        refused (``unexpected_message``)."""
        if self.asks.waiting(response.request_id) is None:  # answered by another client, or timed out here
            view.send_direct(Error(
                code=ErrorCode.UNEXPECTED_MESSAGE.value, in_reply_to=response.id,
                message=f"tool call {quote(response.request_id)} is no longer waiting for an answer",
            ))
            return
        ask = self.asks.settle(response.request_id, response)
        self._emit_nowait(ToolCallAnswered(request_id=ask.question.request_id, call_id=response.request_id,
                                           client=view.label))

    @staticmethod
    def _runs(view: View, tool: str) -> bool:
        """Whether ``view`` answers a call of ``tool``: a driver that told
        its tools (``tool_discovery``; one that has not this one answers
        with an error at once). A browser tells none, and never answers."""
        return view.may_act and view.attached and view.tools is not None

    def _say_nobody_runs(self, call_id: str, tool: str, wait: float | None) -> None:
        """Tell every view, once per call, that a call waits for a client
        that runs it and none attached does: the user sees why, and may
        cancel (``tools_away``, a notice)."""
        pending = {ask.question.id for ask in self.asks.pending()}
        self._told &= pending | {call_id}  # calls settled since are forgotten
        if call_id in self._told:
            return
        self._told.add(call_id)
        minutes = f" (for up to {wait / 60:g} minutes)" if wait else ""
        self._emit_nowait(Error(
            code=ErrorCode.TOOLS_AWAY.value, fatal=False,
            message=f"{tool} waits for the client that runs this session's tools, and none is attached (the "
                    f"terminal that ran them has left): reattach it to session {self.session_id} (--resume, with the "
                    f"--server it used) to have it run, or cancel the request; it waits{minutes}"))

    def waiting(self, call_id: str) -> Ask[ToolExecutionRequest, ToolExecutionResponse] | None:
        return self.asks.waiting(call_id)

    def handed_out(self) -> None:
        """Events went out to the views: calls nobody's own (their origin
        left), now logged, go to every driver."""
        if self.asks.pending():
            self.hand_over()

    def hand_over(self, view: View | None = None) -> None:
        """Ask again (same ids, unlogged, ``handover``) for the unanswered
        calls of a request whose origin is not attached: of ``view`` only,
        or of every driver attached. Each view is asked once per call."""
        active = self._active()
        if active is None or active.origin is not None:
            return
        targets = [view] if view is not None else list(self._views())
        if view is None:
            for ask in self.asks.pending():
                if not any(self._runs(target, ask.question.tool) for target in targets):
                    self._say_nobody_runs(ask.question.id or "", ask.question.tool, ask.question.timeout)
        for ask in self.asks.pending():
            request = ask.question
            if request.seq is None:
                continue  # an unlogged request reaches every view live
            for target in targets:
                if target.may_act and target.attached and target not in ask.offered and target.offers(request.tool):
                    ask.offered.add(target)
                    target.send_direct(replace(request, seq=None, handover=True))
