"""The REPL's slash commands and their Tab completion.

Every command is a coroutine ``handler(repl, args)`` in :data:`COMMANDS`;
``repl`` is the REPL as a command sees it
(:class:`~gemini_split.ui.repl.command_context.CommandContext`), never the
REPL's own class. Bad arguments raise :class:`CommandUsage` whose text is
the usage line the REPL prints; nothing a user types ends in a traceback.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from rich.table import Table
from rich.text import Text

from gemini_split.app import settings_for
from gemini_split.tools.approval import ApprovalMode, Decision
from gemini_split.client.probe import measure_latency, probe
from gemini_split.client.profiles import make_profile, profile_table
from gemini_split.client.protocol_client import RequestFailed
from gemini_split.tools import ide
from gemini_split.tools.base import ToolContext, ToolFailed
from gemini_split.tools.builtin.session_tools import SaveMemoryTool
from gemini_split.errors import ConfigurationError
from gemini_split.model_aliases import BUILT_IN_ALIASES, persist_model_name, resolve_model_name, settings_aliases
from gemini_split.policy.rules import MODES
from gemini_split.userfiles.settings_edit import set_setting
from gemini_split.ui.command_expansion import CommandFailed, load_commands, run_custom_command
from gemini_split.ui.follow import named
from gemini_split.ui.references import complete_reference
from gemini_split.ui.safe_text import visible

from .command_context import CommandContext, CommandUsage, QuitRepl
from .commands import plan, project_init
from .commands.agents import AgentsUsage, agents_command
from .commands.clipboard import copy_text
from .commands.context_reload import reload_in_worker
from .commands.conversation import ChatStore, resumed_context, share
from .commands.directory import DirectoryRefused, directory_command
from .commands.mcp_auth import mcp_auth
from .commands.rewind import rewind_menu
from .commands.settings_list import effective_settings, settings_files
from .commands.skills import SkillsUsage, skills_command
from .prompt_input import LineReader, NEWLINE_KEYS
from .transcript import history_lines

#: Offered by Tab after ``/model``; any name the server accepts works.
KNOWN_MODELS = ("gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite", "auto", "pro", "flash", "flash-lite", "set")

IDE_ACTIONS = ("status", "enable", "disable", "install")
MODEL_USAGE = "/model [NAME] | /model set NAME [--persist] | /model manage"
SERVER_ADD_USAGE = "/server add NAME URL [--token T | --token-env VAR] [--ca FILE] [--insecure]"


Handler = Callable[[CommandContext, list[str]], Awaitable[None]]


@dataclass(frozen=True)
class Command:
    name: str
    usage: str
    summary: str
    handler: Handler
    #: Words Tab offers for the first argument.
    arguments: Callable[[CommandContext], Iterable[str]] | None = None
    #: Words Tab offers for the second argument, given the first.
    then: Callable[[CommandContext, str], Iterable[str]] | None = None
    #: The handler gets the rest of the line as typed (one argument, quotes
    #: and all: a prompt), not split into words.
    raw: bool = False


# --- handlers --------------------------------------------------------------------


async def _help(repl: CommandContext, args: list[str]) -> None:
    table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
    for command in COMMANDS.values():
        table.add_row(Text(command.usage, style="bold"), command.summary)
    custom = getattr(repl, "custom_commands", None)
    for name, cmd in (custom.commands.items() if custom is not None else ()):
        table.add_row(Text(f"{name} [ARGS]", style="bold"), Text(visible(cmd.description, newlines=False)
                                                                 + f" ({cmd.scope} command)"))
    for name, description in _mcp_prompt_rows(repl):
        table.add_row(Text(f"{visible(name, newlines=False)} [ARGS]", style="bold"), Text(description))
    repl.console.print(table)
    repl.console.print(Text(
        f"\nKeys: Enter sends · {NEWLINE_KEYS} inserts a newline · Tab completes · "
        "Ctrl-C cancels a running turn (clears the line at the prompt) · Ctrl-D quits · "
        "Shift+Tab cycles the approval mode · Ctrl+Y turns yolo on or off · Ctrl-T shows the last thought in full · "
        "Ctrl+G (or Ctrl+X) edits the prompt in your editor (general.preferredEditor, $VISUAL, $EDITOR).\n"
        "Text typed while an answer streams waits for the next prompt; with Enter it is sent when the turn ends.\n"
        "Start a message with // to send a line that begins with /.\n"
        "@path attaches a file or a directory's files (Tab completes; .gitignore and the workspace apply).\n"
        "!command runs a command here and gives its output to the model with your next message; "
        "! on an empty line toggles shell mode.", style="dim"))


async def _quit(repl: CommandContext, args: list[str]) -> None:
    """Leave; ``--delete`` deletes this session on the server first (as
    gemini-cli's ``/quit --delete``: no trace left of it)."""
    if args not in ([], ["--delete"]):
        raise CommandUsage("/quit [--delete]")
    if not args:
        raise QuitRepl()
    connected = repl.require_client().connected
    assert connected is not None
    stats = repl.stats
    # A connection cannot delete its own session: leave it for an empty
    # one (a session never prompted is never stored), then delete it.
    if not await repl.reconnect(None, "leaving the session to delete it"):
        raise CommandUsage("the session was not deleted: no new connection to the server")
    try:
        await repl.require_client().delete_session(connected.session_id)
    except RequestFailed as exc:
        raise CommandUsage(f"the session was not deleted: {exc}") from None
    repl.console.print(Text(f"Deleted session {visible(connected.session_id)}.", style="green"))
    raise QuitRepl(deleted=stats)


async def _clear(repl: CommandContext, args: list[str]) -> None:
    _no_args(args, "/clear")
    await repl.reconnect(None, "new conversation")


def _tools_actions(repl: CommandContext) -> Iterable[str]:
    return ("desc", "nodesc")


async def _tools(repl: CommandContext, args: list[str]) -> None:
    """The tools, with a one-line summary; ``desc`` (``descriptions``) the
    whole description the model reads, ``nodesc`` (``nodescriptions``) none."""
    if args not in ([], ["desc"], ["descriptions"], ["nodesc"], ["nodescriptions"]):
        raise CommandUsage("/tools [desc|nodesc]")
    detail = "full" if args and args[0].startswith("desc") else ("none" if args else "summary")
    client = repl.require_client()
    policy = client.executor.policy
    table = Table(box=None, padding=(0, 2, 0, 0))
    table.add_column("tool", style="bold")
    table.add_column("kind")
    table.add_column("approval")
    if detail != "none":
        table.add_column("what it does")
    room = max(20, repl.console.width - 45)
    for tool in client.executor.registry:
        decision = policy.decide(tool, {})
        asks = "asks first" if decision is Decision.ASK else ("runs" if decision is Decision.ALLOW else "refused")
        summary = tool.description.strip().split("\n")[0]
        if detail == "full":
            table.add_row(tool.name, tool.kind.value, asks, Text(visible(tool.description.strip())))
        elif detail == "summary":
            table.add_row(tool.name, tool.kind.value, asks,
                          summary if len(summary) <= room else summary[:room - 1] + "…")
        else:
            table.add_row(tool.name, tool.kind.value, asks)
    repl.console.print(table)
    repl.console.print(Text(f"workspace: {client.executor.workspace.root}", style="dim"))
    if repl.asker.grants:
        granted = "; ".join(g.describe() for g in repl.asker.grants)
        repl.console.print(Text(f"granted this session: {granted} (/permissions revokes)", style="dim"))


async def _permissions(repl: CommandContext, args: list[str]) -> None:
    usage = "/permissions [revoke N|all] | trust [DIR]"
    if args[:1] == ["trust"]:  # gemini-cli's: a folder's trust level, chosen from a menu
        from .commands.trust import trust_command  # lazy_imports.EDGES

        await trust_command(repl, args[1:])
        return
    client = repl.require_client()
    policy = client.executor.policy
    grants = repl.asker.grants
    if args:
        if args[0] != "revoke" or len(args) != 2:
            raise CommandUsage(usage)
        if args[1] == "all":
            chosen = list(grants)
        elif args[1].isdigit() and 1 <= int(args[1]) <= len(grants):
            chosen = [grants[int(args[1]) - 1]]
        else:
            raise CommandUsage(f"no grant {args[1]!r}: /permissions lists them, numbered" if grants
                               else "nothing granted this session")
        for grant in chosen:
            grant.revoke(policy)
            grants.remove(grant)
            repl.console.print(Text(f"Revoked: {grant.describe()} will ask again.", style="green"))
        return
    repl.console.print(Text.assemble(("approval mode: ", ""), (repl.approval_mode.value, "bold"),
                                     ("  (Shift+Tab or /approval-mode changes it)", "dim")))
    if policy.allowed_tools:
        repl.console.print("allowed by --allowed-tools: " + ", ".join(policy.allowed_tools), markup=False)
    if not grants:
        repl.console.print(Text("Nothing granted this session: every answer so far was once only.", style="dim"))
        return
    repl.console.print(Text("Granted this session (answered \"always\"):", style="bold"))
    for i, grant in enumerate(grants, 1):
        repl.console.print(Text(f"  {i}. {grant.describe()} run without asking"))
    repl.console.print(Text("/permissions revoke N (or all) takes one back.", style="dim"))


def _permission_actions(repl: CommandContext) -> Iterable[str]:
    return ["revoke", "trust"]


#: Input tokens a model reads at most; every Gemini 2.x model has 1M.
CONTEXT_WINDOW = 1_048_576


def _stats_actions(repl: CommandContext) -> Iterable[str]:
    return ("session", "model", "tools")


async def _stats(repl: CommandContext, args: list[str]) -> None:
    """gemini-cli's /stats: ``session`` (the default), ``model`` (per
    model: requests, errors, latency, tokens) or ``tools`` (per tool: calls,
    success rate, average duration, and the user's decisions)."""
    if args not in ([], ["session"], ["model"], ["tools"]):
        raise CommandUsage("/stats [session|model|tools]")
    if args == ["model"]:
        _stats_model(repl)
        return
    if args == ["tools"]:
        _stats_tools(repl)
        return

    st = repl.stats
    u = st.usage
    share = st.last_prompt_tokens / CONTEXT_WINDOW * 100
    context = (f"{st.last_prompt_tokens:,} tokens, {share:.1f}% of the model's {CONTEXT_WINDOW:,}"
               if st.last_turn_single_call else
               f"at most {st.last_prompt_tokens:,} tokens, {share:.1f}% of the model's {CONTEXT_WINDOW:,} "
               "(the last turn made several model calls; their inputs are summed)")
    tokens = (f"{u.prompt_tokens:,} in · {u.output_tokens:,} out · {u.thinking_tokens:,} thinking · "
              f"{u.cached_tokens:,} cached · {u.total_tokens:,} total")
    if not st.usage_reported:
        tokens = context = "not reported by the server"
    rows = [
        ("session", f"{st.wall_time()} · {st.turns} turn{'s' * (st.turns != 1)} · "
                    f"{st.tool_calls} tool call{'s' * (st.tool_calls != 1)} · {st.model_time:.1f} s answering"),
        ("tokens", tokens if st.turns else "nothing sent yet"),
        ("context", context if st.turns else "nothing sent yet"),
        ("model", repl.model or "the server default"),
    ]
    if st.agents:  # (1.4) split per agent: the main agent is what the sub-agents did not spend
        sub_tokens = sum(row[3].total_tokens for row in st.agents.values())
        sub_calls = sum(row[2] for row in st.agents.values())
        rows.append(("main agent", f"{max(0, st.tool_calls - sub_calls):,} tool calls · "
                                   f"{max(0, u.total_tokens - sub_tokens):,} tokens"))
        for name, (runs, turns, calls, usage) in sorted(st.agents.items()):
            rows.append((f"↳ {name}", f"{runs} run{'s' * (runs != 1)} · {turns} turns · {calls:,} tool calls · "
                                      f"{usage.total_tokens:,} tokens"))
    _print_rows(repl, rows)


def _stats_model(repl: CommandContext) -> None:
    """gemini-cli's "Model Stats For Nerds": a column per model."""
    runs = [r for r in repl.stats.by_model.values() if r.api.requests or r.usage.total_tokens]
    if not runs:
        repl.console.print(Text("No API calls have been made in this session.", style="dim"))
        return
    table = Table(title="Model Stats For Nerds", title_justify="left", box=None, padding=(0, 2, 0, 0))
    table.add_column("Metric")
    for run in runs:
        table.add_column(visible(run.model, newlines=False), justify="right")

    def row(label: str, value: Callable[[Any], str]) -> None:
        table.add_row(label, *(value(r) for r in runs))

    def errors(r: Any) -> str:
        share = r.api.errors / r.api.requests * 100 if r.api.requests else 0.0
        return f"{r.api.errors:,} ({share:.1f}%)"

    table.add_row(Text("API", style="bold"))
    row("Requests", lambda r: f"{r.api.requests:,}")
    row("Errors", errors)
    row("Avg Latency", lambda r: _duration(r.api.latency_ms / r.api.requests if r.api.requests else 0))
    table.add_row("")
    table.add_row(Text("Tokens", style="bold"))
    row("Total", lambda r: f"{r.usage.total_tokens:,}")
    row("  ↳ Input", lambda r: f"{max(0, r.usage.prompt_tokens - r.usage.cached_tokens):,}")
    row("  ↳ Cache Reads", lambda r: f"{r.usage.cached_tokens:,} ({_share(r.usage.cached_tokens, r.usage.prompt_tokens)})")
    row("  ↳ Thoughts", lambda r: f"{r.usage.thinking_tokens:,}")
    row("  ↳ Tool", lambda r: f"{getattr(r.usage, 'tool_tokens', 0):,}")
    row("  ↳ Output", lambda r: f"{r.usage.output_tokens:,}")
    repl.console.print(table)


def _stats_tools(repl: CommandContext) -> None:
    """gemini-cli's "Tool Stats For Nerds": a row per tool called."""
    tools: dict[str, Any] = {}
    for run in repl.stats.by_model.values():
        for name, t in run.tools.items():
            total = tools.setdefault(name, {"count": 0, "success": 0, "duration_ms": 0, "accept": 0, "reject": 0})
            total["count"] += t.count
            total["success"] += t.success
            total["duration_ms"] += t.duration_ms
            total["accept"] += t.decisions.get("accept", 0)
            total["reject"] += t.decisions.get("reject", 0)
    tools = {name: t for name, t in tools.items() if t["count"]}
    if not tools:
        repl.console.print(Text("No tool calls have been made in this session.", style="dim"))
        return
    table = Table(title="Tool Stats For Nerds", title_justify="left", box=None, padding=(0, 2, 0, 0))
    table.add_column("Tool Name")
    table.add_column("Calls", justify="right")
    table.add_column("Success Rate", justify="right")
    table.add_column("Avg Duration", justify="right")
    for name, t in sorted(tools.items()):
        table.add_row(visible(name, newlines=False), f"{t['count']:,}", _share(t["success"], t["count"]),
                      _duration(t["duration_ms"] / t["count"]))
    repl.console.print(table)
    accepted = sum(t["accept"] for t in tools.values())
    rejected = sum(t["reject"] for t in tools.values())
    reviewed = accepted + rejected
    _print_rows(repl, [
        ("User Decision Summary", ""),
        ("Total Reviewed Suggestions:", f"{reviewed:,}"),
        (" » Accepted:", f"{accepted:,}"),
        (" » Rejected:", f"{rejected:,}"),
        (" Overall Agreement Rate:", _share(accepted, reviewed) if reviewed else "--"),
    ])


def _share(part: float, whole: float) -> str:
    return f"{part / whole * 100:.1f}%" if whole else "0.0%"


def _duration(ms: float) -> str:
    """As gemini-cli's formatDuration: ``0s``, ``850ms``, ``1.2s``, ``1h 2m 5s``."""
    if ms <= 0:
        return "0s"
    if ms < 1000:
        return f"{round(ms)}ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return " ".join(f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n) or "0s"


async def _copy(repl: CommandContext, args: list[str]) -> None:
    _no_args(args, "/copy")
    if not repl.last_answer.strip():
        raise CommandUsage("nothing to copy yet: /copy copies the model's last answer")

    how = copy_text(repl.last_answer, repl.env.stdout, repl.env.environ)
    repl.console.print(Text(f"Copied the last answer ({len(repl.last_answer):,} characters) {how}.",
                            style="green"))


async def _output(repl: CommandContext, args: list[str]) -> None:
    tools = repl.last_tools
    if len(args) > 1 or (args and not args[0].isdigit()):
        raise CommandUsage("/output [N]")
    if not tools:
        raise CommandUsage("the last turn ran no tool: /output shows a tool call's whole output")
    if not args and len(tools) > 1:
        for i, call in enumerate(tools, 1):
            repl.console.print(Text.assemble(f"{i}. ", call.header("", "dim"),
                                             (f"  {len(call.all_lines())} lines", "dim")))
        repl.console.print(Text("/output N shows one in full.", style="dim"))
        return
    index = int(args[0]) if args else 1
    if not 1 <= index <= len(tools):
        raise CommandUsage(f"/output N, with N from 1 to {len(tools)}")
    call = tools[index - 1]
    repl.console.print(call.header("output", "bold"))
    for line in call.all_lines():
        repl.console.print(Text(visible(line)), soft_wrap=True)


async def _compress(repl: CommandContext, args: list[str]) -> None:
    """The server compresses the session's history (the same code as its
    automatic compression); every attached client sees the line."""
    _no_args(args, "/compress")
    repl.console.print(Text("Asking the model for a summary of the older turns…", style="dim"))
    try:
        await repl.run_turn("", compress=True)
    except RequestFailed as exc:
        raise CommandUsage(str(exc)) from None


async def _rewind(repl: CommandContext, args: list[str]) -> None:
    """gemini-cli's ``/rewind`` (also Esc twice on an empty prompt): back to
    before an earlier prompt — the conversation, the agent's file edits, or
    both (``ui/rewind_menu.py``)."""
    _no_args(args, "/rewind")

    await rewind_menu(repl)


async def _init(repl: CommandContext, args: list[str]) -> None:
    """gemini-cli's ``/init``: the model writes a GEMINI.md for the project
    (an existing one is left alone)."""
    _no_args(args, "/init")

    if repl.settings.tools.run_on == "server":
        raise CommandUsage("/init writes GEMINI.md where your files are; with --tools server the files are on "
                           "the server: ask the model to write it there")
    workspace = repl.settings.tools.workspace
    try:
        created = project_init.start(workspace)
    except OSError as exc:
        raise CommandUsage(f"cannot create GEMINI.md in {workspace}: {exc.strerror or exc}") from None
    if not created:
        repl.console.print(Text(project_init.EXISTS))
        return
    repl.console.print(Text(project_init.CREATED, style="dim"))
    await repl.run_turn(project_init.PROMPT, carry_context=False)


_CHAT_USAGE = "/chat save TAG | resume TAG | list | delete TAG | share [FILE.md|FILE.json]"


def _chat_actions(repl: CommandContext) -> Iterable[str]:
    return ("save", "resume", "list", "delete", "share")


async def _chat(repl: CommandContext, args: list[str]) -> None:
    store = ChatStore(repl.env.config_dir / "chats")
    if args == ["list"]:
        saved = store.list()
        if not saved:
            repl.console.print(Text(f"No saved chats (they go in {store.directory}).", style="dim"))
        for tag, when, count in saved:
            repl.console.print(Text.assemble((tag, "bold"), f"  saved {when} · {count} messages"))
        return
    if args[:1] == ["share"] and len(args) <= 2:
        await _chat_share(repl, args[1] if len(args) == 2 else f"gemini-conversation-{int(time.time() * 1000)}.json")
        return
    if len(args) != 2 or args[0] not in ("save", "resume", "delete"):
        raise CommandUsage(_CHAT_USAGE)
    action, tag = args
    if action == "save":
        history = (await repl.require_client().get_history()).messages
        replaced = store.save(tag, history, model=repl.model)
        repl.console.print(Text(f"{'Replaced' if replaced else 'Saved'} chat {tag} ({len(history)} messages); "
                                f"/chat resume {tag} continues it.", style="green"))
    elif action == "delete":
        if not store.delete(tag):
            raise CommandUsage(f"no saved chat {tag!r}: /chat list shows them")
        repl.console.print(Text(f"Deleted chat {tag}.", style="green"))
    else:
        messages = store.load(tag)
        if await repl.reconnect(None, f"resuming {tag}: new session"):
            repl.pending_context.append(resumed_context(tag, messages))
            # Redrawn as /resume ID redraws a session.
            repl.console.print(Text(f"Resumed chat {tag} ({len(messages)} messages):", style="green"))
            for content in messages:
                for line in history_lines(content):
                    repl.console.print(line)
            repl.console.print(Text("It goes to the model with your next message.", style="dim"))


async def _chat_share(repl: CommandContext, name: str) -> None:
    """gemini-cli's ``/chat share FILE``: the conversation as JSON (its
    Content objects) or Markdown, by the file's extension."""
    path = Path(name).expanduser()
    path = path if path.is_absolute() else Path.cwd() / path
    if path.suffix.lower() not in (".md", ".json"):
        raise CommandUsage("Invalid file format. Only .md and .json are supported.")
    history = (await repl.require_client().get_history()).messages
    if not history:
        repl.console.print(Text("No conversation found to share."))
        return
    try:
        share(list(history), path)
    except OSError as exc:
        raise CommandUsage(f"cannot write {path}: {exc.strerror or exc}") from None
    repl.console.print(Text(f"Conversation shared to {path}", style="green"))


async def _mcp(repl: CommandContext, args: list[str]) -> None:
    if args[:1] == ["auth"]:
        await mcp_auth(repl, args[1:])
        return
    from .commands.mcp import mcp_command  # lazy_imports.EDGES

    await mcp_command(repl, args)


def _mcp_actions(repl: CommandContext) -> Iterable[str]:
    from .commands.mcp import mcp_actions  # lazy_imports.EDGES

    return mcp_actions(repl)


def _mcp_server_names(repl: CommandContext, action: str) -> Iterable[str]:
    from .commands.mcp import mcp_server_names  # lazy_imports.EDGES

    return mcp_server_names(repl, action)


def _mcp_prompt_rows(repl: CommandContext) -> Iterable[tuple[str, str]]:
    """(``/name``, description) of the MCP servers' prompts, when any server is configured."""
    if getattr(repl.client, "mcp_servers", None) is None:
        return []
    from .commands.mcp import described  # lazy_imports.EDGES

    return list(described(repl)())


async def _memory(repl: CommandContext, args: list[str]) -> None:
    """gemini-cli's /memory: ``show`` the context files sent with every
    prompt (the import tree first, then their text), ``list`` their paths,
    ``refresh`` them from disk, ``add TEXT`` to the user's memory file (as
    the save_memory tool does) and refresh."""
    usage = "/memory show | list | refresh | add TEXT"
    action, rest = (args[0], args[1:]) if args else ("show", [])
    settings = repl.settings
    if action in ("show", "list") and not rest:
        project = settings.context.project
        files = project.files if project is not None else []
        if not files:
            repl.console.print(Text("No GEMINI.md files in use." if action == "list" else
                                    "No context files loaded (GEMINI.md, or context.fileName in settings.json).",
                                    style="dim"))
            return
        if action == "list":
            repl.console.print(Text(f"There are {len(files)} GEMINI.md file(s) in use:\n"))
            for f in files:
                repl.console.print(Text(visible(str(f.path), newlines=False)), soft_wrap=True)
            return
        repl.console.print(_memory_tree(files))
        for f in files:
            repl.console.print(Text(f"── {visible(str(f.path))} ({f.scope}, {len(f.content):,} characters)",
                                    style="bold"))
            repl.console.print(Text(visible(f.content.rstrip("\n"))))
        return
    if action == "refresh" and not rest:
        await _refresh_memory(repl)
        return
    if action == "add" and rest:
        memory_file = settings.tools.memory_file
        if memory_file is None:
            raise CommandUsage("no memory file: context files are not loaded in this session")

        tool = SaveMemoryTool(memory_file)
        try:
            said = await tool.run(tool.validate({"fact": " ".join(rest)}), ToolContext(workspace=None))  # type: ignore[arg-type]
        except ToolFailed as exc:
            raise CommandUsage(f"not saved: {exc}") from None
        repl.console.print(Text(visible(said), style="green"))
        await _refresh_memory(repl)
        return
    raise CommandUsage(usage)


async def _refresh_memory(repl: CommandContext) -> None:
    try:
        if not await reload_in_worker(repl, settings_too=False):
            return
    except ConfigurationError as exc:  # e.g. GEMINI_SYSTEM_MD's file gone: the old context stays
        raise CommandUsage(f"not refreshed: {exc}") from None
    project = repl.settings.context.project
    count = len(project.files) if project is not None else 0
    repl.console.print(Text(f"Context refreshed: {count} file{'s' * (count != 1)}; "
                            "the next prompt carries it.", style="green"))


def _memory_actions(repl: CommandContext) -> Iterable[str]:
    return ["show", "list", "refresh", "add"]


def _memory_tree(files: list[Any]) -> Text:
    """gemini-cli's import tree (reference/memport.md): each context file
    with its scope, under it the files it imported (as written), nested;
    an import not read says why."""
    out = Text()
    out.append("Memory Files\n", style="bold")

    def node(item: Any, indent: str) -> None:
        out.append(f"{indent}L {visible(item.written, newlines=False)}")
        if item.problem:
            out.append(f"  ({visible(item.problem, newlines=False)})", style="yellow")
        out.append("\n")
        for child in item.imports:
            node(child, indent + "  ")

    for f in files:
        label = f" L {f.scope}: {visible(str(f.path), newlines=False)}\n"
        out.append(label)
        for item in f.imports:
            node(item, " " * 4)
    out.rstrip()
    return out


async def _hooks(repl: CommandContext, args: list[str]) -> None:
    """gemini-cli's ``/hooks [list]|enable|disable|enable-all|disable-all``
    (:mod:`gemini_split.ui.repl.commands.hooks`)."""
    from .commands.hooks import hooks_command  # lazy_imports.EDGES

    await hooks_command(repl, args)


def _hook_names(repl: CommandContext, action: str) -> Iterable[str]:
    if action not in ("enable", "disable"):
        return []
    from .commands.hooks import hook_names  # lazy_imports.EDGES

    return hook_names(repl, enabled=action == "disable")


async def _policies(repl: CommandContext, args: list[str]) -> None:
    """gemini-cli's ``/policies list``: the rules this client decides tool
    calls with (policy files, settings, flags, the built-in ones and this
    session's "always" answers), grouped by the approval mode they apply
    in, each with its priority and where it came from."""
    if args not in ([], ["list"]):
        raise CommandUsage("/policies [list]")
    rules = repl.require_client().executor.policy.engine.rules
    if not rules:
        repl.console.print(Text("No active policies.", style="dim"))
        return

    by_mode = {mode: [r for r in rules if r.modes is None or mode in r.modes] for mode in MODES}
    normal = set(map(id, by_mode["default"]))
    sections = [("Normal Mode Policies", by_mode["default"])] + [
        (f"{title} Mode Policies (combined with normal mode policies)", [r for r in by_mode[mode] if id(r) not in normal])
        for title, mode in (("Auto Edit", "auto_edit"), ("Yolo", "yolo"), ("Plan", "plan"))]
    out = Text("Active Policies\n", style="bold")
    for title, section in sections:
        out.append(f"\n{title}\n", style="bold")
        if not section:
            out.append("  No policies.\n", style="dim")
        for i, rule in enumerate(section, 1):
            out.append(f"  {i}. ")
            out.append(visible(rule.describe(), newlines=False))
            out.append(f" [Priority: {rule.priority:g}] [Source: {visible(rule.source, newlines=False)}]\n",
                       style="dim")
    out.rstrip()
    repl.console.print(out, soft_wrap=True)


async def _settings(repl: CommandContext, args: list[str]) -> None:
    """``/settings``: the effective settings and where each came from
    (:mod:`gemini_split.ui.repl.commands.settings_list`). Read-only: gemini-cli's dialog
    edits them; here the files named are edited by hand."""
    _no_args(args, "/settings")
    loaded = repl.settings.loaded_settings
    if loaded is None:
        repl.console.print(Text("No settings files were read for this session.", style="dim"))
        return

    _print_rows(repl, settings_files(loaded))
    table = Table(box=None, padding=(0, 2, 0, 0))
    table.add_column("Setting")
    table.add_column("Value")
    table.add_column("From")
    for key, value, source in effective_settings(loaded):
        table.add_row(key, Text(visible(value, newlines=False)), Text(source, style="dim" if source == "default" else ""))
    repl.console.print(table)
    repl.console.print(Text("Read-only: edit the file a setting comes from (settings.json) to change it; "
                            "command-line flags and environment variables (--model, GEMINI_MODEL …) win over "
                            "these for this session.", style="dim"))


async def _shells(repl: CommandContext, args: list[str]) -> None:
    """gemini-cli's ``/shells`` (:mod:`gemini_split.ui.repl.commands.shells`)."""
    from .commands.shells import shells_command  # lazy_imports.EDGES

    await shells_command(repl, args)


def _shell_numbers(repl: CommandContext, action: str) -> Iterable[str]:
    if action not in ("output", "kill") or repl.settings.tools.run_on == "server":
        return []
    from .commands.shells import shell_numbers  # lazy_imports.EDGES

    return [*shell_numbers(repl), *(["all"] if action == "kill" else [])]


async def _theme(repl: CommandContext, args: list[str]) -> None:
    """gemini-cli's ``/theme`` (:mod:`gemini_split.ui.repl.commands.theme`)."""
    from .commands.theme import theme_command  # lazy_imports.EDGES

    await theme_command(repl, args)


def _theme_names(repl: CommandContext) -> Iterable[str]:
    from .commands.theme import theme_names  # lazy_imports.EDGES

    return theme_names(repl)


async def _vim(repl: CommandContext, args: list[str]) -> None:
    """gemini-cli's /vim: vi editing keys on or off, from the next prompt,
    and ``general.vimMode`` saved in the user's settings.json (as
    gemini-cli saves it) so that the next session starts the same way."""
    _no_args(args, "/vim")

    if not isinstance(repl.reader, LineReader):
        raise CommandUsage("/vim needs a terminal: input is read line by line here")
    on = not repl.reader.vi_mode
    repl.reader.set_vi_mode(on)
    repl.console.print(Text("Entered Vim mode. Run /vim again to exit." if on else "Exited Vim mode."))
    try:
        persist_user_setting(repl, "general.vimMode", on)
    except (OSError, ConfigurationError) as exc:
        repl.print_notice(f"general.vimMode not saved: {exc}")


async def _ide(repl: CommandContext, args: list[str]) -> None:
    """gemini-cli's /ide: ``status`` (the connection and the open files),
    ``enable`` / ``disable`` (``ide.enabled`` saved in the user's
    settings.json, and the connection made or closed), ``install`` (where
    to get the companion extension)."""
    if len(args) != 1 or args[0] not in IDE_ACTIONS:
        raise CommandUsage("/ide status|enable|disable|install")
    action = args[0]
    if action in ("enable", "disable"):
        try:
            persist_user_setting(repl, "ide.enabled", action == "enable")
        except (OSError, ConfigurationError) as exc:
            repl.print_notice(f"ide.enabled not saved: {exc}")
        if action == "enable":
            await repl.connect_ide()
        else:
            await repl.ide.disconnect()
    if action == "install":
        name = repl.ide.display_name or "your IDE"
        repl.console.print(Text(
            f"No installer is available for {name}. Please install the '{ide.COMPANION_NAME}' extension manually "
            f"from the marketplace: {ide.MARKETPLACE} (VS Code), {ide.OPEN_VSX} (VS Code forks)."))
        return
    if action == "enable" and repl.ide.status != "connected":
        return  # connect_ide said why
    error, text = repl.ide.status_text()
    repl.console.print(Text(text, style="red" if error else ""))


def persist_user_setting(repl: CommandContext, key: str, value: Any) -> None:
    """``key`` (dotted) = ``value`` in the user's settings.json, the rest of
    the file (comments included) kept. Raises ``OSError`` or a
    ``ConfigurationError`` (a file that cannot be parsed: left as it was)."""
    set_setting(repl.env.config_dir / "settings.json", key, value)


async def _directory(repl: CommandContext, args: list[str]) -> None:
    try:
        await directory_command(repl, args)
    except DirectoryRefused as exc:
        raise CommandUsage(str(exc)) from None


def _approval_modes(repl: CommandContext) -> Iterable[str]:
    return [m.value for m in ApprovalMode]


async def _approval_mode(repl: CommandContext, args: list[str]) -> None:
    modes = " | ".join(m.value for m in ApprovalMode)
    if len(args) > 1:
        raise CommandUsage(f"/approval-mode [{modes}]")
    if not args:
        repl.console.print(f"approval mode: [bold]{repl.approval_mode.value}[/bold]  (one of: {modes})")
        return
    try:
        mode = ApprovalMode(args[0].lower().replace("-", "_"))
    except ValueError:
        raise CommandUsage(f"/approval-mode [{modes}]") from None
    refused = repl.mode_refused(mode)
    if refused:
        raise CommandUsage(refused)
    repl.set_approval_mode(mode)
    repl.console.print(f"approval mode: [bold]{mode.value}[/bold]")


def _models(repl: CommandContext) -> Iterable[str]:
    return dict.fromkeys([repl.model, *KNOWN_MODELS]) if repl.model else KNOWN_MODELS


async def _model(repl: CommandContext, args: list[str]) -> None:
    if args[:1] == ["manage"]:  # gemini-cli's dialog: pick one
        if len(args) != 1:
            raise CommandUsage(MODEL_USAGE)
        picked = await _pick_model(repl)
        if picked is None:
            return
        args = [picked]
    if args[:1] == ["set"]:  # gemini-cli's /model set NAME [--persist]
        args = args[1:]
        persist = "--persist" in args
        args = [a for a in args if a != "--persist"]
        if len(args) != 1:
            raise CommandUsage(MODEL_USAGE)
    elif len(args) > 1:
        raise CommandUsage(MODEL_USAGE)
    else:
        persist = False
    if not args:
        repl.console.print(f"model: [bold]{repl.model or 'the server default'}[/bold]")
        return
    loaded = repl.settings.loaded_settings
    try:
        name = resolve_model_name(args[0], loaded.merged.model_configs if loaded else None)
    except ConfigurationError as exc:
        repl.console.print(Text(f"{exc}; the model is still {repl.model or 'the server default'}", style="red"))
        return
    if persist:
        path = repl.env.config_dir / "settings.json"
        try:
            persist_model_name(path, args[0])
        except (ConfigurationError, OSError) as exc:
            repl.console.print(Text(f"not saved: {exc}; the model is unchanged", style="red"))
            return
    repl.model_override = name
    alias = f" ({args[0]})" if name != args[0] else ""
    saved = f"; saved as model.name in {repl.env.config_dir / 'settings.json'}" if persist else ""
    repl.console.print(Text.assemble("model: ", (name, "bold"), f"{alias} (from the next prompt on{saved})"))


async def _pick_model(repl: CommandContext) -> str | None:
    """``/model manage``: the model aliases (built-in and the settings'),
    each with the model it names, as a menu; the one picked, or None."""
    loaded = repl.settings.loaded_settings
    aliases = {**BUILT_IN_ALIASES, **settings_aliases(loaded.merged.model_configs if loaded else None)}
    current = repl.model
    choices = [(alias, f"{alias}  ({name})" + ("  · current" if name == current else ""))
               for alias, name in aliases.items()]
    choices.append(("keep", f"Keep {current or 'the server default'}"))
    picked = await repl.asker.read_choice("Model: pick one (/model set NAME for any other name)", choices,
                                          len(choices) - 1)
    return None if picked == "keep" else picked


SERVER_ACTIONS = ("list", "add", "remove", "connect", "status", "test")
_SERVER_USAGE = "/server list | add NAME URL … | remove NAME | connect NAME|URL | status | test NAME|URL"


def _server_actions(repl: CommandContext) -> Iterable[str]:
    return SERVER_ACTIONS


async def _server(repl: CommandContext, args: list[str]) -> None:
    if not args or args[0] not in SERVER_ACTIONS:
        raise CommandUsage(_SERVER_USAGE)
    action, rest = args[0], args[1:]
    await _SERVER_HANDLERS[action](repl, rest)


async def _server_list(repl: CommandContext, args: list[str]) -> None:
    _no_args(args, "/server list")
    profiles = repl.store.load()
    if not profiles:
        repl.console.print(f"No profiles yet (they go in {repl.store.path}). Add one: {SERVER_ADD_USAGE}")
        return
    repl.console.print(Text("\n".join(profile_table(profiles, current=repl.server_label))))


async def _server_add(repl: CommandContext, args: list[str]) -> None:
    positional: list[str] = []
    options: dict[str, Any] = {"token": None, "token_env": None, "ca": None, "insecure": False}
    it = iter(args)
    for word in it:
        name, eq, value = word.partition("=")
        key = {"--token": "token", "--token-env": "token_env", "--ca": "ca"}.get(name)
        if key is not None:
            if not eq:
                value = next(it, None)
                if value is None:
                    raise CommandUsage(SERVER_ADD_USAGE)
            options[key] = value
        elif word == "--insecure":
            options["insecure"] = True
        elif word.startswith("--"):
            raise CommandUsage(SERVER_ADD_USAGE)
        else:
            positional.append(word)
    if len(positional) != 2:
        raise CommandUsage(SERVER_ADD_USAGE)
    profile = make_profile(positional[0], positional[1], cwd=repl.env.cwd, **options)
    replaced = repl.store.add(profile)
    repl.console.print(f"{'Replaced' if replaced else 'Added'} profile [bold]{profile.name}[/bold]: "
                       f"{profile.address}  (/server connect {profile.name} to use it)")


async def _server_remove(repl: CommandContext, args: list[str]) -> None:
    if len(args) != 1:
        raise CommandUsage("/server remove NAME")
    if repl.store.remove(args[0]):
        repl.console.print(f"Removed profile {args[0]}.")
    else:
        raise CommandUsage(f"no profile named {args[0]!r}; /server list shows them")


async def _server_connect(repl: CommandContext, args: list[str]) -> None:
    if len(args) != 1:
        raise CommandUsage("/server connect NAME|URL|embedded")
    await repl.reconnect(args[0], "connected")


async def _server_status(repl: CommandContext, args: list[str]) -> None:
    _no_args(args, "/server status")
    client = repl.require_client()
    connected = client.connected
    assert connected is not None
    latency = await measure_latency(client)
    endpoint = repl.settings.endpoint
    address = endpoint.server or "embedded (the agent loop runs in this process)"
    label = repl.server_label if repl.server_label not in ("embedded", endpoint.server) else None
    token = bool(endpoint.connect.token)
    rows = [
        ("server", f"{label}: {address}" if label else address),
        ("version", f"{connected.server or 'unknown'} · protocol {connected.protocol_version}"),
        ("session", f"{connected.session_id} · model {repl.model or 'unknown'}"),
        ("latency", f"{latency:.1f} ms (get_state round trip)"),
        ("auth", "ok: the token was accepted" if token else "ok: no token needed"),
        ("model auth", connected.model_auth or "not said by the server"),
        ("attached", ", ".join(named(label, connected.label) + (" (watching)" if role == "observer" else "")
                               for label, role in repl.attached_clients()) or "only this client"),
    ]
    _print_rows(repl, rows)


async def _about(repl: CommandContext, args: list[str]) -> None:
    """gemini-cli's /about: versions, model, how the model is reached
    (never a secret) and the server."""
    _no_args(args, "/about")
    from .commands.about import about_rows  # lazy_imports.EDGES

    _print_rows(repl, about_rows(repl))


async def _bug(repl: CommandContext, args: list[str]) -> None:
    """gemini-cli's ``/bug [TITLE]`` (:mod:`gemini_split.ui.repl.commands.about`)."""
    from .commands.about import bug_command  # lazy_imports.EDGES

    await bug_command(repl, args)


async def _docs(repl: CommandContext, args: list[str]) -> None:
    """gemini-cli's ``/docs``: where the documentation is (printed, never
    opened: the REPL may run over ssh)."""
    _no_args(args, "/docs")
    from .commands.about import docs_lines  # lazy_imports.EDGES

    for line in docs_lines():
        repl.console.print(Text(line), soft_wrap=True)


async def _server_test(repl: CommandContext, args: list[str]) -> None:
    if len(args) != 1:
        raise CommandUsage("/server test NAME|URL")
    settings = settings_for(args[0], repl.env, repl.settings)
    result = await repl.interruptible(probe(settings), f"Connecting to {settings.endpoint.server}…")
    if result is not None:
        _print_rows(repl, result.lines())


_SERVER_HANDLERS: dict[str, Handler] = {
    "list": _server_list,
    "add": _server_add,
    "remove": _server_remove,
    "connect": _server_connect,
    "status": _server_status,
    "test": _server_test,
}


def _print_rows(repl: CommandContext, rows: list[tuple[str, str]]) -> None:
    table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
    for key, value in rows:
        table.add_row(Text(key, style="bold"), Text(visible(value)))  # a server's words: no markup, no escapes
    repl.console.print(table)


async def _sessions(repl: CommandContext, args: list[str]) -> None:
    _no_args(args, "/sessions")
    client = repl.require_client()
    sessions = await repl.interruptible(client.list_sessions(), "Listing sessions…")
    if sessions is None:
        return
    repl.known_sessions = [s.id for s in sessions]
    if not sessions:
        repl.console.print(Text("No earlier sessions: the first prompt of a conversation saves it.", style="dim"))
        return
    current = client.connected.session_id if client.connected else None
    table = Table(box=None, padding=(0, 2, 0, 0))
    for column in ("id", "updated", "turns", "attached", "title"):
        table.add_column(column, style="bold" if column == "id" else None,
                         justify="right" if column in ("turns", "attached") else "left")
    for s in sessions:
        updated = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.updated / 1000))
        mark = " (this one)" if s.id == current else ""
        # (1.5) Clients attached now, this REPL included for its own session.
        table.add_row(s.id + mark, updated, str(s.turns), str(s.clients) if s.clients else "", Text(_visible(s.title)))
    repl.console.print(table)
    repl.console.print(Text("/resume ID continues one (Tab completes the id).", style="dim"))


