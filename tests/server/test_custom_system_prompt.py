"""Issue 31 §11 on the server: the client's own system prompt
(``SessionContext.system_prompt``) replaces the built-in instruction with
gemini-cli's variables filled in from what the session has — its tools,
the server's, its skills and its sub-agents — and the context files still
appended; the operator's fixed instruction still wins."""

from __future__ import annotations

from gemini_split.protocol import AgentDefinition, SkillInfo, ToolSpec
from gemini_split.protocol.messages import ContextFile, SessionContext
from gemini_split.server.config import ServerConfig
from gemini_split.server.session.features.prompts import instruction_for

PROMPT = ("You are MINE.\n\n\n\n${AgentSkills}\n${SubAgents}\nTools: ${AvailableTools}\n"
          "Write with ${write_file_ToolName}; ${unknown_ToolName} stays.")


def _run(context: SessionContext, **extra) -> dict:
    tools = [ToolSpec(name="read_file", description="Reads."), ToolSpec(name="write_file", description="Writes.")]
    return {"tools": tools, "context": context, **extra}


def _system_instruction(run: dict, config: ServerConfig) -> str | None:
    return instruction_for(config, **run)


def test_the_variables_are_filled_from_the_session_and_the_context_files_appended():
    context = SessionContext(
        system_prompt=PROMPT, files=(ContextFile(path="/p/GEMINI.md", content="Be brief."),),
        skills=(SkillInfo(name="greeter", description="Greets."),),
        agents=(AgentDefinition(name="auditor", description="Finds bugs."),))
    text = _system_instruction(_run(context, server_tools=("google_web_search",)), ServerConfig(model="m"))
    assert text.startswith("You are MINE.\n\n# Available Agent Skills")
    assert "<name>greeter</name>" in text
    assert "# Available Sub-Agents" in text and "<name>auditor</name>" in text
    assert "Tools: - read_file\n- write_file\n- google_web_search\n- activate_skill\n- auditor\n" in text
    assert "Write with write_file; ${unknown_ToolName} stays." in text
    assert "\n\n\n" not in text
    assert text.endswith("Be brief.\n--- End of Context from: /p/GEMINI.md ---\n</project_context>\n</loaded_context>")
    assert "You are gemini-split" not in text


def test_without_skills_sub_agents_or_tools_the_sections_are_empty():
    text = _system_instruction(_run(SessionContext(system_prompt=PROMPT), tools=[]), ServerConfig(model="m"))
    assert text == ("You are MINE.\n\nTools: No tools are currently available.\n"
                    "Write with ${write_file_ToolName}; ${unknown_ToolName} stays.")


def test_the_operators_fixed_instruction_still_wins():
    config = ServerConfig(model="m", system_instruction="OPERATOR")
    assert _system_instruction(_run(SessionContext(system_prompt=PROMPT)), config) == "OPERATOR"
