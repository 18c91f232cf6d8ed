"""gemini-split's Python SDK: sessions of the agent from a program.

::

    from gemini_split import Client

    with Client.connect() as client:                       # embedded; "local", ws://…, a profile
        print(client.new_session().prompt("Summarise README.md").text())

The same in Trio or asyncio: ``async with Client.connect() as client:``
and ``await``. A prompt's :class:`Reply` yields the events every face
sees — the turn model's changes (:mod:`gemini_split.protocol.turn`:
:class:`TextAdded`, :class:`ToolCallStarted`, :class:`TurnEnded`…) and
:class:`Approval` questions to answer. ``tools=`` offers Python functions
to the model. docs/sdk.md is the guide, with examples the test suite runs.

``import gemini_split`` alone loads none of this: the package exposes
:class:`Client`, :class:`SyncClient` and :func:`tool` lazily.
"""

from gemini_split.client.failures import HandshakeFailed, RequestFailed
from gemini_split.client.rewinding import Rewinding, Step
from gemini_split.errors import BadInput, ConfigurationError, MissingApiKey
from gemini_split.protocol.turn import (
    AgentBegan,
    AgentEnded,
    AgentOutput,
    ApprovalAsked,
    ApprovalDecided,
    HistoryCompressed,
    Notice,
    RetryScheduled,
    TextAdded,
    ThoughtAdded,
    ToolCallEnded,
    ToolCallOutput,
    ToolCallRequested,
    ToolCallStarted,
    TurnBegan,
    TurnEnded,
)
from gemini_split.transport import AuthenticationFailed, ConnectFailed

from ._async import Client, Connecting, Events, Reply, Session
from ._core import Closed, Event, PromptFailed
from ._functions import FunctionTool, tool
from ._questions import Approval
from ._sync import SyncClient, SyncEvents, SyncReply, SyncSession

__all__ = [
    # clients, sessions, replies
    "Client", "Connecting", "Session", "Reply", "Events",
    "SyncClient", "SyncSession", "SyncReply", "SyncEvents",
    # tools and questions
    "tool", "FunctionTool", "Approval",
    # events (the turn model's changes)
    "Event", "TurnBegan", "TextAdded", "ThoughtAdded", "ToolCallRequested", "ToolCallStarted", "ToolCallOutput",
    "ToolCallEnded", "ApprovalAsked", "ApprovalDecided", "RetryScheduled", "HistoryCompressed", "Notice",
    "TurnEnded", "AgentBegan", "AgentOutput", "AgentEnded",
    # rewinding
    "Step", "Rewinding",
    # errors
    "PromptFailed", "Closed", "ConfigurationError", "MissingApiKey", "BadInput", "ConnectFailed",
    "AuthenticationFailed", "HandshakeFailed", "RequestFailed",
]
