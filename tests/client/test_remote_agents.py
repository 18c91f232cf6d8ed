"""Remote (Agent2Agent) sub-agent definitions and credentials on the client
(``gemini_split/userfiles/remote_agents.py``): gemini-cli's dynamic values,
the auth headers, the card's bounds and proxy, read against real HTTP
servers on loopback."""

from __future__ import annotations

import base64
import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gemini_split.userfiles.agents import discover, wire_agents
from gemini_split.userfiles.remote_agents import (
    MAX_CARD_BYTES,
    RemoteAgentError,
    auth_headers,
    fetch_card,
    load_remote,
    resolve_value,
)
from gemini_split.tools.a2a import RemoteAgentTool
from gemini_split.tools.base import ToolFailed

pytestmark = pytest.mark.timeout(30)

CARD = {"name": "Peer", "description": "A peer.", "url": "http://127.0.0.1:9/rpc", "version": "1",
        "capabilities": {"streaming": True}}


@contextmanager
def http_server(handle):
    """A loopback HTTP server whose GETs ``handle(handler)`` answers; yields
    ``(base URL, the paths asked for, with their headers)``."""
    seen: list[tuple[str, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append((self.path, dict(self.headers)))
            status, headers, body = handle(self)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def card_answer(card=CARD):
    return lambda h: (200, {"Content-Type": "application/json"}, json.dumps(card).encode())


# --- dynamic values -----------------------------------------------------------


def test_dynamic_values_read_the_environment_run_a_command_and_unescape_doubled_prefixes(tmp_path):
    env = {"MY_KEY": "k-123", "PATH": "/usr/bin:/bin", "SHELL": "/bin/sh"}
    assert resolve_value("$MY_KEY", env) == "k-123"
    assert resolve_value("$$MY_KEY", env) == "$MY_KEY"
    assert resolve_value("!!echo hi", env) == "!echo hi"
    assert resolve_value("sk-literal", env) == "sk-literal"
    assert resolve_value("!printf '  from-cmd \\n'", env) == "from-cmd"


def test_a_missing_variable_or_failing_command_is_named_and_no_secret_is_shown():
    env = {"SHELL": "/bin/sh", "PATH": "/usr/bin:/bin"}
    with pytest.raises(ToolFailed, match="environment variable NOPE_KEY the agent's auth names is not set"):
        resolve_value("$NOPE_KEY", env)
    with pytest.raises(ToolFailed, match=r"auth command \(false\) exited with status 1"):
        resolve_value("!false", env)
    with pytest.raises(ToolFailed, match=r"auth command \(true\) printed nothing"):
        resolve_value("!true", env)


def test_each_auth_type_gives_gemini_clis_header():
    env = {"K": "key", "U": "user", "P": "pa:ss"}
    url = "http://agent.example/rpc"
    assert auth_headers({"type": "apiKey", "key": "$K"}, url, env) == {"X-API-Key": "key"}
    assert auth_headers({"type": "apiKey", "key": "$K", "name": "X-Token"}, url, env) == {"X-Token": "key"}
    assert auth_headers({"type": "http", "scheme": "Bearer", "token": "$K"}, url, env) == {
        "Authorization": "Bearer key"}
    basic = auth_headers({"type": "http", "scheme": "Basic", "username": "$U", "password": "$P"}, url, env)
    assert basic == {"Authorization": "Basic " + base64.b64encode(b"user:pa:ss").decode()}
    assert auth_headers({"type": "http", "scheme": "Digest", "value": "raw"}, url, env) == {
        "Authorization": "Digest raw"}


def test_google_credentials_are_sent_to_google_hosts_only():
    with pytest.raises(ToolFailed, match=r"only to \*\.googleapis\.com and \*\.run\.app, not agent\.example"):
        auth_headers({"type": "google-credentials"}, "https://agent.example/rpc", {})


# --- definitions and cards ----------------------------------------------------------


def test_a_card_url_is_read_and_its_description_and_endpoint_are_what_the_server_gets(tmp_path):
    with http_server(card_answer()) as (base, seen):
        definition, remote = load_remote(tmp_path / "a.md", {
            "kind": "remote", "name": "peer", "agent_card_url": f"{base}/card",
            "auth": {"type": "apiKey", "key": "$SECRET_KEY"}})
    assert definition.kind == "remote" and definition.url == CARD["url"]
    assert definition.description == "A peer." and remote.streaming
    assert "SECRET_KEY" not in json.dumps(__import__("msgspec").to_builtins(definition))
    assert [p for p, _ in seen] == ["/card"] and "X-API-Key" not in seen[0][1]  # the card: no credentials


def test_a_card_behind_auth_is_read_again_with_the_credentials(tmp_path):
    def guarded(h):
        if h.headers.get("X-API-Key") != "sesame":
            return 401, {}, b"no"
        return card_answer()(h)

    with http_server(guarded) as (base, seen):
        definition, _ = load_remote(tmp_path / "a.md", {
            "kind": "remote", "name": "peer", "agent_card_url": f"{base}/card",
            "auth": {"type": "apiKey", "key": "$K"}}, environ={"K": "sesame"})
    assert definition.description == "A peer." and len(seen) == 2


@pytest.mark.parametrize("auth, header", [
    ({"type": "apiKey", "key": "$K"}, "X-API-Key"),
    ({"type": "apiKey", "key": "$K", "name": "X-Custom-Secret"}, "X-Custom-Secret"),
    ({"type": "http", "scheme": "Bearer", "token": "$K"}, "Authorization"),
])
def test_no_credential_follows_a_redirect_to_another_origin(tmp_path, auth, header):
    """T4-6: the card asks for credentials (401), and once they come it
    redirects to another origin: what reaches that origin carries none."""
    with http_server(card_answer()) as (elsewhere, seen_there):
        def guarded(h):
            if not h.headers.get(header):
                return 401, {}, b"no"
            return 302, {"Location": f"{elsewhere}/card"}, b""

        with http_server(guarded) as (base, seen_here):
            definition, _ = load_remote(tmp_path / "a.md", {
                "kind": "remote", "name": "peer", "agent_card_url": f"{base}/card", "auth": auth},
                environ={"K": "sesame-CANARY"})
    assert definition.description == "A peer."
    assert any("sesame-CANARY" in v for v in seen_here[-1][1].values())  # its own origin got them
    assert seen_there and all("sesame-CANARY" not in json.dumps(h) for _, h in seen_there), seen_there


def test_a_card_too_large_or_redirecting_forever_or_elsewhere_is_refused_naming_the_field(tmp_path):
    path = tmp_path / "a.md"
    with http_server(lambda h: (200, {}, b"{" + b" " * MAX_CARD_BYTES + b"}")) as (base, _):
        with pytest.raises(RemoteAgentError, match=rf"{path}: field 'agent_card_url': .* larger than"):
            fetch_card(path, f"{base}/card", None)
    with http_server(lambda h: (302, {"Location": h.path + "x"}, b"")) as (base, _):
        with pytest.raises(RemoteAgentError, match=r"field 'agent_card_url': more than 3 redirects"):
            fetch_card(path, f"{base}/card", None)
    with http_server(lambda h: (302, {"Location": "file:///etc/passwd"}, b"")) as (base, _):
        with pytest.raises(RemoteAgentError, match=r"field 'agent_card_url'"):
            fetch_card(path, f"{base}/card", None)


def test_a_card_trickled_or_never_sent_fails_within_the_card_timeout_naming_the_field(tmp_path, monkeypatch):
    """The card's limit is on all of it, not each read: a peer that sends a
    byte every 0.2 s is cut off after ``CARD_TIMEOUT`` (1 s here), as is one
    that never answers."""
    import socket
    import time

    import gemini_split.userfiles.remote_agents as remote_agents

    monkeypatch.setattr(remote_agents, "CARD_TIMEOUT", 1.0)
    stop = threading.Event()

    def trickle(server: socket.socket) -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
            while not stop.wait(0.2):
                try:
                    conn.sendall(b" ")
                except OSError:
                    return

    path = tmp_path / "a.md"
    with socket.create_server(("127.0.0.1", 0)) as server:
        thread = threading.Thread(target=trickle, args=(server,), daemon=True)
        thread.start()
        base = f"http://127.0.0.1:{server.getsockname()[1]}"
        try:
            began = time.monotonic()
            with pytest.raises(RemoteAgentError, match=rf"{path}: field 'agent_card_url': the agent card at "
                                                       rf"{base}/card was not read within 1 seconds"):
                fetch_card(path, f"{base}/card", None)
            assert time.monotonic() - began < 2.5
        finally:
            stop.set()
            thread.join(5)
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts (backlog), never answers
        began = time.monotonic()
        with pytest.raises(RemoteAgentError, match=r"was not read within 1 seconds"):
            fetch_card(path, f"http://127.0.0.1:{silent.getsockname()[1]}/card", None)
        assert time.monotonic() - began < 2.5


def test_general_proxy_carries_the_card_request(tmp_path):
    # The proxy is asked for the absolute URL of a host that does not exist.
    with http_server(card_answer()) as (proxy, seen):
        card = fetch_card(tmp_path / "a.md", "http://agent.invalid/card", None, proxy=proxy)
    assert card["name"] == "Peer" and seen[0][0] == "http://agent.invalid/card"


def test_a_list_file_loads_its_good_remote_agents_and_reports_the_bad_one(tmp_path):
    inline = json.dumps(CARD)
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "many.md").write_text(
        "---\n"
        f"- kind: remote\n  name: one\n  agent_card_json: '{inline}'\n"
        f"- kind: remote\n  name: two\n  agent_card_json: '{{\"url\": \"gopher://x\"}}'\n"
        f"- kind: remote\n  name: three\n  agent_card_json: '{inline}'\n  timeout_mins: 0.5\n"
        "---\n")
    found = discover([("user", tmp_path / "agents")], with_builtins=False)
    assert [a.name for a in found.agents] == ["one", "three"]
    (warning,) = found.warnings
    assert "many.md: field 'agent_card_json': the agent card's 'url' must be an http:// or https:// URL" in warning
    assert found.get("three").definition.timeout_mins == 0.5
    assert [d.name for d in wire_agents(found)] == ["one", "three"]
    assert wire_agents(found, remote=False) == ()  # --tools server: no client to call them


def test_a_list_mixing_local_and_remote_agents_is_refused(tmp_path):
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "mixed.md").write_text(
        f"---\n- kind: remote\n  name: one\n  agent_card_json: '{json.dumps(CARD)}'\n"
        "- name: two\n  description: local\n---\n")
    found = discover([("user", tmp_path / "agents")], with_builtins=False)
    assert found.agents == [] and "a list may hold remote agents only" in found.warnings[0]


