"""Plan mode against a real ``serve --server-tools`` process with ``--tools
server``: the server's tool host keeps the session's plans (beside its
workspace, out of every command's sight), asks the attached clients for
the plan's approval with gemini-cli's choices (the REPL under a pty shows
it), switches its own mode to the one picked — within ``serve
--max-approval-mode`` — and tells every client (``approval_mode_changed``:
the REPL's toolbar follows). The fake Gemini server's requests show what
the model was offered and told at each turn."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY, daemon
from tests.ui.repl.pty_driver import ENTER, PtyProcess
from tests.ui.repl.test_repl import PROMPT, _environ
from .helpers import unix_listener

pytestmark = pytest.mark.timeout(120)

PLAN = "# Add x\n\n1. Write x.txt\n"
WRITE_PLAN = {"function_calls": [{"name": "write_file", "args": {"file_path": "feature-x.md", "content": PLAN}}]}
EXIT = {"function_calls": [{"name": "exit_plan_mode", "args": {"plan_filename": "feature-x.md"}}]}
WRITE_X = {"function_calls": [{"name": "write_file", "args": {"file_path": "x.txt", "content": "x\n"}}]}


def _declared(request) -> set[str]:
    return {d["name"] for t in request["body"].get("tools", []) for d in t.get("functionDeclarations", [])}


def _model_calls(fake: FakeGemini) -> list:
    return [r for r in fake.requests if r["action"].endswith("GenerateContent")]


def _responses(fake: FakeGemini, name: str) -> list[dict]:
    return [p["functionResponse"]["response"] for r in _model_calls(fake)
            for p in r["body"]["contents"][-1].get("parts", [])
            if p.get("functionResponse", {}).get("name") == name]


def _repl(tmp_path, address, *args: str) -> PtyProcess:
    client_dir = tmp_path / "client"
    client_dir.mkdir(exist_ok=True)
    return PtyProcess([sys.executable, "-m", "gemini_split", "--server", address, "--tools", "server", *args],
                      env=_environ(tmp_path, NO_COLOR="1"), cwd=str(client_dir), rows=40, cols=110)


def test_the_server_asks_the_repl_to_approve_its_plan_and_switches_its_tools(tmp_path):
    root = tmp_path / "workspaces"
    options = ("--workspace-root", str(root), "--sandbox", "none", "--server-tools")
    with FakeGemini(script=[WRITE_PLAN, EXIT, WRITE_X, {"text": "implemented"}], api_key=API_KEY) as fake, \
            unix_listener() as listen, daemon(tmp_path, fake, *listen, *options) as (_proc, address):
        repl = _repl(tmp_path, address, "--approval-mode", "plan")
        try:
            repl.expect(PROMPT, timeout=30)
            repl.expect(r"approval plan")
            repl.type("add x")
            repl.send(ENTER)
            repl.expect(r"Plan: feature-x\.md", timeout=30)
            repl.expect(r"1 Write x\.txt")
            repl.expect(r"❯ 3\. No, keep planning")
            repl.send("2")  # Yes, manually accept edits: default
            repl.expect(r"✓ plan approved: approval mode default")
            repl.expect(r"Plan approved\. Switching to Default mode \(edits will require confirmation\)\.", timeout=30)
            repl.expect(r"Allow write_file: x\.txt\?", timeout=30)  # default mode asks, over the wire
            repl.send("1")
            repl.expect(r"implemented", timeout=30)
            repl.expect(PROMPT)
            repl.expect(r"approval default")
        finally:
            repl.close()
    (workspace,) = [p for p in root.iterdir() if not p.name.startswith(".")]
    assert (workspace / "x.txt").read_text() == "x\n"
    assert not (workspace / "feature-x.md").exists()
    (plan,) = (root / ".plans").glob("*/feature-x.md")  # beside the workspace, not in it
    assert plan.read_text() == PLAN
    calls = _model_calls(fake)
    assert "exit_plan_mode" in _declared(calls[0]) and "run_shell_command" not in _declared(calls[0])
    assert "run_shell_command" in _declared(calls[2]) and "exit_plan_mode" not in _declared(calls[2])


def test_a_switch_beyond_the_servers_cap_falls_back_to_default(tmp_path):
    options = ("--workspace-root", str(tmp_path / "ws"), "--sandbox", "none", "--server-tools",
               "--max-approval-mode", "default")
    with FakeGemini(script=[WRITE_PLAN, EXIT, {"text": "ok"}], api_key=API_KEY) as fake, \
            unix_listener() as listen, daemon(tmp_path, fake, *listen, *options) as (_proc, address):
        repl = _repl(tmp_path, address, "--approval-mode", "plan")
        try:
            repl.expect(PROMPT, timeout=30)
            repl.type("add x")
            repl.send(ENTER)
            repl.expect(r"❯ 3\. No, keep planning", timeout=30)
            repl.send("1")  # auto_edit: above this server's cap
            repl.expect(r"ok", timeout=30)
            repl.expect(PROMPT)
            repl.expect(r"approval default")
        finally:
            repl.close()
    (answer,) = _responses(fake, "exit_plan_mode")
    assert answer["output"].startswith("Plan approved. Switching to Default mode (edits will require confirmation). "
                                       "(auto_edit is not allowed here: approval mode auto_edit is not allowed on "
                                       "this server (at most default))")


def test_plan_in_the_repl_switches_the_servers_tools_before_the_next_prompt(tmp_path):
    options = ("--workspace-root", str(tmp_path / "ws"), "--sandbox", "none", "--server-tools")
    with FakeGemini(script=[{"text": "one"}, {"text": "two"}], api_key=API_KEY) as fake, \
            unix_listener() as listen, daemon(tmp_path, fake, *listen, *options) as (_proc, address):
        repl = _repl(tmp_path, address)
        try:
            repl.expect(PROMPT, timeout=30)
            repl.type("first")
            repl.send(ENTER)
            repl.expect(r"one", timeout=30)
            repl.expect(PROMPT)
            repl.type("/plan second")
            repl.send(ENTER)
            repl.expect(r"Switched to Plan Mode\.")
            repl.expect(r"two", timeout=30)
            repl.expect(PROMPT)
        finally:
            repl.close()
    first, second = _model_calls(fake)
    assert "run_shell_command" in _declared(first) and "exit_plan_mode" not in _declared(first)
    assert "run_shell_command" not in _declared(second) and "exit_plan_mode" in _declared(second)
    system = "".join(p["text"] for p in second["body"]["systemInstruction"]["parts"])
    assert "# Active Approval Mode: Plan" in system


def test_a_one_shot_client_is_nobody_to_approve_a_plan_the_server_asks_about(tmp_path):
    """A one-shot client asking for plan mode on the server: the plan's
    approval is asked of the attached clients that can answer, as any
    server-side approval; with none, it is not approved (a person attached
    later answers the next one), never approved for nobody."""
    root = tmp_path / "ws"
    options = ("--workspace-root", str(root), "--sandbox", "none", "--server-tools")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(HOME=str(tmp_path), GEMINI_SPLIT_HOME=str(tmp_path / "home"))
    with FakeGemini(script=[WRITE_PLAN, EXIT, WRITE_X, {"text": "done"}], api_key=API_KEY) as fake, \
            unix_listener() as listen, daemon(tmp_path, fake, *listen, *options) as (_proc, address):
        done = subprocess.run([sys.executable, "-m", "gemini_split", "--server", address, "--tools", "server",
                               "--approval-mode", "plan", "-p", "add x"], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    (answer,) = _responses(fake, "exit_plan_mode")
    assert answer["error"]["code"] == "no_user_present"
    assert answer["error"]["message"].startswith("The plan was not approved: no attached client can answer")
    assert answer["error"]["message"].endswith("You are still in Plan Mode.")
    (refused,) = _responses(fake, "write_file")[1:]
    assert refused["error"]["code"] == "refused"
    (workspace,) = [p for p in root.iterdir() if not p.name.startswith(".")]
    assert not (workspace / "x.txt").exists()


def test_against_serve_with_the_clients_own_tools_the_plan_is_the_clients(tmp_path):
    """The tools run on the client (the default): the plan is written in
    the client's plans directory, and the approval switches the server's
    running request (``tool_discovery.approval_mode``)."""
    from gemini_split.tools.plans import project_hash

    client_dir = tmp_path / "client"
    client_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(HOME=str(tmp_path), GEMINI_SPLIT_HOME=str(tmp_path / "home"), GEMINI_CLI_TRUST_WORKSPACE="true")
    with FakeGemini(script=[WRITE_PLAN, EXIT, WRITE_X, {"text": "done"}], api_key=API_KEY) as fake, \
            unix_listener() as listen, daemon(tmp_path, fake, *listen) as (_proc, address):
        done = subprocess.run([sys.executable, "-m", "gemini_split", "--server", address, "--approval-mode", "plan",
                               "-p", "add x"], env=env, cwd=client_dir, capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    (plan,) = (tmp_path / "home" / "tmp" / project_hash(client_dir.resolve())).glob("*/plans/feature-x.md")
    assert plan.read_text() == PLAN
    assert (client_dir / "x.txt").read_text() == "x\n"
    (answer,) = _responses(fake, "exit_plan_mode")
    assert answer["output"].startswith("Plan approved. Switching to YOLO mode")
