"""A request this client sent and waits for, and how it ended.

:class:`Turn` is the state :class:`~.protocol_client.ProtocolClient` keeps
for its own running request (a prompt, a ``compress``, a ``rewind``): its
tool calls' cancel scopes (:mod:`.calls`), whether the server has it yet and
a cancel asked for while the connection was down (:mod:`.reconnect`).
"""

from __future__ import annotations

import msgspec
import trio

from gemini_split.protocol import Compress, Error, Finished, GenerateContentRequest, Rewind


class TurnOutcome(msgspec.Struct):
    """How a request ended: exactly one of ``finished`` and ``error``."""

    request_id: str
    finished: Finished | None = None
    error: Error | None = None

    @property
    def cancelled(self) -> bool:
        return self.finished is not None and self.finished.reason == "cancelled"


class Turn:
    """This client's own running request, until its ``finished`` or ``error``."""

    def __init__(self, request: GenerateContentRequest | Compress | Rewind):
        self.request = request
        self.request_id = request.id
        #: Whether any event of this request arrived (the server has it).
        self.acknowledged = False
        #: A cancel the user asked for while the connection was down.
        self.cancel_pending = False
        self.done = trio.Event()
        self.outcome = TurnOutcome(request.id)
        self.tools_cancelled = False
        self._tool_scopes: set[trio.CancelScope] = set()

    def new_tool_scope(self) -> trio.CancelScope:
        """A scope for one tool call of this turn, cancelled with the turn."""
        scope = trio.CancelScope()
        if self.tools_cancelled:
            scope.cancel()
        self._tool_scopes.add(scope)
        return scope

    def cancel_tools(self) -> None:
        self.tools_cancelled = True
        for scope in self._tool_scopes:
            scope.cancel()
