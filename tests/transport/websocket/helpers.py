"""Shared pieces of the WebSocket tests: a recording echo handler, a token
authenticator, a trustme CA, and a way to start the real server."""

from __future__ import annotations

import atexit
import hmac
import shutil
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import trio

from gemini_split.transport import (
    ConnectionBroken,
    ConnectionClosed,
    MessageStream,
    MessageTooLarge,
    Principal,
    ServeOptions,
    get_transport,
)
from tests.transport.conformance.echo import echo_handler

#: Bounds a hang in any test; a passing test takes well under a second.
DEADLINE = 10

TOKENS = {
    "alice-token": Principal("alice"),
    "alice-second-token": Principal("alice"),
    "bob-token": Principal("bob", ("read",)),
}


def authenticate(token: str | None) -> Principal | None:
    """Constant-time lookup, as a real authenticator must be."""
    found = None
    for known, principal in TOKENS.items():
        if hmac.compare_digest((token or "").encode(), known.encode()):
            found = principal
    return found


@dataclass
class Recorder:
    """An echo handler that remembers who ran and how each connection ended.
    ``whoami`` answers the principal's user id."""

    started: int = 0
    principals: list[Principal | None] = field(default_factory=list)
    endings: list[BaseException] = field(default_factory=list)
    ended: trio.Event = field(default_factory=trio.Event)

    async def __call__(self, stream: MessageStream) -> None:
        self.started += 1
        self.principals.append(stream.principal)
        try:
            while True:
                try:
                    message = await stream.receive()
                except MessageTooLarge as exc:
                    self.endings.append(exc)
                    continue
                if message == "whoami":
                    await stream.send(stream.principal.user_id if stream.principal else "-")
                else:
                    await stream.send(message)
        except (ConnectionClosed, ConnectionBroken) as exc:
            self.endings.append(exc)
        finally:
            self.ended.set()


async def start(nursery, handler=echo_handler, address="ws://127.0.0.1:0", **options) -> str:
    """Start the WebSocket server in ``nursery``; the address to connect to."""
    transport = get_transport(address)
    return await nursery.start(transport.serve, address, handler, ServeOptions(**options))


@cache
def tls_files() -> dict[str, str]:
    """A throwaway CA and a certificate for 127.0.0.1/localhost, as PEM files."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    folder = Path(tempfile.mkdtemp(prefix="gemini-split-ws-tests-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # not left in /tmp
    paths = {name: str(folder / f"{name}.pem") for name in ("ca", "cert", "key")}
    ca.cert_pem.write_to_path(paths["ca"])
    cert.cert_chain_pems[0].write_to_path(paths["cert"])
    cert.private_key_pem.write_to_path(paths["key"])
    return paths


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1].split("/")[0])
