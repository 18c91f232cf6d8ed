"""A stdio transport for MCP servers, bounded in memory and time.

The SDK's own stdio client rebuilds its line buffer on every read, so a
50 MB result took 85 s here, and it has no limit on a line. This transport
finds newlines incrementally and holds at most ``max_message_bytes`` of one
message: a longer message is skipped to its end, and the request it answers
(its ``id`` is near the start of the line) gets a JSON-RPC error instead, so
the call fails with a clear message and the server stays usable.

It yields the ``(read_stream, write_stream)`` pair the SDK's ``Client``
takes. The server runs in a session (process group) of its own with the
SDK's minimal environment plus its configured ``env``; on exit its stdin is
closed, then the group gets SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
_GRACE = 2.0
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')


@asynccontextmanager
async def open_stdio_transport(
    command: str,
    args: list[str],
    *,
    env: Mapping[str, str] | None,
    cwd: Path,
    errlog: Any,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
) -> AsyncIterator[tuple[Any, Any]]:
    """Spawn ``command`` and speak MCP's newline-delimited JSON-RPC with it."""
    import anyio
    import mcp_types as types
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage

    process = await trio.lowlevel.open_process(
        [command, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog,
        env={**get_default_environment(), **(env or {})}, cwd=str(cwd), start_new_session=True,
    )
    to_client, read_stream = anyio.create_memory_object_stream[Any](16)
    write_stream, from_client = anyio.create_memory_object_stream[Any](16)

    def parse(line: bytes) -> Any:
        try:
            return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError as exc:
            return exc

    def too_large(prefix: bytes, size: int) -> Any:
        found = _ID.search(prefix)
        if found is None:
            return ValueError(f"the server sent a message over {max_message_bytes} bytes; it was dropped")
        ident = found.group(1).decode("utf-8", "replace")
        error = (b'{"jsonrpc":"2.0","id":' + ident.encode() + b',"error":{"code":-32603,"message":'
                 + f'"the result was larger than {max_message_bytes // (1024 * 1024)} MiB and was not read"'.encode()
                 + b"}}")
        return parse(error)

    async def reader() -> None:
        buffer = bytearray()
        scanned = 0
        skipping: bytes | None = None  # the start of a message being skipped
        skipped = 0
        try:
            async with to_client:
                while True:
                    chunk = await process.stdout.receive_some(256 * 1024)
                    if not chunk:
                        return
                    if skipping is not None:
                        end = chunk.find(b"\n")
                        if end < 0:
                            skipped += len(chunk)
                            continue
                        await to_client.send(too_large(skipping, skipped + end))
                        skipping, chunk = None, chunk[end + 1:]
                    buffer += chunk
                    while True:
                        end = buffer.find(b"\n", scanned)
                        if end < 0:
                            scanned = len(buffer)
                            if len(buffer) > max_message_bytes:
                                skipping, skipped = bytes(buffer[:512]), len(buffer)
                                buffer.clear()
                                scanned = 0
                            break
                        line = bytes(buffer[:end]).strip()
                        del buffer[:end + 1]
                        scanned = 0
                        if line:
                            await to_client.send(parse(line))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, trio.ClosedResourceError, trio.BrokenResourceError):
            return

    async def writer() -> None:
        try:
            async with from_client:
                async for message in from_client:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send_all(data.encode())
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await to_client.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        nursery.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with trio.CancelScope(shield=True):
                await _stop(process)
            nursery.cancel_scope.cancel()


async def _stop(process: trio.Process) -> None:
    """Close stdin, give the server :data:`_GRACE` seconds to leave, then end
    its whole process group: SIGTERM, and SIGKILL a second later."""
    try:
        await process.stdin.aclose()
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    with trio.move_on_after(_GRACE):
        await process.wait()
    for sig, wait in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 1.0)):
        if process.returncode is not None:
            break
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        with trio.move_on_after(wait):
            await process.wait()
    await process.stdout.aclose()
