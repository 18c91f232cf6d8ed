"""The native client of a face that translates another protocol (the gRPC
face, ``plugins/gemini_split_grpc``).

Such a face keeps only its translation: the session is this package's
:func:`~gemini_split.client.connect.open_client`, as for the ACP face and
the REPL. The face sits below the client layer and never imports it, so
the server's command hands it :func:`open_face_client` (in
``ServeOptions.extra["open_client"]``); the request is the face's
``NativeRequest`` (duck-typed here for the same reason).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from gemini_split.environment import Environment
from gemini_split.userfiles.settings import SettingsError, load_settings
from gemini_split.transport import ConnectOptions

from gemini_split.userfiles.agents import agent_roots, discover, wire_agents
from gemini_split.tools.approval import ApprovalMode
from .connect import ClientSettings, Endpoint, SessionChoice, ToolSettings, open_client
from .protocol_client import HandshakeFailed, ProtocolClient

#: How :class:`HandshakeFailed` words a refused ``hello``; the face passes
#: the server's own message on.
_REFUSED = "the server refused the connection: "


@asynccontextmanager
async def open_face_client(request: Any) -> AsyncIterator[ProtocolClient]:
    """A connected native client for a face's ``NativeRequest``
    (``plugins/gemini_split_grpc/face.py``): ``request.address`` with
    ``request.token``; a new session or ``request.session_id`` continued
    (its history not replayed); no tools of its own — a call the model
    makes anyway is answered ``no_tools`` — and, with
    ``request.server_tools``, the server's tools, auto-approved or refusing
    what needs approval. Every event goes to ``request.on_event``; nobody
    is asked anything. Never reconnects: the face's stream ends with its
    connection.

    Raises :class:`HandshakeFailed` with the server's code and its message
    alone when the server refuses the session, or another
    :class:`~gemini_split.transport.ConnectFailed`."""
    # The client runs no tools, but its executor needs a directory to stand in.
    placeholder = Path(tempfile.mkdtemp(prefix="gemini-face-"))
    try:
        server_tools = bool(request.server_tools)
        settings = ClientSettings(
            endpoint=Endpoint(
                server=request.address, reconnect_timeout=0,
                connect=ConnectOptions(token=request.token, max_message_size=request.max_message_size,
                                       extra={"peer": request.peer, "buffer": FACE_BUFFER}),
            ),
            session=SessionChoice(resume=request.session_id, label="gRPC client"),
            tools=ToolSettings(
                workspace=placeholder,
                approval_mode=ApprovalMode.YOLO if server_tools and request.auto_approve else ApprovalMode.DEFAULT,
                reject_dangerous=server_tools and not request.auto_approve,
                run_on="server" if server_tools else "client",
                core_tools=(tuple(request.core_tools) or None) if server_tools else (),
                exclude_tools=tuple(request.exclude_tools) if server_tools else (),
            ),
        )
        try:
            async with open_client(settings, on_event=request.on_event) as client:
                yield client
        except HandshakeFailed as exc:
            message = str(exc)
            raise HandshakeFailed(message.removeprefix(_REFUSED), exc.code) from None
    finally:
        shutil.rmtree(placeholder, ignore_errors=True)


#: Messages the in-process connection holds unread before the session
#: waits: few, so that a gRPC client that reads slowly makes the session's
#: outbox merge deltas instead of queueing one per token.
FACE_BUFFER = 8


def face_agents(env: Environment) -> tuple[Any, ...]:
    """(Issue 32) The sub-agents a face's sessions may delegate to
    (``AgentDefinition``, for ``ServeOptions.extra["agents"]``): the
    built-ins and the serving user's ``~/.gemini/agents``, with that user's
    ``agents.overrides`` — never a project's (a face's session has its own
    workspace, no project of the user's). Each problem (a malformed
    definition, an unreadable settings file) is a line for ``env.warn``;
    the rest still load."""
    try:
        overrides = load_settings(env, trust=False).merged.agents.overrides
    except SettingsError as exc:
        env.warn(f"gemini-split serve: agents.overrides not applied: {exc}")
        overrides = None
    found = discover(agent_roots(env.config_dir, None, trusted=False), overrides=overrides)
    for line in found.warnings + [n for a in found.agents for n in a.notes]:
        env.warn(f"gemini-split serve: agents: {line}")
    return wire_agents(found)