def test_the_approval_question_names_the_agent_and_its_url(tmp_path):
    definition, remote = load_remote(tmp_path / "a.md", {"kind": "remote", "name": "peer",
                                                        "agent_card_json": json.dumps(CARD)})
    tool = RemoteAgentTool(definition, remote)
    text = tool.describe({"query": "do the thing"}, None)
    assert "remote agent peer" in text and CARD["url"] in text and "do the thing" in text
    assert tool.kind.value == "network"
    assert "auth" not in repr(remote)


@pytest.mark.parametrize("card, said", [
    ({"url": "http://a.example/rpc", "description": 42, "name": ["x"]}, None),
    ({"supportedInterfaces": "JSONRPC"}, "the agent card has no 'url'"),
    ({"url": 7}, "the agent card has no 'url'"),
    ([1, 2], "the agent card is not a JSON object"),
])
def test_a_hostile_card_is_refused_or_read_safely(tmp_path, card, said):
    meta = {"kind": "remote", "name": "peer", "agent_card_json": json.dumps(card)}
    if said is None:
        definition, _ = load_remote(tmp_path / "a.md", meta)
        assert definition.description == "Remote agent peer (Agent2Agent) at http://a.example/rpc."
        return
    with pytest.raises(RemoteAgentError, match=f"field 'agent_card_json': {said}"):
        load_remote(tmp_path / "a.md", meta)


