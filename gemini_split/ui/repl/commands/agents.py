"""The REPL's ``/agents list|enable|disable|reload`` (gemini-cli's), issue 32.

``enable`` / ``disable`` set ``agents.overrides.<name>.enabled`` in the
user's settings.json (``--scope workspace``: the project's), gemini-cli's
shape, and take effect at the next prompt: the definitions are read again
and the session's context (which carries the enabled ones to the server)
is rebuilt. The settings file is edited by ``userfiles/agents.set_enabled``,
as ``/skills enable`` edits its own key (the shared settings editor was not
on main when this landed).
"""

from __future__ import annotations

from rich.text import Text

from gemini_split.userfiles.agents import AgentError, set_enabled
from gemini_split.userfiles.skills import settings_path
from gemini_split.ui.safe_text import visible

from ..command_context import CommandContext
from .context_reload import reload_in_worker
from .skills import name_and_scope


USAGE = "/agents list [nodesc] | enable NAME | disable NAME [--scope user|workspace] | reload"


class AgentsUsage(Exception):
    """A /agents line that does not parse; the text is the usage."""


async def agents_command(repl: CommandContext, args: list[str]) -> None:
    """Run ``/agents ARGS``. Raises :class:`AgentsUsage` for bad arguments."""
    action, rest = (args[0], args[1:]) if args else ("list", [])
    if action == "list" and set(rest) <= {"nodesc", "--nodesc"}:
        _list(repl, describe=not rest)
        return
    if action in ("reload", "refresh") and not rest:
        if not await reload_in_worker(repl):
            return
        found = repl.settings.context.agents
        count = len(found.enabled()) if found is not None else 0
        repl.console.print(Text(f"Agents reloaded: {count} enabled; the next prompt offers them.", style="green"))
        return
    if action in ("enable", "disable") and (target := name_and_scope(rest)) is not None:
        await _set(repl, target[0], enabled=action == "enable", scope=target[1])
        return
    raise AgentsUsage(USAGE)


def _list(repl: CommandContext, *, describe: bool) -> None:
    found = repl.settings.context.agents
    loaded = repl.settings.loaded_settings
    if loaded is not None and not loaded.merged.experimental.enable_agents:
        repl.console.print(Text("No sub-agents: experimental.enableAgents is false in your settings.", style="dim"))
        return
    if found is None or not found.agents:
        repl.console.print(Text("No sub-agents (Markdown files in ~/.gemini/agents or .gemini/agents).", style="dim"))
        return
    for a in found.agents:
        d = a.definition
        line = Text.assemble((visible(a.name, newlines=False), "bold"),
                             (" [enabled]" if a.enabled else " [disabled]", "green" if a.enabled else "dim"),
                             (f" ({a.scope})", "dim"))
        limits = [f"model {d.model}" if d.model else "", f"{d.max_turns} turns" if d.max_turns else "",
                  f"tools {', '.join(d.tools)}" if d.tools is not None else "all tools"]
        if d.kind == "remote":  # (1.5) an Agent2Agent agent this client calls
            limits = [f"remote (Agent2Agent) {d.url}"]
        line.append(f"  {visible(' · '.join(x for x in limits if x), newlines=False)}", style="dim")
        if describe:
            line.append(f"\n    {visible(d.description, newlines=False)[:300]}")
        if a.scope != "builtin":
            line.append(f"\n    {visible(d.source, newlines=False)}", style="dim")
        repl.console.print(line)
        for note in a.notes:
            repl.console.print(Text(f"    ! {visible(note, newlines=False)}", style="yellow"))
        if d.kind == "remote" and repl.settings.tools.run_on != "client":
            repl.console.print(Text("    ! not offered in this session: its tools run on the server (--tools "
                                    "server), and a remote agent is called by the client that runs them (its "
                                    "credentials never leave this machine)", style="yellow"))
    for warning in found.warnings:
        repl.console.print(Text(f"! {visible(warning, newlines=False)}", style="yellow"))


async def _set(repl: CommandContext, name: str, *, enabled: bool, scope: str) -> None:
    found = repl.settings.context.agents
    if found is None or found.get(name) is None:
        known = ", ".join(a.name for a in found.agents) if found is not None and found.agents else "none"
        raise AgentsUsage(f"no sub-agent named {name!r} (agents: {known})")
    path = settings_path(scope, repl.env.config_dir, repl.env.cwd)
    try:
        changed = set_enabled(path, name, enabled)
    except (AgentError, OSError) as exc:
        raise AgentsUsage(f"not changed: {exc}") from None
    if not await reload_in_worker(repl):
        return
    word = "enabled" if enabled else "disabled"
    if not changed:
        repl.console.print(Text(f'Sub-agent "{name}" is already {word} in {path}.', style="dim"))
    else:
        repl.console.print(Text(f'Sub-agent "{name}" {word} in {scope} settings ({path}); '
                                "the next prompt offers the change.", style="green"))
    now = repl.settings.context.agents.get(name) if repl.settings.context.agents is not None else None
    if now is not None and now.enabled != enabled:
        repl.console.print(Text(f'Note: another settings file still has "{name}" '
                                f'{"enabled" if now.enabled else "disabled"}.', style="yellow"))
