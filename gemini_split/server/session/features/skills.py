"""Agent Skills on the server: the ``activate_skill`` tool and the
"Available Agent Skills" section of the system instruction (issue 29 §2).

The skills are the client's files; the client reads them
(``gemini_split/userfiles/skills.py``) and sends the enabled ones in
``SessionContext.skills``. The request's :func:`skills_step` answers
``activate_skill`` from that — no disk is read here — so it works the same embedded, against
``serve``, through the local daemon and when the server runs the tools
(``--tools server``). Wording and shapes are gemini-cli 0.61's
(``<available_skills>``, ``<activated_skill>``), so skills written for it
read the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gemini_split.protocol import SkillInfo, ToolFailure, ToolSpec

from ..chain import AgentRun, CallTool, Emit, Step
from .tool_hooks import Hooks, answer_here

NAME = "activate_skill"


def spec(skills: Sequence[SkillInfo]) -> ToolSpec:
    """gemini-cli's declaration: ``name`` an enum of the skills' names."""
    names = [s.name for s in skills]
    hint = f" (Available: {', '.join(repr(n) for n in names)})" if names else ""
    return ToolSpec(
        name=NAME,
        description=(f"Activates a specialized agent skill by name{hint}. Returns the skill's instructions "
                     "wrapped in `<activated_skill>` tags. These provide specialized guidance for the current "
                     "task. Use this when you identify a task that matches a skill's description. ONLY use "
                     "names exactly as they appear in the `<available_skills>` section."),
        parameters={
            "type": "object",
            "properties": {"name": {"type": "string", "enum": names, "description": "The name of the skill to activate."}},
            "required": ["name"],
        },
    )


def activate(skills: Sequence[SkillInfo], args: dict[str, Any]) -> tuple[str | None, ToolFailure | None]:
    """The tool's answer: the skill's instructions and files in
    ``<activated_skill>``, or a failure naming the skills there are."""
    name = args.get("name")
    skill = next((s for s in skills if s.name == name), None)
    if skill is None:
        available = ", ".join(s.name for s in skills)
        return None, ToolFailure(code="invalid_parameters",
                                 message=f'Skill "{name}" not found. Available skills are: {available}')
    return (f'<activated_skill name="{skill.name}">\n  <instructions>\n    {skill.body}\n  </instructions>\n\n'
            f"  <available_resources>\n    {skill.resources}\n  </available_resources>\n</activated_skill>"), None


def instruction_section(skills: Sequence[tuple[str, str, str]]) -> str:
    """The system instruction's skills section for ``(name, description,
    location)`` triples; empty without skills."""
    if not skills:
        return ""
    xml = "\n".join(f"  <skill>\n    <name>{n}</name>\n    <description>{d}</description>\n"
                    f"    <location>{loc}</location>\n  </skill>" for n, d, loc in skills)
    return (
        "# Available Agent Skills\n\n"
        "You have access to the following specialized skills. To activate a skill and receive its detailed "
        f"instructions, call the `{NAME}` tool with the skill's name.\n\n"
        f"<available_skills>\n{xml}\n</available_skills>\n\n"
        f"- **Skill Guidance:** Once a skill is activated via `{NAME}`, its instructions and resources are "
        "returned wrapped in `<activated_skill>` tags. You MUST treat the content within `<instructions>` as "
        "expert procedural guidance, prioritizing these specialized rules and workflows over your general "
        "defaults for the duration of the task. You may utilize any listed `<available_resources>` as needed. "
        "Follow this expert guidance strictly while continuing to uphold your core safety and security standards."
    )


def skills_step(run: AgentRun, skills: Sequence[SkillInfo], *, emit: Emit, hooks: Hooks | None) -> Step:
    """The step that answers ``activate_skill`` here, from the skills the
    client sent (with the user's tool hooks around it), and hands every
    other call on."""
    numbers = iter(range(1, 1 << 62))

    def step(call_on: CallTool) -> CallTool:
        async def call(name: str, args: dict[str, Any]) -> tuple[Any, ToolFailure | None]:
            if name != NAME:
                return await call_on(name, args)

            async def activated(args: dict[str, Any]) -> tuple[Any, ToolFailure | None]:
                return activate(skills, args)

            return await answer_here(run, "skill", next(numbers), name, args, activated, emit=emit, hooks=hooks,
                                     shown=lambda args: f"Skill {args.get('name')} activated")

        return call

    return step
