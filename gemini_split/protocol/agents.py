"""(1.4) Sub-agents on the wire: what a peer older than 1.4 is sent.

A sub-agent's events carry its ``agent_id`` (1, 2 … per request; 0 is the
main agent). A client older than :data:`~.messages.SUBAGENTS_SINCE` knows
nothing of sub-agents: it is sent the main agent's events, and of a
sub-agent's only what it must answer — its ``tool_execution_request`` (the
client runs the session's tools) and its approval questions
(``tool_awaiting_approval`` / ``tool_decided``, which carry ``agent_id``
since 1.2): an approval is never invisible to the one who must answer it.
The main agent's own call of the sub-agent's tool (``tool_started`` …
``tool_completed`` with ``agent_id`` 0) shows such a client the delegation
as an ordinary tool call.

The server's writers (``server/service.py``) decide on the event, the Redis
relay and the replay paths on its encoded text (:func:`text_for_older_peer`):
the same rule, without decoding.
"""

from __future__ import annotations

import re

from .messages import (
    AgentFinished,
    AgentStarted,
    Retrying,
    ServerEvent,
    TextDelta,
    ThinkingDelta,
    ToolCompleted,
    ToolDelta,
    ToolError,
    ToolStarted,
)

#: A sub-agent's events an older peer is not sent (its tool requests and
#: approvals are: see the module's docstring).
_SUB_AGENT_ONLY = (TextDelta, ThinkingDelta, ToolStarted, ToolDelta, ToolCompleted, ToolError, Retrying)
_AGENT_EVENTS = (AgentStarted, AgentFinished)
_AGENT_PREFIXES = ('{"type":"agent_started"', '{"type":"agent_finished"')
_SUB_AGENT_TYPES = tuple('{"type":"%s"' % cls.TYPE for cls in _SUB_AGENT_ONLY)
# ``agent_id`` is the last field of each of those classes, so in our own
# encoding (fields in declaration order, defaults left out, ``replayed``
# appended by ``mark_replayed``) a sub-agent's event ends with it. A string
# value cannot end this way: its quotes would be escaped.
_SUB_AGENT_TAIL = re.compile(r',"agent_id":[1-9][0-9]*(,"replayed":true)?}$')


def for_older_peer(event: ServerEvent) -> bool:
    """Whether a peer older than 1.4 is sent ``event``."""
    if isinstance(event, _AGENT_EVENTS):
        return False
    if isinstance(event, _SUB_AGENT_ONLY):
        return event.agent_id == 0
    return True


def text_for_older_peer(text: str) -> bool:
    """:func:`for_older_peer` for an event as we encoded it."""
    if text.startswith(_AGENT_PREFIXES):
        return False
    if text.startswith(_SUB_AGENT_TYPES):
        return _SUB_AGENT_TAIL.search(text) is None
    return True
