"""``serve --acp-ws``: ACP over WebSocket, on the server's own sessions.

Seed 003's bridge, built in: JSON-RPC 2.0 in WebSocket text frames, with the
same auth, TLS, Origin and limits as the native listener (the WebSocket
transport plugin serves both), and every ACP session a native session of the
same :class:`~gemini_split.server.service.AgentService` — reached through a
private loopback name, so the native protocol and the bridge see the same
sessions, stored the same way.

- **Shared sessions.** Any connection of the session's owner may use a live
  session by its ``sessionId`` without ``session/new`` (a page reload), and
  every connection using it gets its updates.
- **Late joiners.** Each session keeps its last ``ring_capacity`` (2000)
  ``session/update``\\ s. Connecting with ``?sessionId=ID`` joins that session
  (its updates start right after the answer to its ``initialize``);
  ``limit=N`` (the last N whole turns), ``since=MS``, ``before=MS``
  (Unix ms) choose what is replayed to a joining connection first: read and
  decided exactly as the native listener's ``?limit=&since=&before=``
  (``protocol/replay.py``: one implementation, the same refusals).
- **Tools** are the prompting client's: ``fs/read_text_file``,
  ``fs/write_text_file``, ``terminal/*`` when it advertises them, confined
  to the ``cwd`` it gave (judged on the path: the files are on its
  machine). The model gets exactly those; a client that offers none gets a
  model without tools and a message saying so. The server's own disk is
  never a tool's (the executor's workspace is an empty private directory),
  and clients cannot make the server start MCP servers.
- **Owners.** With ``--auth-config``, a session belongs to the token's user;
  the bridge's native connection proves it with a one-time secret the
  service accepts for that user only. Another user's ``sessionId`` is
  unknown.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

import trio

from gemini_split.tools.approval_mode import ApprovalMode
from gemini_split.client.connect import ClientSettings, Endpoint, ToolSettings
from gemini_split.protocol import RemoteProtocolError
from gemini_split.protocol.replay import replay_from_query
from gemini_split.transport import ConnectOptions, Principal, ServeOptions, get_transport

from . import jsonrpc
from .agent import AcpAgent, AcpSession
from .peer import RpcPeer
from .ring import DEFAULT_CAPACITY

log = logging.getLogger(__name__)

DEFAULT_PORT = 4444
#: The tools a bridge session can have: those a client can run for it.
BRIDGE_TOOLS = ("read_file", "write_file", "replace", "run_shell_command")


async def serve_acp_ws(service: Any, address: str, options: ServeOptions, *,
                       approval_mode: ApprovalMode = ApprovalMode.DEFAULT,
                       ring_capacity: int = DEFAULT_CAPACITY,
                       task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """Serve ACP on ``address`` (``ws://`` or ``wss://``) for ``service``'s
    sessions until cancelled; ``task_status.started`` gets the bound address.
    The service must be running (``service.run``)."""
    placeholder = Path(tempfile.mkdtemp(prefix="gemini-acp-bridge-"))
    secrets_for: dict[str, Principal] = {}
    original = service.authenticate
    if original is not None:
        def authenticate(token: str | None) -> Principal | None:
            if token:
                principal = secrets_for.get(hashlib.sha256(token.encode()).hexdigest())
                if principal is not None:
                    return principal
            return original(token)

        service.authenticate = authenticate

    def connect_as(session: AcpSession, peer: RpcPeer) -> ConnectOptions:
        principal = getattr(peer.stream, "principal", None)
        if principal is None:
            return ConnectOptions()
        secret = secrets.token_urlsafe(32)
        secrets_for[hashlib.sha256(secret.encode()).hexdigest()] = principal
        return ConnectOptions(token=secret)

    try:
        async with trio.open_nursery() as nursery:
            loopback = await nursery.start(
                get_transport("loopback:").serve, "loopback:", service.handle_connection,
                ServeOptions(max_message_size=service.config.max_message_size))
            settings = ClientSettings(
                endpoint=Endpoint(server=loopback, reconnect_timeout=0),
                tools=ToolSettings(workspace=placeholder, approval_mode=approval_mode, core_tools=BRIDGE_TOOLS),
            )
            agent = AcpAgent(settings, shared=True, local_tools=False, ring_capacity=ring_capacity,
                             connect_as=connect_as)
            await nursery.start(agent.run)

            async def handler(stream: Any) -> None:
                await _serve_connection(agent, stream, options.max_message_size)

            bound = await nursery.start(get_transport(address).serve, address, handler, options)
            log.info("ACP bridge serving on %s (ring %d messages per session)", bound, ring_capacity)
            task_status.started(bound)
    finally:
        service.authenticate = original
        shutil.rmtree(placeholder, ignore_errors=True)


async def _serve_connection(agent: AcpAgent, stream: Any, max_message_size: int) -> None:
    peer = RpcPeer(stream, agent.handle, max_message_size=max_message_size)
    query: dict[str, str] = getattr(stream, "query", None) or {}
    try:
        peer.state["replay"] = replay_from_query(query)
    except RemoteProtocolError as exc:
        await peer.notify_error(jsonrpc.RpcError(jsonrpc.INVALID_PARAMS, f"replay query: {exc}"))
    wanted = query.get("sessionId")
    if wanted:
        session = agent.sessions.get((agent.owner_of(peer), wanted))
        if session is None:
            await peer.notify_error(jsonrpc.RpcError(jsonrpc.RESOURCE_NOT_FOUND,
                                                     f"unknown session {wanted[:100]!r}"))
        else:
            agent.join_on_initialize(peer, session)
    await agent.serve_peer(peer)
