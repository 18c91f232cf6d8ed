"""``gemini-split`` with a terminal on stdin: the interactive REPL.

Resolves the client settings as one-shot does (flags, environment,
profiles), then runs :class:`gemini_split.ui.repl.loop.Repl` under Trio.
prompt-toolkit and rich are imported here, never on the one-shot path.
"""

from __future__ import annotations

import argparse
import shlex

import trio

from gemini_split.app import client_telemetry, embedded_service_for, resolve_client_settings
from gemini_split.commands.options_from_args import client_options
from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus
from gemini_split.userfiles.folder_trust import project_files, record_trust
from gemini_split.userfiles.settings import load_settings, trust_rule
from gemini_split.ui.safe_text import visible
from gemini_split.worktrees import exit_footer, worktree_at


def run_repl(args: argparse.Namespace, env: Environment) -> ExitStatus:
    options = client_options(args)
    if not options.skip_trust:
        ask_folder_trust(env)
    settings = resolve_client_settings(options, env, interactive=True)
    embedded = embedded_service_for(options, env, settings)
    from gemini_split.ui.repl.loop import Repl

    repl = Repl(options, env, settings, embedded=embedded)
    with client_telemetry(settings, env, interactive=True, debug=bool(getattr(args, "debug", False))):
        status = trio.run(repl.run)
    say_worktree(env, repl.session_id, repl.settings.endpoint.server, repl.server_label)
    return status


def say_worktree(env: Environment, session_id: str | None, server: str | None, server_label: str) -> None:
    """gemini-cli's words at exit in a worktree of ``-w`` (made now, or one
    the REPL was started in): how to come back to the session there, and
    how to remove the worktree. ``server``: the address of the session's
    server (None: embedded), shown as ``server_label``."""
    worktree = worktree_at(env.cwd)
    if worktree is None:
        return
    command = "gemini-split" + (f" --resume {shlex.quote(session_id)}" if session_id else "")
    if server is not None and not server.startswith("unix:"):  # the local daemon shares embedded's sessions
        command += f" --server {shlex.quote(server_label.partition('?')[0])}"  # never a token in a query
    print(exit_footer(worktree, command), file=env.stdout, flush=True)


TRUST_CHOICES = [
    ("TRUST_FOLDER", "Trust folder ({folder})"),
    ("TRUST_PARENT", "Trust parent folder ({parent})"),
    ("DO_NOT_TRUST", "Don't trust"),
]


def ask_folder_trust(env: Environment) -> None:
    """gemini-cli's trust question, asked once: in a folder with project
    configuration (``.gemini/``, GEMINI.md…) and no decision yet (no rule in
    trustedFolders.json, no ``$GEMINI_CLI_TRUST_WORKSPACE``, folder trust
    enabled), show what the folder holds and ask trust folder / trust parent
    / don't trust. The answer is recorded in trustedFolders.json, so the
    settings read next apply it at once. Escape or Ctrl-C decides nothing:
    this run goes on untrusted and the question comes again next time."""

    if env.environ.get("GEMINI_CLI_TRUST_WORKSPACE") in ("true", "false"):
        return
    loaded = load_settings(env)
    if loaded.trusted or not loaded.merged.security.folder_trust.enabled:
        return
    folder = env.cwd
    if trust_rule(folder, env) is not None:
        return
    files = project_files(folder, env, loaded.merged.context_file_names())
    if not files:
        return
    from gemini_split.ui.repl.prompt_input import read_choice

    shown = "\n".join(f"  • {visible(str(p), newlines=False)}{'/' if p.is_dir() else ''}" for p in files[:12])
    if len(files) > 12:
        shown += f"\n  … and {len(files) - 12} more"
    header = (f"Do you trust this folder?\n{visible(str(folder), newlines=False)} holds project configuration "
              "that gemini-split applies only in a trusted folder:\n"
              f"{shown}\nTrusting it lets its settings, context files and custom commands apply "
              "(settings can run commands, such as MCP servers).")
    choices = [(value, label.format(folder=folder.name or folder, parent=folder.parent))
               for value, label in TRUST_CHOICES]
    no_color = bool(env.environ.get("NO_COLOR"))
    answer = trio.run(lambda: read_choice(header, choices, default=0, no_color=no_color,
                                          keys_help="  ↑/↓ and Enter, or a number · Esc: decide later"))
    if answer not in ("TRUST_FOLDER", "TRUST_PARENT", "DO_NOT_TRUST"):
        env.warn("gemini-split: no trust decision; this folder stays untrusted for this run.")
        return
    path = record_trust(folder, answer, env)
    said = {"TRUST_FOLDER": f"Trusted {folder}", "TRUST_PARENT": f"Trusted {folder.parent} and its folders",
            "DO_NOT_TRUST": f"Not trusting {folder}"}[answer]
    env.warn(f"gemini-split: {said} (recorded in {path}).")