@pytest.mark.parametrize("version, sent", [("1.4", ["scout"]), ("1.5", ["scout", "peer"])])
async def test_remote_definitions_go_only_to_a_server_that_can_ask_for_them(tmp_path, version, sent):
    """A 1.4 server (a stand-in answering the handshake as one) would refuse
    ``kind: remote``: it is sent the local agents only."""
    import trio

    from gemini_split.tools.approval import ApprovalPolicy
    from gemini_split.tools.executor import ToolExecutor
    from gemini_split.client.protocol_client import ProtocolClient
    from gemini_split.tools.registry import default_tools
    from gemini_split.tools.workspace import Workspace
    from gemini_split.protocol import AgentDefinition, Connected, SessionContext, decode, encode
    from gemini_split.transport.memory_pair import open_memory_pair

    remote, _ = load_remote(tmp_path / "a.md", {"kind": "remote", "name": "peer",
                                                "agent_card_json": json.dumps(CARD)})
    context = SessionContext(agents=(AgentDefinition(name="scout", description="Scouts."), remote))
    ours, theirs = open_memory_pair(buffer=64, client_peer="s", server_peer="c", client_max=1 << 20,
                                    server_max=1 << 20)
    client = ProtocolClient(ours, ToolExecutor(default_tools(), Workspace(tmp_path), ApprovalPolicy()))
    got = []
    async with trio.open_nursery() as nursery:
        async def server():
            await theirs.receive()  # hello
            await theirs.send(encode(Connected(id="c", timestamp=1, protocol_version=version, session_id="s-1")))
            while True:
                message = decode(await theirs.receive())
                if message.TYPE == "generate_content_request":
                    got.append(message)
                    nursery.cancel_scope.cancel()

        nursery.start_soon(server)
        await client.handshake()
        nursery.start_soon(client.run)
        await client.run_turn("hi", context=context)
    (request,) = got
    assert [a.name for a in request.context.agents] == sent
