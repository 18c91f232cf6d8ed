"""``--approval-mode reject_dangerous`` and ``auto_approve`` on the command
line (seed 001's names): the first never asks — not even in the REPL —
and refuses what would need approval, client-side and server-side; the
second is yolo."""

from __future__ import annotations

from gemini_split.app import resolve_approval_mode
from gemini_split.cli import build_parser
from gemini_split.tools.approval_mode import ApprovalMode
from gemini_split.client.connect import ToolSettings, server_tool_choice
from gemini_split.commands.options_from_args import client_options
from gemini_split.environment import Environment
from gemini_split.options import ClientOptions


def _settings(tmp_path, *argv, environ=None):
    from gemini_split.app import resolve_client_settings

    options = client_options(build_parser().parse_args(list(argv)))
    env = Environment(environ=environ or {}, cwd=tmp_path)
    return options, env, resolve_client_settings(options, env)


def test_auto_approve_is_yolo_and_reject_dangerous_is_default_with_nobody_asked(tmp_path):
    options = ClientOptions(approval_mode="auto_approve")
    assert resolve_approval_mode(options, Environment(environ={}, cwd=tmp_path)) is ApprovalMode.YOLO
    _, _, settings = _settings(tmp_path, "--server", "ws://127.0.0.1:9", "--approval-mode", "reject_dangerous",
                               "--tools", "server")
    assert settings.tools.approval_mode is ApprovalMode.DEFAULT and settings.tools.reject_dangerous
    assert server_tool_choice(settings.tools, can_ask=True).approval_mode == "reject_dangerous"
    _, _, settings = _settings(tmp_path, "--server", "ws://127.0.0.1:9", "--tools", "server",
                               environ={"GEMINI_APPROVAL_MODE": "reject-dangerous"})
    assert settings.tools.reject_dangerous
    _, _, settings = _settings(tmp_path, "--server", "ws://127.0.0.1:9", "--tools", "server", "--yolo")
    assert not settings.tools.reject_dangerous and server_tool_choice(settings.tools, can_ask=False).approval_mode == "yolo"
    # default with nobody to ask is left to the server (which then refuses, never asks)
    _, _, settings = _settings(tmp_path, "--server", "ws://127.0.0.1:9", "--tools", "server")
    assert server_tool_choice(settings.tools, can_ask=False).approval_mode is None
    assert server_tool_choice(settings.tools, can_ask=True).approval_mode == "default"
    assert server_tool_choice(ToolSettings(workspace=tmp_path), can_ask=True) is None


# --- what a user sees: the seed's names on a real one-shot run ----------------

from gemini_split.testing.fake_gemini import FakeGemini  # noqa: E402

from tests.e2e.compat.helpers import API_KEY, Sandbox  # noqa: E402


def _responses(fake):
    return [part["functionResponse"]["response"]
            for request in fake.requests for content in request["body"]["contents"]
            for part in content.get("parts", []) if "functionResponse" in part]


def test_on_the_command_line_auto_approve_writes_and_reject_dangerous_refuses(tmp_path):
    box = Sandbox(tmp_path).setup()
    write = {"function_calls": [{"name": "write_file", "args": {"file_path": "x.txt", "content": "x\n"}}]}
    with FakeGemini(script=[write, {"text": "done"}], api_key=API_KEY) as fake:
        result = box.run(["-p", "write it", "--approval-mode", "reject_dangerous"], fake=fake)
        (refused,) = _responses(fake)
    assert result.status == 0, result.stderr
    assert not (box.project / "x.txt").exists()
    assert refused["error"]["code"] == "refused"
    with FakeGemini(script=[write, {"text": "done"}], api_key=API_KEY) as fake:
        result = box.run(["-p", "write it", "--approval-mode", "auto_approve"], fake=fake)
    assert result.status == 0, result.stderr
    assert (box.project / "x.txt").read_text() == "x\n"
