"""The REPL's ``/skills list|enable|disable|reload|link`` (gemini-cli's), issue 29 §2.

``enable`` / ``disable`` edit ``skills.disabled`` in the user's
settings.json (``--scope workspace``: the project's), as gemini-cli does,
and take effect at the next prompt: the skills are read again and the
session's context (which carries them to the server) is rebuilt. ``link
PATH`` links the skills of a local directory into the skills directory
(as ``gemini-split skills link``), after asking.
"""

from __future__ import annotations

from rich.text import Text

from pathlib import Path

from gemini_split.userfiles.skills import (
    SkillError,
    consent_text,
    find_installable,
    install_dir,
    link,
    set_disabled,
    settings_path,
)
from gemini_split.ui.safe_text import visible

from ..command_context import CommandContext
from .context_reload import reload_in_worker


USAGE = ("/skills list [nodesc] | enable NAME | disable NAME [--scope user|workspace] | reload | "
         "link PATH [--scope user|workspace]")


class SkillsUsage(Exception):
    """A /skills line that does not parse; the text is the usage."""


async def skills_command(repl: CommandContext, args: list[str]) -> None:
    """Run ``/skills ARGS``. Raises :class:`SkillsUsage` for bad arguments."""
    action, rest = (args[0], args[1:]) if args else ("list", [])
    if action == "list" and set(rest) <= {"nodesc", "--nodesc", "all", "--all"}:
        _list(repl, describe=not ({"nodesc", "--nodesc"} & set(rest)))
        return
    if action in ("reload", "refresh") and not rest:
        if not await reload_in_worker(repl):
            return
        count = len(repl.settings.context.skills.enabled()) if repl.settings.context.skills is not None else 0
        repl.console.print(Text(f"Skills reloaded: {count} enabled; the next prompt offers them.", style="green"))
        return
    if action in ("enable", "disable") and (target := name_and_scope(rest)) is not None:
        await _set(repl, target[0], disabled=action == "disable", scope=target[1])
        return
    if action == "link" and (target := name_and_scope(rest)) is not None:
        await _link(repl, target[0], target[1])
        return
    raise SkillsUsage(USAGE)


def name_and_scope(rest: list[str]) -> tuple[str, str] | None:
    """``NAME [--scope user|workspace]`` (the arguments of ``enable`` and
    ``disable``, here and in ``/agents``) as ``(name, scope)``; None when
    they are not that shape."""
    if len(rest) == 1:
        return rest[0], "user"
    if len(rest) == 3 and rest[1] == "--scope" and rest[2] in ("user", "workspace"):
        return rest[0], rest[2]
    return None


def _list(repl: CommandContext, *, describe: bool) -> None:
    found = repl.settings.context.skills
    if found is None or not found.skills:
        repl.console.print(Text("No skills (SKILL.md directories in ~/.gemini/skills, ~/.agents/skills, "
                                ".gemini/skills or .agents/skills).", style="dim"))
        return
    for s in found.skills:
        line = Text.assemble((visible(s.name, newlines=False), "bold"),
                             (" [disabled]" if s.disabled else " [enabled]", "dim" if s.disabled else "green"),
                             (f" ({s.scope})", "dim"))
        if describe:
            line.append(f"  {visible(s.description, newlines=False)}")
        line.append(f"  {visible(str(s.path), newlines=False)}", style="dim")
        repl.console.print(line)


async def _set(repl: CommandContext, name: str, *, disabled: bool, scope: str) -> None:
    found = repl.settings.context.skills
    if found is None or found.get(name) is None:
        known = ", ".join(s.name for s in found.skills) if found is not None and found.skills else "none"
        raise SkillsUsage(f"no skill named {name!r} (skills: {known})")
    path = settings_path(scope, repl.env.config_dir, repl.env.cwd)
    try:
        changed = set_disabled(path, name, disabled)
    except (SkillError, OSError) as exc:
        raise SkillsUsage(f"not changed: {exc}") from None
    if not await reload_in_worker(repl):
        return
    word = "disabled" if disabled else "enabled"
    if not changed:
        repl.console.print(Text(f'Skill "{name}" is already {word} in {path}.', style="dim"))
    else:
        repl.console.print(Text(f'Skill "{name}" {word} in {scope} settings ({path}).', style="green"))
    now = repl.settings.context.skills.get(name) if repl.settings.context.skills is not None else None
    if now is not None and now.disabled != disabled:
        repl.console.print(Text(f'Note: another settings file still has "{name}" '
                                f'{"enabled" if now.disabled is False else "disabled"}.', style="yellow"))


async def _link(repl: CommandContext, path: str, scope: str) -> None:
    """gemini-cli's ``/skills link PATH [--scope]``: what will be linked is
    shown and asked about, then the skills are read again."""
    source = Path(path).expanduser()
    source = source if source.is_absolute() else repl.env.cwd / source
    try:
        found = find_installable(source)
    except SkillError as exc:
        raise SkillsUsage(f"Failed to link skills: {exc}") from None
    for line in found.warnings:
        repl.print_usage(visible(line, newlines=False))
    if not found.skills:
        raise SkillsUsage(f'Failed to link skills: No valid skills found in "{source}". '
                          "Ensure a SKILL.md file exists with valid frontmatter.")
    target = install_dir(scope, repl.env.config_dir, repl.env.cwd)
    repl.console.print(Text(visible(consent_text(found, source, target, link=True))), soft_wrap=True)
    choice = await repl.asker.read_choice("Do you want to continue?", [("yes", "Yes"), ("no", "No")], 1)
    if choice != "yes":
        repl.console.print(Text("Skill linking cancelled by user.", style="dim"))
        return
    try:
        link(found, target)
    except (SkillError, OSError) as exc:
        raise SkillsUsage(f"Failed to link skills: {exc}") from None
    repl.console.print(Text(f'Successfully linked skills from "{visible(path, newlines=False)}" ({scope}).',
                            style="green"), soft_wrap=True)
    await reload_in_worker(repl)
