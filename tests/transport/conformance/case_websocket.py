"""The conformance suite over WebSocket: plain ``ws`` and ``wss`` with a
trustme certificate authority."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from functools import cache
from pathlib import Path

import msgspec

from gemini_split.testing.conformance import TransportCase, echo_handler
from gemini_split.transport import ConnectOptions, ServeOptions, default_registry


@cache
def tls_files() -> dict[str, str]:
    """A throwaway CA and a certificate for 127.0.0.1, written to PEM files."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    folder = Path(tempfile.mkdtemp(prefix="gemini-split-wss-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # not left in /tmp
    files = {"ca": folder / "ca.pem", "cert": folder / "cert.pem", "key": folder / "key.pem"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    cert.cert_chain_pems[0].write_to_path(str(files["cert"]))
    cert.private_key_pem.write_to_path(str(files["key"]))
    return {name: str(path) for name, path in files.items()}


async def _start_ws(nursery, options: ServeOptions) -> str:
    transport = default_registry().get("ws")
    return await nursery.start(transport.serve, "ws://127.0.0.1:0", echo_handler, options)


async def _start_wss(nursery, options: ServeOptions) -> str:
    files = tls_files()
    options = msgspec.structs.replace(options, tls_cert=files["cert"], tls_key=files["key"])
    transport = default_registry().get("wss")
    return await nursery.start(transport.serve, "wss://127.0.0.1:0", echo_handler, options)


def _wss_options() -> ConnectOptions:
    return ConnectOptions(ca_file=tls_files()["ca"])


CASES = [
    TransportCase("ws", _start_ws),
    TransportCase("wss", _start_wss, connect_options=_wss_options),
]
