"""Events of tool calls run on this client, told to its own UI.

The executor reports a call's progress in the protocol's vocabulary
(``tool_started``, ``tool_delta``, ``tool_completed``, ``tool_error``) so
that a front end renders a local call as it renders one a server ran. The
types here say where such an event came from: each is the wire class's
subclass (every ``isinstance`` check, the turn model and the encoded form
are the wire type's), marked ``LOCAL``. They never travel: a protocol
``Connection`` refuses to send them (its rules know the wire classes only),
and a server that runs the client's tools for a session reports them with
the wire classes (:data:`WIRE_TOOL_EVENTS`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from gemini_split.protocol import ToolCompleted, ToolDelta, ToolError, ToolStarted

__all__ = [
    "LOCAL_TOOL_EVENTS",
    "LocalToolCompleted",
    "LocalToolDelta",
    "LocalToolError",
    "LocalToolStarted",
    "ToolEvents",
    "WIRE_TOOL_EVENTS",
    "is_local",
]


class LocalToolStarted(ToolStarted, kw_only=True):
    """``tool_started`` of a call run on this client."""

    LOCAL: ClassVar[bool] = True


class LocalToolDelta(ToolDelta, kw_only=True):
    """``tool_delta`` of a call run on this client."""

    LOCAL: ClassVar[bool] = True


class LocalToolCompleted(ToolCompleted, kw_only=True):
    """``tool_completed`` of a call run on this client."""

    LOCAL: ClassVar[bool] = True


class LocalToolError(ToolError, kw_only=True):
    """``tool_error`` of a call run on this client."""

    LOCAL: ClassVar[bool] = True


def is_local(event: Any) -> bool:
    """Whether ``event`` was made on this client for a call it ran (not
    received from a server)."""
    return getattr(type(event), "LOCAL", False) is True


class ToolEvents(msgspec.Struct, frozen=True):
    """The classes an executor reports a call's progress with."""

    started: type[ToolStarted]
    delta: type[ToolDelta]
    completed: type[ToolCompleted]
    error: type[ToolError]


#: For a call run here and told to this client's own UI (the default).
LOCAL_TOOL_EVENTS = ToolEvents(LocalToolStarted, LocalToolDelta, LocalToolCompleted, LocalToolError)
#: For a call a server runs and reports on the wire (``LocalToolHost``).
WIRE_TOOL_EVENTS = ToolEvents(ToolStarted, ToolDelta, ToolCompleted, ToolError)