async def _remote(repl: CommandContext, args: list[str]) -> None:
    """``/remote``: a one-time link (and QR code) that signs a browser in to
    this server's page (``serve --web``) as you, as ``gemini-split pair``."""
    _no_args(args, "/remote")
    server = repl.settings.endpoint.server
    if not server:
        raise CommandUsage("/remote pairs a browser with a server started with serve --web: "
                           "connect to one first (/server connect NAME|URL)")
    client = repl.require_client()
    from gemini_split.web.link import link_for, loopback_note, qr_text  # lazy: gemini_split/lazy_imports.py

    try:
        reply = await repl.interruptible(client.pair(), "Asking the server for a pairing link…")
    except RequestFailed as exc:
        repl.print_usage(f"/remote: {exc}")
        return
    if reply is None:
        return
    url = link_for(server, reply)
    repl.console.print(Text(qr_text(url)))
    repl.console.print(Text(f"Open this link in the browser (once, within 10 minutes) to continue there:\n{url}"))
    note = loopback_note(url)
    if note is not None:
        repl.console.print(Text(note, style="yellow"))


async def _resume(repl: CommandContext, args: list[str]) -> None:
    """``/resume ID|N|latest``; without one, gemini-cli's session browser (a
    list narrowed as you type: :mod:`gemini_split.ui.repl.commands.resume`);
    its checkpoint sub-commands are ``/chat``'s."""
    from .commands.resume import CHECKPOINT_ACTIONS, browse  # lazy_imports.EDGES

    if args[:1] == ["checkpoints"]:  # gemini-cli's older spelling: /resume checkpoints save TAG
        args = args[1:]
    if args and args[0] in CHECKPOINT_ACTIONS:
        await _chat(repl, ["resume" if args[0] == "load" else args[0], *args[1:]])
        return
    if len(args) > 1:
        raise CommandUsage("/resume [ID|N|latest] | save TAG | list | resume TAG | delete TAG | share [FILE]")
    if args:
        await repl.resume(args[0])
    else:
        await browse(repl)


