"""Server-side ``web_fetch`` does not reach the server's own network (issue
35 §4).

Before: on ``serve --server-tools``, ``web_fetch`` ran in the serve process
and returned ``http://127.0.0.1:PORT/admin.txt`` — an internal-only secret —
to the model. Now the server's ``web_fetch`` connects to public addresses
only (checked on the address connected to, every redirect included), plus
what the operator allows with ``--web-fetch-allow``; a client's own
``web_fetch`` still reaches the user's network. The internal service here is
a real HTTP server on loopback."""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gemini_split.tools.tool_host import open_tool_host
from gemini_split.tools.base import ToolFailed
from gemini_split.tools.registry import default_tools
from gemini_split.tools.builtin.web_guard import AddressGuard, blocked_reason
from gemini_split.protocol import GenerateContentRequest, ToolError
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.server.session.features.server_tools import ToolHostSpec

from tests.inprocess import cli
from tests.e2e.test_serve_e2e import API_KEY, _env
from .helpers import finish, hello, make_server_tools, serving

SECRET = "INTERNAL-ADMIN-SECRET-5e1a"


class _Internal(BaseHTTPRequestHandler):
    """An internal-only service: a secret, and a redirect to another port's."""

    redirect_to = ""

    def do_GET(self):
        if self.path == "/admin.txt":
            body, status, headers = SECRET.encode(), 200, [("Content-Type", "text/plain")]
        elif self.path == "/hop":
            body, status, headers = b"", 302, [("Location", self.redirect_to)]
        else:
            body, status, headers = b"public-looking page", 200, [("Content-Type", "text/plain")]
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _serve_http(handler: type) -> tuple[ThreadingHTTPServer, int]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd, httpd.server_address[1]


@pytest.fixture
def internal() -> Iterator[tuple[int, int]]:
    """``(secret_port, hop_port)``: the secret on one loopback port; on the
    other, ``/hop`` redirects to the secret."""
    secret, secret_port = _serve_http(_Internal)
    hop_handler = type("Hop", (_Internal,), {"redirect_to": f"http://127.0.0.1:{secret_port}/admin.txt"})
    hop, hop_port = _serve_http(hop_handler)
    yield secret_port, hop_port
    for httpd in (secret, hop):
        httpd.shutdown()
        httpd.server_close()


def _fetch_call(url: str) -> dict:
    return {"function_calls": [{"name": "web_fetch", "args": {"prompt": f"Summarise {url}"}}]}


def _answers(model: ScriptedModel) -> list[dict]:
    parts = model.requests[-1].contents[-1]["parts"]
    return [p["function_response"]["response"] for p in parts if "function_response" in p]


async def _server_fetch(tmp_path, url: str, **tools_options) -> tuple[dict, list]:
    """A server-tools session (yolo) whose model fetches ``url``: what the
    model was answered, and the events the client saw."""
    model = ScriptedModel([_fetch_call(url), {"text": "done"}])
    tools = make_server_tools(tmp_path / "ws", **tools_options)
    async with serving(model, tools) as (_, address):
        async with hello(address, tools="server", approval_mode="yolo") as (raw, _):
            await raw.send(GenerateContentRequest(prompt="read the admin page"))
            events = await finish(raw)
    return _answers(model)[0], events


async def test_server_side_web_fetch_of_a_loopback_service_is_refused_with_a_clear_error(tmp_path, internal):
    secret_port, _ = internal
    answer, events = await _server_fetch(tmp_path, f"http://127.0.0.1:{secret_port}/admin.txt")
    assert SECRET not in str(answer) and SECRET not in str(events)
    error = answer["error"]
    assert error["code"] == "address_refused"
    assert f"127.0.0.1:{secret_port}/admin.txt was not fetched: 127.0.0.1 is 127.0.0.1, a loopback address" \
        in error["message"]
    assert "--web-fetch-allow" in error["hint"]
    assert [e.error.code for e in events if isinstance(e, ToolError)] == ["address_refused"]


async def test_a_redirect_from_an_allowed_host_to_a_loopback_port_not_allowed_is_refused(tmp_path, internal):
    secret_port, hop_port = internal
    # "localhost" (a name) is allowed; 127.0.0.1 (the redirect's target) is not.
    page, _ = await _server_fetch(tmp_path, f"http://localhost:{hop_port}/page", web_fetch_allow=("localhost",))
    assert "public-looking page" in page["output"]
    answer, _ = await _server_fetch(tmp_path, f"http://localhost:{hop_port}/hop", web_fetch_allow=("localhost",))
    assert SECRET not in str(answer)
    assert answer["error"]["code"] == "address_refused"
    assert "127.0.0.1 is 127.0.0.1, a loopback address" in answer["error"]["message"]


@pytest.mark.parametrize("allow", ["127.0.0.1", "127.0.0.0/8", "::ffff:127.0.0.0/104"])
async def test_the_operators_allow_list_lets_it_through(tmp_path, internal, allow):
    secret_port, hop_port = internal
    answer, _ = await _server_fetch(tmp_path, f"http://127.0.0.1:{hop_port}/hop", web_fetch_allow=(allow,))
    assert SECRET in answer["output"]


async def test_a_clients_own_web_fetch_still_reaches_the_users_network(internal):
    secret_port, _ = internal
    fetch = default_tools().get("web_fetch")
    assert SECRET in await fetch.run({"prompt": f"read http://127.0.0.1:{secret_port}/admin.txt"}, None)


