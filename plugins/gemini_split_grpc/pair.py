"""Two ends of an in-process native connection, for the face.

The face (one per ``Chat`` stream) talks to the server's connection handler
exactly as a remote client would, through a pair of
:class:`~gemini_split.memory_pair.MemoryStream` ends. The buffer is small on
purpose: a ``Chat`` client that reads slowly makes the handler's writer
wait, so the session's outbox merges deltas instead of queueing one per
token.
"""

from __future__ import annotations

from gemini_split.memory_pair import MemoryStream, open_memory_pair
from gemini_split.transport import Principal

#: Messages either end may hold unread before the sender waits.
BUFFER = 8


def open_pair(*, peer: str, principal: Principal | None, max_message_size: int) -> tuple[MemoryStream, MemoryStream]:
    """``(client_end, server_end)``; the server end carries ``principal``
    (who the gRPC listener authenticated) and ``peer`` (the gRPC peer)."""
    return open_memory_pair(buffer=BUFFER, client_peer="in-process server", server_peer=peer,
                            client_max=max_message_size, server_max=max_message_size, principal=principal)