def _session_ids(repl: CommandContext) -> Iterable[str]:
    return ["latest", *repl.known_sessions]


async def _commands(repl: CommandContext, args: list[str]) -> None:
    """gemini-cli's /commands: ``list`` the custom commands (the default),
    ``reload`` them from their files."""
    if args not in ([], ["list"], ["reload"]):
        raise CommandUsage("/commands [list|reload]")
    if args == ["reload"]:
        load_custom_commands(repl)
        count = len(repl.custom_commands.commands)
        repl.console.print(Text(f"Reloaded custom commands: {count} command{'s' * (count != 1)}.", style="green"))
        return
    commands = repl.custom_commands.commands
    if not commands:
        repl.console.print(Text("No custom commands (.toml files in ~/.gemini/commands or .gemini/commands).",
                                style="dim"))
        return
    for name, cmd in commands.items():
        repl.console.print(Text.assemble((name, "bold"), f"  {visible(cmd.description, newlines=False)}",
                                         (f"  {visible(str(cmd.path), newlines=False)}", "dim")))


async def _skills(repl: CommandContext, args: list[str]) -> None:
    try:
        await skills_command(repl, args)
    except SkillsUsage as exc:
        raise CommandUsage(str(exc)) from None


def _skills_actions(repl: CommandContext) -> Iterable[str]:
    return ["list", "enable", "disable", "reload", "link"]


