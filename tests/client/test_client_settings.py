"""The client settings the command line resolves, by concern: where to
connect, which session, tools and policy, context. Each part is a frozen
record: a copy made for one connection never changes under another."""

from __future__ import annotations

import pytest

from gemini_split.app import resolve_client_settings
from gemini_split.cli import build_parser
from gemini_split.tools.approval_mode import ApprovalMode
from gemini_split.commands.options_from_args import client_options
from gemini_split.environment import Environment


def _resolve(tmp_path, *argv: str):
    options = client_options(build_parser().parse_args(["--skip-trust", *argv]))
    (tmp_path / "GEMINI.md").write_text("Be brief.\n")
    env = Environment(environ={"GEMINI_SPLIT_HOME": str(tmp_path / "home")}, cwd=tmp_path)
    return resolve_client_settings(options, env)


def test_flags_land_in_the_part_of_their_concern(tmp_path):
    settings = _resolve(tmp_path, "--server", "ws://127.0.0.1:9", "--token", "t", "--reconnect-timeout", "7",
                        "--session-id", "mine", "--model", "gemini-2.5-flash", "--yolo", "--tools", "server")
    assert settings.endpoint.server == "ws://127.0.0.1:9" and settings.endpoint.connect.token == "t"
    assert settings.endpoint.reconnect_timeout == 7
    assert settings.session.new_session_id == "mine" and settings.session.model == "gemini-2.5-flash"
    assert settings.tools.approval_mode is ApprovalMode.YOLO and settings.tools.run_on == "server"
    assert settings.tools.workspace == tmp_path.resolve()
    assert settings.context.message is not None and settings.context.project is not None
    assert [f.path.name for f in settings.context.project.files] == ["GEMINI.md"]


def test_a_copy_with_one_part_changed_leaves_the_original_as_it_was(tmp_path):
    settings = _resolve(tmp_path, "--server", "ws://127.0.0.1:9")
    moved = settings.reaching(server="ws://127.0.0.1:10").choosing(resume="latest").with_tools(
        approval_mode=ApprovalMode.PLAN)
    assert (moved.endpoint.server, moved.session.resume, moved.tools.approval_mode) == \
        ("ws://127.0.0.1:10", "latest", ApprovalMode.PLAN)
    assert (settings.endpoint.server, settings.session.resume, settings.tools.approval_mode) == \
        ("ws://127.0.0.1:9", None, ApprovalMode.DEFAULT)
    assert moved.endpoint.connect is settings.endpoint.connect and moved.context is settings.context
    for part in (settings.endpoint, settings.session, settings.tools, settings.context):
        with pytest.raises(AttributeError):
            setattr(part, part.__struct_fields__[0], None)
