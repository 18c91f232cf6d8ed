"""``gemini-split --server grpc://…``: the command line as a client of a
``gemini.v1`` server (one-shot here; the REPL uses the same stream)."""

from __future__ import annotations

import json
import os
import sys

import pytest

import trustme

from gemini_split.testing.fake_gemini import FakeGemini

from tests.inprocess import cli
from .helpers import ALICE, ServerThread, write_auth_config


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    env.update(extra)
    return env


def _cli(args, tmp_path, **env):
    return cli(args, environ=_env(**env), cwd=tmp_path)


def test_one_shot_over_grpc_prints_the_answer(tmp_path):
    with FakeGemini([{"thought": "hm", "text": "Hello from gRPC.", "chunks": 2}]) as fake:
        with ServerThread(fake) as server:
            address = server.address
            result = _cli(["--server", address, "-p", "hi"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hello from gRPC.\n"


def test_json_output_names_the_grpc_session(tmp_path):
    with FakeGemini() as fake:
        with ServerThread(fake) as server:
            address, service = server.address, server.service
            result = _cli(["--server", address, "-p", "hi", "--output-format", "json"], tmp_path)
            (session_id,) = service.sessions
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["response"] == "Echo: hi" and out["session_id"] == session_id


def test_a_model_the_server_refuses_fails_the_run_with_its_reason(tmp_path):
    from functools import partial

    from gemini_split.server.model.names import check_model_name

    extra = {"check_model": partial(check_model_name, allowed=("gemini-2.5-*",), default="gemini-2.5-flash")}
    with FakeGemini() as fake:
        with ServerThread(fake, extra=extra) as server:
            address = server.address
            result = _cli(["--server", address, "-m", "gemini-1.0-pro", "-p", "hi"], tmp_path)
        assert fake.requests == []
    assert result.returncode != 0
    assert "model 'gemini-1.0-pro' is not allowed on this server" in result.stderr


def test_grpcs_with_a_token_and_the_ca(tmp_path):
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    cert_file, key_file, ca_file = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    ca.cert_pem.write_to_path(str(ca_file))
    auth = write_auth_config(tmp_path / "auth.json")
    with FakeGemini() as fake:
        with ServerThread(fake, tls=(str(cert_file), str(key_file)), auth_config=auth) as server:
            address = server.address.replace("127.0.0.1", "localhost")
            good = _cli(["--server", address, "--ca", str(ca_file), "-p", "hi"], tmp_path,
                              GEMINI_SERVER_TOKEN=ALICE)
            wrong = _cli(["--server", address, "--ca", str(ca_file), "-p", "hi"], tmp_path,
                               GEMINI_SERVER_TOKEN="wrong-token-0123456789")
    assert good.returncode == 0, good.stderr
    assert good.stdout == "Echo: hi\n"
    assert wrong.returncode != 0 and "invalid token" in wrong.stderr


def test_a_server_that_is_not_there_is_a_clear_error(tmp_path):
    result = _cli(["--server", "grpc://127.0.0.1:9", "-p", "hi"], tmp_path)
    assert result.returncode != 0
    assert "could not reach the gRPC server at grpc://127.0.0.1:9" in result.stderr


def test_a_profile_holds_a_grpc_server_and_the_client_uses_it(tmp_path):
    from gemini_split.client.profiles import ServerProfile, profile_store

    profile = ServerProfile.from_address("box", "grpcs://box.example:50051", token_env="BOX_TOKEN")
    assert (profile.address, profile.secure, profile.grpc) == ("grpcs://box.example:50051", True, True)
    assert profile.to_json()["transport"] == "grpc"
    assert ServerProfile.from_json(profile.to_json(), "test") == profile
    home = tmp_path / "home"
    with FakeGemini() as fake:
        with ServerThread(fake) as server:
            added = _cli(["server", "add", "g", server.address], tmp_path, GEMINI_SPLIT_HOME=str(home))
            assert added.returncode == 0, added.stderr
            assert profile_store(home).get("g").address == server.address
            result = _cli(["--server", "g", "-p", "through a profile"], tmp_path, GEMINI_SPLIT_HOME=str(home))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Echo: through a profile\n"


@pytest.mark.timeout(60)
def test_the_repl_talks_to_a_grpc_server_turn_after_turn(tmp_path):
    from tests.ui.repl.pty_driver import ENTER, PtyProcess
    from tests.ui.repl.test_repl import PROMPT, _environ

    work = tmp_path / "work"
    work.mkdir()
    with FakeGemini([{"thought": "Greeting.", "text": "Hello over gRPC."}, {"text": "Second answer."}]) as fake:
        with ServerThread(fake) as server:
            repl = PtyProcess([sys.executable, "-m", "gemini_split", "--server", server.address],
                              env=_environ(tmp_path, NO_COLOR="1"), cwd=str(work), rows=40, cols=110)
            try:
                repl.expect(r"/help for commands", timeout=20)
                repl.expect(PROMPT)
                for prompt, answer in (("hi", r"Hello over gRPC\."), ("and again", r"Second answer\.")):
                    repl.type(prompt)
                    repl.send(ENTER)
                    repl.expect(answer)
                    repl.expect(PROMPT)
                (session,) = server.service.sessions.values()
                assert len(session.history) == 4  # one conversation, two turns
                assert repl.text.count("tools run on the server") == 1  # said once, at the start
            finally:
                repl.close()


@pytest.mark.timeout(60)
def test_ctrl_c_in_the_repl_cancels_the_turn_on_the_grpc_server_and_the_session_goes_on(tmp_path):
    from tests.ui.repl.pty_driver import CTRL_C, ENTER, PtyProcess
    from tests.ui.repl.test_repl import PROMPT, _environ

    work = tmp_path / "work"
    work.mkdir()
    slow = {"text": "tick " * 400, "chunks": 400, "chunk_delay": 0.05}
    with FakeGemini([slow]) as fake:  # then echo
        with ServerThread(fake) as server:
            repl = PtyProcess([sys.executable, "-m", "gemini_split", "--server", server.address],
                              env=_environ(tmp_path, NO_COLOR="1"), cwd=str(work), rows=40, cols=110)
            try:
                repl.expect(r"/help for commands", timeout=20)
                repl.expect(PROMPT)
                repl.type("count slowly")
                repl.send(ENTER)
                repl.expect(r"tick")
                repl.send(CTRL_C)
                repl.expect(r"Cancelled\.")
                repl.expect(PROMPT)
                (session,) = server.service.sessions.values()
                fake.wait_for_requests(lambda rs: rs and not rs[0]["completed"] and rs[0]["chunks_sent"] < 400)
                repl.type("still there?")
                repl.send(ENTER)
                repl.expect(r"Echo: still there\?")
                assert not session.busy
            finally:
                repl.close()


@pytest.mark.timeout(60)
def test_over_grpc_the_client_says_once_that_tools_run_on_the_server_and_its_mcp_servers_are_not_used(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"mcpServers": {
        "time": {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"]},
        "git": {"httpUrl": "http://127.0.0.1:9/mcp"}}}))
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("my project\n")
    with FakeGemini([{"text": "first"}, {"text": "second"}]) as fake:
        with ServerThread(fake) as server:
            result = _cli(["--server", server.address, "-p", "list the files here"], project,
                          GEMINI_SPLIT_HOME=str(home))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "first\n"
    lines = result.stderr.splitlines()
    (tools,) = [line for line in lines if "tools run on the server" in line]
    assert str(project) in tools  # what the user might have expected them to see
    (mcp,) = [line for line in lines if "MCP" in line]
    assert "git, time" in mcp and "not used" in mcp


@pytest.mark.timeout(60)
def test_clear_in_a_repl_over_grpc_does_not_repeat_the_tools_notice(tmp_path):
    from tests.ui.repl.pty_driver import ENTER, PtyProcess
    from tests.ui.repl.test_repl import PROMPT, _environ

    work = tmp_path / "work"
    work.mkdir()
    with FakeGemini([{"text": "One."}, {"text": "Two."}]) as fake:
        with ServerThread(fake) as server:
            repl = PtyProcess([sys.executable, "-m", "gemini_split", "--server", server.address],
                              env=_environ(tmp_path, NO_COLOR="1"), cwd=str(work), rows=40, cols=110)
            try:
                repl.expect(r"/help for commands", timeout=20)
                repl.expect(PROMPT)
                repl.type("hi")
                repl.send(ENTER)
                repl.expect(r"One\.")
                repl.expect(PROMPT)
                repl.type("/clear")
                repl.send(ENTER)
                repl.expect(PROMPT)
                repl.type("again")
                repl.send(ENTER)
                repl.expect(r"Two\.")
                repl.expect(PROMPT)
                assert len(server.service.sessions) == 2  # /clear opened a new session
            finally:
                repl.close()
    assert repl.text.count("tools run on the server") == 1