async def _agents(repl: CommandContext, args: list[str]) -> None:
    try:
        await agents_command(repl, args)
    except AgentsUsage as exc:
        raise CommandUsage(str(exc)) from None


def _agents_actions(repl: CommandContext) -> Iterable[str]:
    return ["list", "enable", "disable", "reload"]


async def _extensions(repl: CommandContext, args: list[str]) -> None:
    """gemini-cli's ``/extensions`` sub-commands
    (:mod:`gemini_split.ui.repl.commands.extensions`); the custom commands
    are read again when the extensions changed."""
    from .commands.extensions import extensions_command  # lazy_imports.EDGES

    if await extensions_command(repl, args):
        load_custom_commands(repl)


def _extension_actions(repl: CommandContext) -> Iterable[str]:
    from .commands.extensions import ACTIONS  # lazy_imports.EDGES

    return ACTIONS


def _extension_names(repl: CommandContext, action: str) -> Iterable[str]:
    if action not in ("uninstall", "update", "enable", "disable", "config", "reload"):
        return []
    from .commands.extensions import extension_names  # lazy_imports.EDGES

    return [*extension_names(repl), *(["--all"] if action != "config" else [])]


def _commands_actions(repl: CommandContext) -> Iterable[str]:
    return ["list", "reload"]