@pytest.mark.parametrize("spelling", [
    "http://127.0.0.1:{port}/admin.txt",
    "http://localhost:{port}/admin.txt",
    "http://LOCALHOST:{port}/admin.txt",
    "http://127.1:{port}/admin.txt",
    "http://2130706433:{port}/admin.txt",
    "http://0x7f000001:{port}/admin.txt",
    "http://0.0.0.0:{port}/admin.txt",
    "http://[::ffff:127.0.0.1]:{port}/admin.txt",
    "http://[::ffff:7f00:1]:{port}/admin.txt",
    "http://[::1]:{port}/admin.txt",
    "http://[::]:{port}/admin.txt",
    "http://user:pw@127.0.0.1:{port}/admin.txt",
    "https://127.0.0.1:{port}/admin.txt",
])
async def test_no_spelling_of_loopback_reaches_the_secret(tmp_path, internal, spelling):
    secret_port, _ = internal
    host = open_tool_host(ToolHostSpec(workspace=tmp_path, approval_mode="yolo"))
    url = spelling.format(port=secret_port)
    with pytest.raises(ToolFailed) as failed:
        await host.registry.get("web_fetch").run({"prompt": f"read {url}"}, None)
    assert failed.value.code in ("address_refused", "invalid_url"), (url, failed.value)
    assert SECRET not in str(failed.value)


@pytest.mark.parametrize("address, kind", [
    ("127.0.0.1", "loopback"), ("10.1.2.3", "private"), ("172.31.0.1", "private"), ("192.168.1.1", "private"),
    ("100.64.0.1", "carrier-grade NAT (shared)"), ("169.254.169.254", "link-local (cloud metadata)"),
    ("0.0.0.0", "unspecified"), ("224.0.0.1", "multicast"), ("255.255.255.255", "reserved"),
    ("::1", "loopback"), ("::", "unspecified"), ("fd00::1", "unique-local (private)"),
    ("fe80::1", "link-local"), ("ff02::1", "multicast"),
    ("::ffff:169.254.169.254", "link-local (cloud metadata) (as IPv6)"),
    ("::ffff:10.0.0.1", "private (as IPv6)"), ("64:ff9b::a00:1", "private (as IPv6)"),
    ("2002:7f00:1::1", "loopback (as IPv6)"),
    ("8.8.8.8", None), ("2001:4860:4860::8888", None), ("::ffff:8.8.8.8", None),
])
def test_what_counts_as_the_servers_own_network(address, kind):
    assert blocked_reason(ipaddress.ip_address(address)) == kind


def test_allow_list_entries_are_addresses_networks_or_host_names():
    guard = AddressGuard(["10.1.0.0/16", "fd00::5", "Wiki.Internal"])
    assert guard.refusal("x", "10.1.2.3") is None and guard.refusal("x", "10.2.0.1") is not None
    assert guard.refusal("x", "fd00::5") is None
    assert guard.refusal("wiki.internal", "192.168.0.9") is None
    assert guard.refusal("other.internal", "192.168.0.9").reason == "private"
    for bad in ("http://wiki", "wiki internal", "10.0.0.0/33", ""):
        with pytest.raises(ValueError, match="--web-fetch-allow"):
            AddressGuard([bad])


def test_serve_refuses_a_bad_allow_list_entry_and_one_without_server_tools(tmp_path):
    env = _env(GEMINI_API_KEY=API_KEY, GEMINI_SPLIT_HOME=str(tmp_path / "home"))
    # unix: server-side tools on a token-less TCP port are refused before the list is read.
    bad = cli(["serve", "--listen", f"unix:{tmp_path}/never.sock", "--server-tools", "--sandbox", "none",
               "--web-fetch-allow", "http://wiki"], environ=env, cwd=tmp_path)
    assert bad.returncode == 2 and "--web-fetch-allow 'http://wiki': expected an address" in bad.stderr
    alone = cli(["serve", "--listen", "127.0.0.1:0", "--web-fetch-allow", "10.0.0.0/8"], environ=env, cwd=tmp_path)
    assert alone.returncode == 2 and "--web-fetch-allow need --server-tools" in alone.stderr


async def test_the_connection_goes_to_the_address_that_was_checked_not_to_the_name_again(internal):
    """No second lookup between the check and the connection (what DNS
    rebinding needs): the backend underneath is handed the checked address."""
    import httpcore
    import httpx

    from gemini_split.tools.builtin.web_guard import GuardedBackend

    secret_port, _ = internal
    asked: list[str] = []

    class Recording(httpcore.TrioBackend):
        async def connect_tcp(self, host, port, **kwargs):
            asked.append(host)
            return await super().connect_tcp(host, port, **kwargs)

    guard = AddressGuard(["127.0.0.1", "::1"])
    transport = httpx.AsyncHTTPTransport(trust_env=False)
    transport._pool = httpcore.AsyncConnectionPool(network_backend=GuardedBackend(guard, Recording()))
    async with httpx.AsyncClient(transport=transport) as client:
        answer = await client.get(f"http://localhost:{secret_port}/admin.txt")
    assert answer.text == SECRET
    assert asked and set(asked) <= {"127.0.0.1", "::1"} and "localhost" not in asked
