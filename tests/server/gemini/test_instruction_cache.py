"""The system instruction is built once per content, never served stale."""

from __future__ import annotations

import pytest

from gemini_split.protocol import ToolSpec
from gemini_split.protocol.messages import ContextFile, SessionContext
from gemini_split.server.config import ServerConfig
from gemini_split.server.session.features.prompts import ContextBlock, PromptFacts, instruction_for, system_instruction

TOOLS = [ToolSpec(name="read_file", description="Reads a file.", parameters={"type": "object"})]


def run(context: SessionContext | None, tools=TOOLS) -> dict:
    return {"context": context, "tools": list(tools)}


def _system_instruction(run: dict, config: ServerConfig) -> str | None:
    return instruction_for(config, **run)


def context(memory: str, mode: str = "default") -> SessionContext:
    return SessionContext(files=(ContextFile(path="/w/GEMINI.md", content=memory),), file_names=("GEMINI.md",),
                          approval_mode=mode, workspace_dirs=("/w",), interactive=True)


@pytest.mark.timeout(10)
def test_sessions_with_the_same_content_share_one_built_instruction():
    config = ServerConfig(model="m")
    first = _system_instruction(run(context("Use tabs.")), config)
    again = _system_instruction(run(context("Use tabs.")), config)
    assert again is first  # built once (and its hash computed once, for the model's config cache)
    expected = system_instruction(PromptFacts(
        tools=[("read_file", "Reads a file.")], approval_mode="default", workspace_dirs=["/w"], interactive=True,
        context_files=[ContextBlock("/w/GEMINI.md", "project", "Use tabs.")], context_file_names=["GEMINI.md"]))
    assert first == expected


@pytest.mark.timeout(10)
def test_any_change_of_content_gives_the_new_instruction():
    config = ServerConfig(model="m")
    base = _system_instruction(run(context("Use tabs.")), config)
    assert "Use spaces." in _system_instruction(run(context("Use spaces.")), config)
    assert _system_instruction(run(context("Use tabs.", mode="yolo")), config) != base
    assert _system_instruction(run(context("Use tabs."), tools=[]), config) != base
    assert _system_instruction(run(None), config) == system_instruction(PromptFacts(
        tools=[("read_file", "Reads a file.")]))
    assert _system_instruction(run(context("x")), ServerConfig(model="m", system_instruction="fixed")) == "fixed"