def load_custom_commands(repl: CommandContext) -> None:
    """(Re)read the custom commands into ``repl.custom_commands``: the
    user's and, in a trusted folder, the current directory's (where
    ``.gemini/settings.json`` and the trust decision are read, as in
    gemini-cli). Each file left out is said in one line."""
    loaded = repl.settings.loaded_settings
    repl.custom_commands = load_commands(repl.env.config_dir, repl.env.cwd,
                                         trusted=bool(loaded is not None and loaded.trusted),
                                         reserved=[*COMMANDS, *ALIASES],
                                         extensions=repl.settings.tools.extensions)
    for problem in repl.custom_commands.problems:
        repl.print_usage(visible(problem))


async def _run_custom(repl: CommandContext, command: Any, line: str) -> None:
    """A custom command: expanded here (``!{…}`` asked as the model's shell
    calls are), then sent as an ordinary prompt."""
    client = repl.require_client()
    expanded = None
    with repl.ctrl_c_cancels():  # Ctrl-C stops a slow !{…}, as it stops a !command
        try:
            expanded = await run_custom_command(
                command, line, client.executor,
                lambda text, warning: repl.console.print(Text(text, style="yellow" if warning else "dim")))
        except CommandFailed as exc:
            repl.print_usage(visible(str(exc)))
            return
    if expanded is None:
        repl.print_usage("Interrupted: nothing was sent.")
        return
    prompt, attachments = expanded
    await repl.run_turn(prompt, attachments=attachments, references=False, typed=line)


