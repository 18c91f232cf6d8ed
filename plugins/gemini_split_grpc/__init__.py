"""Seed 001's gRPC service, ``gemini.v1.GeminiService/Chat``, as a face on
the same sessions as the native protocol: ``grpc://HOST:PORT`` and
``grpcs://HOST:PORT`` (TLS).

Installed with an extra (``pip install 'gemini-split[grpc]'``: grpcio and
protobuf) and registered through the ``gemini_split.transports`` entry
points ``grpc`` and ``grpcs`` like any third-party transport, so the core
never imports it and stays light.

Two ends, one translation
-------------------------

``serve(address, handler, options)``
    Serves ``GeminiService/Chat`` (:mod:`.server`). Each ``Chat`` stream is
    one native connection to ``handler`` (the server's
    ``AgentService.handle_connection``) over an in-process pair of streams:
    the face (:mod:`.face`) speaks the native protocol on its end and
    translates at its edge — ``StartRequest`` becomes ``hello`` (resuming
    ``session_id``), each prompt a ``generate_content_request``, and the
    session's events become ``SessionInfo`` / ``TextResponse`` /
    ``ThoughtResponse`` / ``ToolStarted`` / ``ToolEnded`` / ``ErrorResponse``.
    So a gRPC session is an ordinary session of the server: same store,
    same owner rules, resumable from any transport.

``open_connection("grpc://…")``
    The other way round (:mod:`.client`): a :class:`MessageStream` whose
    native messages go to a ``gemini.v1`` server as ``StartRequest`` and
    prompts, and whose ``ServerResponse`` messages come back as native
    events, so ``gemini-split --server grpc://…`` (REPL and ``-p``) talks to
    any server of seed 001's service — ours or another.

The seed's stream has no end-of-turn message. This implementation marks the
end of every turn with ``SessionInfo`` again (the same ``session_id``: "the
session is ready for the next prompt"); see ``docs/grpc.md``.

Generated code
--------------

``gemini/v1/gemini.proto`` is the seed's file with additions only (its
package, names and field numbers unchanged; new fields and ``ServerResponse``
members take new numbers, so a client generated from the seed's copy, kept in
tests/faces/grpc/seed/, still parses every response). ``gemini_pb2.py`` / ``.pyi`` are generated from it with
``grpcio-tools`` and committed, so the extra needs no compiler and
importing costs no compile step; ``tests/faces/grpc/test_generated_code.py``
regenerates them and fails when the committed copy is stale (regenerate
with the command in its docstring). No ``_pb2_grpc.py`` is committed: the
one method is bound by its path with grpcio's generic handlers, which needs
no generated stub (and no import rewriting).

Why grpcio, on its own threads
------------------------------

grpcio is the reference implementation, kept current by Google: HTTP/2,
TLS, keepalive, message-size limits, a cap on concurrent streams and
deadlines are done in its C core and interoperate with every other
language's gRPC. Its servers cannot run on the Trio loop, so the listener
runs on grpcio's own thread pool and crosses into Trio at one place
(:mod:`.server`): a stream's trio task is started with
``trio.from_thread.run_sync`` (the run's ``TrioToken``), responses travel
through a Trio memory channel and are taken by the gRPC thread in batches
(one crossing per batch, not per message), requests are pulled with
``trio.to_thread`` under the listener's own ``CapacityLimiter``, and the
end of an RPC (client cancel, deadline, broken connection) cancels the
stream's task through ``TrioToken.run_sync_soon``.

purerpc speaks gRPC on Trio natively but has had no release since 2022 and
is pure Python over h2. Measured here on one stream of 20,000 small
``TextResponse`` messages to a grpcio client (the same machine, the same
run): purerpc 5,100-6,200 messages/s and 4-5 ms to the first; grpcio
bridged one message per crossing 3,500-3,600/s, batched (as shipped)
6,300-6,900/s and 2-3 ms to the first; purerpc also logged "Got exception
in main dispatch loop" on every shutdown. So grpcio: as fast, maintained,
and the C core's limits for free.
"""

from __future__ import annotations

import os
from typing import Any

import trio

from gemini_split.errors import ConfigurationError
from gemini_split.transport import (
    ConnectionHandler,
    ConnectOptions,
    MessageStream,
    ServeOptions,
    Transport,
)

# grpcio (1.85 here) installs fork handlers by default. A process that runs
# gRPC threads and forks a child that runs Python before exec — every tool
# command does, to register its process group (``preexec_fn``) — then sees
# that child die of SIGSEGV now and then (measured: 11 of 300 commands).
# This process never forks to keep using gRPC in the child, so the handlers
# are switched off, before grpc is first imported (this package is imported
# before any of its modules).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

INSTALL_HINT = "install the gRPC extra: pip install 'gemini-split[grpc]'"


class GrpcTransport(Transport):
    name = "gRPC"

    async def open_connection(self, address: str, options: ConnectOptions) -> MessageStream:
        _require_grpcio()
        from .client import open_grpc_stream

        return await open_grpc_stream(address, options)

    async def serve(
        self,
        address: str,
        handler: ConnectionHandler,
        options: ServeOptions,
        *,
        task_status: Any = trio.TASK_STATUS_IGNORED,
    ) -> None:
        # Imported here so a client never pays for the server's modules.
        _require_grpcio()
        from .server import serve

        await serve(address, handler, options, task_status=task_status)


def _require_grpcio() -> None:
    """Raise ConfigurationError saying how to install grpcio when it is not."""
    try:
        import google.protobuf  # noqa: F401
        import grpc  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(f"grpc:// needs grpcio and protobuf ({exc}); {INSTALL_HINT}") from None


transport = GrpcTransport()
