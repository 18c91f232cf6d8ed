"""A real ``serve`` on loopback without tokens, with and without ``--web``:
a page on another local origin (a dev server on http://localhost:3000) or a
DNS-rebinding page cannot act as a client; gemini-split itself, which sends
no Origin, connects as before (issue 33 §5)."""

from __future__ import annotations

import socket

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from gemini_split.protocol import PROTOCOL_VERSION
from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY, client, daemon
from tests.e2e.test_web_serve import exchange, http_of, page, sign_in, web_server  # noqa: F401 (a fixture)

pytestmark = pytest.mark.timeout(90)  # a server and clients start on a loaded 2-core machine

HELLO = {"type": "hello", "id": "h", "client": "web", "protocol_version": PROTOCOL_VERSION}


def _refused(address: str, **kwargs) -> int:
    with pytest.raises(InvalidStatus) as caught:
        connect(address, open_timeout=10, **kwargs)
    return caught.value.response.status_code


def _raw_upgrade(port: int, host: str, *, origin: str) -> int:
    """The status answering a browser's upgrade that says ``Host: host``
    (a page whose name was pointed at 127.0.0.1)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall((f"GET / HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                   f"Origin: {origin}\r\n\r\n").encode())
        return int(s.recv(4096).split(b" ", 2)[1])


@pytest.mark.parametrize("web", [False, True], ids=["serve", "serve --web"])
def test_another_local_origin_is_refused_and_native_clients_connect_as_before(tmp_path, page, web):
    with FakeGemini(api_key=API_KEY) as fake, \
            (web_server(tmp_path, fake, page) if web else daemon(tmp_path, fake)) as (_, address):
        port = address.rsplit(":", 1)[1]
        signed = sign_in(address, tmp_path) if web else None
        headers = {"Cookie": f"gs_browser={signed.cookie}"} if signed else {}
        dev_server = _refused(address, origin="http://localhost:3000", additional_headers=headers)
        rebinding = _raw_upgrade(int(port), f"attacker.example:{port}", origin=f"http://attacker.example:{port}")
        page_via_rebinding = httpx.get(f"{http_of(address)}/", headers={"Host": f"attacker.example:{port}"})
        with connect(address, open_timeout=10) as ws:  # no Origin: as gemini-split, editors, scripts
            native = exchange(ws, HELLO, "connected")["type"]
        done = client(["--server", address, "-p", "hi"], cwd=tmp_path)
        if web:
            with connect(signed.socket_url(address), open_timeout=10, origin=http_of(address),
                         additional_headers=headers) as ws:
                own_page = exchange(ws, HELLO, "connected")["type"]
    assert dev_server == 403 and rebinding == 421
    assert page_via_rebinding.status_code == 421 and "attacker.example" in page_via_rebinding.text
    assert native == "connected" and done.returncode == 0, done.stderr
    if web:
        assert own_page == "connected"