def _visible(text: str) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in text)


async def _restore(repl: CommandContext, args: list[str]) -> None:
    from .commands.restore import restore  # lazy_imports.EDGES

    await restore(repl, args)


def _checkpoint_ids(repl: CommandContext) -> Iterable[str]:
    from .commands.restore import checkpoint_ids  # lazy_imports.EDGES

    return checkpoint_ids(repl)


def _no_args(args: list[str], usage: str) -> None:
    if args:
        raise CommandUsage(usage)


COMMANDS: dict[str, Command] = {c.name: c for c in [
    Command("/help", "/help", "this list", _help),
    Command("/about", "/about", "version, model, how the model is reached (API key or Vertex AI account), server",
            _about),
    Command("/bug", "/bug [TITLE]", "the facts a bug report needs (as /about) and where to report it", _bug),
    Command("/docs", "/docs", "where gemini-split's documentation is, and gemini-cli's", _docs),
    Command("/quit", "/quit [--delete]", "leave (also Ctrl-D); --delete deletes this session first", _quit),
    Command("/exit", "/exit [--delete]", "the same as /quit", _quit),
    Command("/clear", "/clear", "start a new conversation (a fresh session)", _clear),
    Command("/tools", "/tools [desc|nodesc]", "the local tools this client offers, and which ask first", _tools,
            _tools_actions),
    Command("/permissions", "/permissions [revoke N|all] | trust [DIR]",
            "what runs without asking: the mode, --allowed-tools, this session's \"always\" answers; trust: "
            "a folder's trust level", _permissions, _permission_actions),
    Command("/stats", "/stats [session|model|tools]",
            "this session: turns, tool calls, tokens, time, context use; model: per model; tools: per tool",
            _stats, _stats_actions),
    Command("/copy", "/copy", "copy the model's last answer to the clipboard", _copy),
    Command("/output", "/output [N]", "the whole output of the last turn's tool calls", _output),
    Command("/init", "/init", "analyze the project and have the model write a GEMINI.md for it", _init),
    Command("/compress", "/compress", "have the server replace the older turns with the model's summary "
            "(frees context; the project context and last exchanges stay)", _compress),
    Command("/rewind", "/rewind", "go back to before an earlier prompt: the conversation, the agent's file edits, "
            "or both (also Esc twice)", _rewind),
    Command("/chat", "/chat ACTION", "save TAG | resume TAG | list | delete TAG: keep conversations to go back to",
            _chat, _chat_actions),
    Command("/memory", "/memory show|list|refresh|add TEXT", "the context files (GEMINI.md) sent with every prompt",
            _memory, _memory_actions),
    Command("/policies", "/policies [list]", "the policy rules deciding this client's tool calls, by approval "
            "mode, with their priority and source", _policies, lambda repl: ["list"]),
    Command("/directory", "/directory add PATH[,PATH]|show",
            "add workspace directories (as --include-directories), or show them; also /dir",
            _directory, lambda repl: ["add", "show"]),
    Command("/vim", "/vim", "vi editing keys on or off (saved as general.vimMode in your settings.json)", _vim),
    Command("/shells", "/shells [ACTION]",
            "the commands the model left running in the background: list | output N [LINES] | kill N|all; "
            "also /bashes",
            _shells, lambda repl: ["list", "output", "kill"], _shell_numbers),
    Command("/theme", "/theme [NAME]", "choose gemini-cli's dark, light or NoColor theme (saved as ui.theme in "
            "your settings.json)", _theme, _theme_names),
    Command("/settings", "/settings", "the effective settings and where each came from "
            "(user, project, system, default); read-only: edit settings.json to change one", _settings),
    Command("/mcp", "/mcp [list|desc|schema|reload|enable NAME|disable NAME|auth [NAME]]",
            "MCP servers: status, tools, prompts and resources; reload them; enable or disable one "
            "(--session: this session only); sign in to one (OAuth)", _mcp, _mcp_actions, _mcp_server_names),
    Command("/ide", "/ide status|enable|disable|install", "Manage IDE integration: the editor's open files go "
            "with your prompts, edits are reviewed as diffs in the editor", _ide, lambda repl: IDE_ACTIONS),
    Command("/hooks", "/hooks [ACTION]",
            "the hooks of settings.json and extensions (run here, on this machine): list | enable NAME | "
            "disable NAME | enable-all | disable-all",
            _hooks, lambda repl: ["list", "enable", "disable", "enable-all", "disable-all"], _hook_names),
    Command("/commands", "/commands [list|reload]",
            "your custom commands (.gemini/commands/*.toml): list them, or reread the files", _commands,
            _commands_actions),
    Command("/agents", "/agents [list|enable NAME|disable NAME|reload]",
            "sub-agents (built-ins, .gemini/agents/*.md): list them, enable or disable one, reread them",
            _agents, _agents_actions),
    Command("/skills", "/skills [list|enable NAME|disable NAME|reload|link PATH]",
            "Agent Skills (SKILL.md): list them, enable or disable one, reread them, link a directory's",
            _skills, _skills_actions),
    Command("/extensions", "/extensions [ACTION]",
            "gemini-cli extensions: list | install SOURCE | link PATH | uninstall NAME | update NAME|--all | "
            "enable|disable NAME [--scope S] | config [NAME [SETTING]] | explore | reload",
            _extensions, _extension_actions, _extension_names),
    Command("/approval-mode", "/approval-mode [MODE]", "show or set: default, auto_edit, yolo, plan",
            _approval_mode, _approval_modes),
    Command("/plan", plan.USAGE, "switch to Plan Mode (read-only; the model writes a plan for your approval) and "
            "show the approved plan; with a goal, send it at once; copy: the approved plan to the clipboard",
            plan.plan_command, lambda repl: ["copy"], raw=True),
    Command("/model", MODEL_USAGE, "show or set the model for the next prompts", _model, _models),
    Command("/sessions", "/sessions", "your sessions on this server, newest first", _sessions),
    Command("/remote", "/remote", "a one-time link and QR code that opens your sessions in a browser "
            "(a server started with serve --web)", _remote),
    Command("/resume", "/resume [ID|N|latest]", "continue an earlier session and redraw it; without one, a list "
            "of this project's sessions to search and pick from (N and latest: as --list-sessions numbers them); "
            "save|list|resume|delete|share TAG as /chat", _resume, _session_ids),
    Command("/restore", "/restore [ID]", "list the checkpoints, or put the files back as before one edit and "
            "propose it again (general.checkpointing.enabled)", _restore, _checkpoint_ids),
    Command("/server", "/server ACTION",
            "list | add NAME URL [--token T|--token-env VAR] [--ca FILE] | remove NAME | "
            "connect NAME|URL | status | test NAME|URL", _server, _server_actions),
]}
ALIASES = {"/exit": "/quit", "/q": "/quit", "/?": "/help", "/new": "/clear", "/dir": "/directory",
           "/bashes": "/shells"}


async def run_command(repl: CommandContext, line: str) -> None:
    """Run one slash command line. Raises :class:`QuitRepl` for /quit;
    prints a usage line (never a traceback) for anything wrong."""
    first = line.split(None, 1)[0] if line.split() else line
    custom = getattr(repl, "custom_commands", None)
    found = custom.get(first) if custom is not None and ALIASES.get(first, first) not in COMMANDS else None
    if found is not None:  # its arguments are the text as typed, quotes and all
        await _run_custom(repl, found, line)
        return
    command = COMMANDS.get(ALIASES.get(first, first))
    if command is not None and command.raw:  # the rest of the line as typed
        rest = line.split(None, 1)[1].strip() if len(line.split(None, 1)) > 1 else ""
        args = [rest] if rest else []
    else:
        try:
            words = shlex.split(line)
        except ValueError as exc:
            repl.print_usage(f"cannot parse that line ({exc}); quote arguments with ' or \"")
            return
        command, args = COMMANDS.get(ALIASES.get(words[0], words[0])), words[1:]
        if command is None:
            if await _run_mcp_prompt(repl, words[0], line):
                return
            repl.print_usage(f"unknown command {words[0]}; /help lists the commands")
            return
    try:
        await command.handler(repl, args)
    except CommandUsage as exc:
        repl.print_usage(f"usage: {exc}" if str(exc).startswith("/") else str(exc))
    except ConfigurationError as exc:
        repl.print_usage(str(exc))
    except RequestFailed as exc:
        repl.print_usage(f"the server did not answer: {exc}; /clear reconnects")


async def _run_mcp_prompt(repl: CommandContext, name: str, line: str) -> bool:
    """Run ``line`` as an MCP server's prompt called ``name``, if one is."""
    if getattr(repl.client, "mcp_servers", None) is None:
        return False
    from .commands.mcp import find_prompt, run_prompt  # lazy_imports.EDGES

    found = await find_prompt(repl, name)
    if found is None:
        return False
    await run_prompt(repl, *found, line)
    return True


class SlashCompleter(Completer):
    """Tab completion: command names, /server actions, profile names after
    ``/server connect|remove|test``, approval modes, model names."""

    def __init__(self, repl: CommandContext):
        self.repl = repl

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        word = document.get_word_before_cursor(WORD=True)
        if word.startswith("@"):
            yield from self._references(word[1:])
            return
        if not text.startswith("/") or "\n" in text:
            return
        words = text.split(" ")
        current = words[-1]
        if len(words) == 1:
            for name, command in COMMANDS.items():
                if name.startswith(current):
                    yield Completion(name, -len(current), display_meta=command.summary)
            custom = getattr(self.repl, "custom_commands", None)
            for name, cmd in (custom.commands.items() if custom is not None else ()):
                if name.startswith(current):
                    yield Completion(name, -len(current), display_meta=visible(cmd.description, newlines=False))
            for name, description in _mcp_prompt_rows(self.repl):
                if name.startswith(current) and name not in COMMANDS:
                    yield Completion(name, -len(current), display_meta=description)
            return
        command = COMMANDS.get(ALIASES.get(words[0], words[0]))
        if command is None:
            if getattr(self.repl.client, "mcp_servers", None) is not None:
                from .commands.mcp import prompt_completions  # lazy_imports.EDGES

                for candidate in prompt_completions(self.repl, words[0], " ".join(words[1:-1]), current):
                    yield Completion(candidate, -len(current))
            return
        if len(words) == 2 and command.arguments is not None:
            candidates: Iterable[str] = command.arguments(self.repl)
        elif command.name == "/server" and len(words) == 3 and words[1] in ("connect", "remove", "test"):
            candidates = self.repl.profile_names()
            if words[1] == "connect":
                candidates = [*candidates, "embedded"]
        elif len(words) == 3 and command.then is not None:
            candidates = command.then(self.repl, words[1])
        else:
            return
        for candidate in candidates:
            if candidate.startswith(current):
                yield Completion(candidate, -len(current))

    def _references(self, typed: str) -> Iterable[Completion]:
        client = self.repl.client
        root = client.executor.workspace.root if client is not None else self.repl.env.cwd
        include = client.executor.workspace.roots[1:] if client is not None else ()
        for candidate in complete_reference(typed, root, include=include):
            yield Completion(candidate, -len(typed))
        servers = getattr(client, "mcp_servers", None) if client is not None else None
        for server in (servers.servers if servers is not None else ()):  # @server:uri, as gemini-cli completes them
            for resource in (server.resources if server.disabled is None else ()):
                candidate = f"{server.name}:{resource.uri}"
                if candidate.startswith(typed):
                    yield Completion(candidate, -len(typed), display_meta=visible(resource.name, newlines=False))
