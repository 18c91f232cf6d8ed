"""Command-line entry point: argument parsing and dispatch.

``main(argv, env) -> ExitStatus`` never calls ``sys.exit``; ``run()`` does,
for the console script.

The shell is fast: ``--version``, ``--help`` and ``server list --names``
(which the shell completions run on every Tab) import neither trio nor the
protocol nor a transport, and a subcommand's arguments are added to the
parser only when that subcommand is on the command line
(:class:`_Subcommands`). Each command's module is imported to run it, so
``gemini-split -p`` never pays for the REPL or WebSocket.
``bench/cli_start.py`` measures the shell against bare Python;
``tests/cli/test_cli_start.py`` checks what it imports.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import sys
import threading

# Not `from typing import ...`: typing costs more to import than the rest of
# this module, and annotations here are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

from gemini_split import __version__
from gemini_split.argtypes import positive_int
from gemini_split.tools.approval_mode import ApprovalMode
from gemini_split.collector import paused_collection
from gemini_split.userfiles.env_files import load_env_file
from gemini_split.environment import Environment
from gemini_split.errors import ConfigurationError, WorktreeFailed
from gemini_split.exit_status import ExitStatus, exit_status_for
from gemini_split.ui.output_formats import OUTPUT_FORMATS

#: Seed 001's names, accepted beside gemini-cli's: ``reject_dangerous``
#: (never ask: refuse what would need approval) and ``auto_approve`` (yolo).
SEED_APPROVAL_MODES = ("reject_dangerous", "auto_approve")

DESCRIPTION = """\
A Gemini coding agent whose terminal UI and local tools run where your files
are, and whose agent loop runs in this process or on a server."""

EPILOG = """\
examples:
  gemini-split                                   open the interactive REPL
  gemini-split -p "What files are here?"         answer once and exit
  gemini-split "what does this repo do?"         at a terminal: the REPL's first prompt;
                                                 in a script: answer once, like -p
  git diff | gemini-split -p "review" -o json    piped input joins the prompt
  gemini-split serve --listen 127.0.0.1:8080     run the agent loop as a daemon
  gemini-split --server ws://host:8080 -p "…"    use a running daemon
  gemini-split --server 'stdio:ssh box gemini-split serve --stdio'
  gemini-split --server local -p "…"            through your local daemon (started when needed)
  gemini-split server status                     which server this client uses, and is it up
  gemini-split --server ws://host:8080 attach latest --watch   follow a session read-only
  gemini-split -m scripted:demo.json -p "hi"     a scripted model: no key, no network (README)

environment:
  GEMINI_API_KEY / GOOGLE_API_KEY   Gemini API key (embedded mode and serve)
  GOOGLE_GEMINI_BASE_URL            another Gemini API endpoint
  GOOGLE_GENAI_USE_VERTEXAI=true    Vertex AI instead, with GOOGLE_CLOUD_PROJECT,
                                    GOOGLE_CLOUD_LOCATION and Application Default
                                    Credentials (GOOGLE_APPLICATION_CREDENTIALS,
                                    gcloud, the metadata server)
  GEMINI_MODEL                      default model (gemini-2.5-flash)
  GEMINI_APPROVAL_MODE              default approval mode
  GEMINI_SERVER_MODE, GEMINI_SERVER_HOST, GEMINI_SERVER_PORT,
  GEMINI_SERVER_TOKEN, GEMINI_SERVER_SECURE   where --server is not given

exit status: 0 ok, 1 error, 2 usage, 41 auth, 42 bad input, 52 bad settings.json,
53 turn limit, 130 interrupted."""


#: gemini-cli's subcommands that gemini-split does not offer, by name (and
#: alias) → why, in one line. Such a first word is refused (exit 2), never
#: sent to the model as a prompt.
GEMINI_CLI_ONLY_COMMANDS = {
    "extension": "its name here is 'extensions' (gemini-split extensions list)",
    "skill": "its name here is 'skills' (gemini-split skills list)",
    "hook": "its name here is 'hooks' (gemini-split hooks list)",
    "gemma": "gemini-split does not run local Gemma models",
    "update": "gemini-split does not update itself; upgrade it with the tool that installed it (pip, pipx, uv)",
}


class _Parser(argparse.ArgumentParser):
    """Usage errors exit with status 2 through ``main``, not ``sys.exit``;
    subcommands (at any depth) are :class:`_Subcommands`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _Subcommands)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}\n{self.format_usage().strip()}")


class UsageError(Exception):
    pass


class _Subcommands(argparse._SubParsersAction):
    """Subcommands whose arguments are added only when they are needed.

    :meth:`add_lazy` declares a subcommand by name and help (all that the
    top-level ``--help`` shows); its arguments are added by ``add``, a
    command module's ``add_*_parser(commands)`` named ``"module:function"``
    and imported only then: when argparse reaches that subcommand on the
    command line, or when the completion generator needs the whole command line
    (shell completions). Even its (empty) parser is made only when it is
    first looked up: each parser costs a few gettext look-ups, which every
    ``-p`` would otherwise pay for every subcommand."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unfilled: dict[str, str] = {}
        self._name_parser_map = self.choices = _ParsersOnDemand(self._make_parser)

    def add_lazy(self, name: str, help: str, add: str) -> None:
        if name in self._name_parser_map:
            raise ValueError(f"subcommand {name!r} declared twice")
        self._choices_actions.append(self._ChoicesPseudoAction(name, (), help))
        self._name_parser_map.declare(name)
        self._unfilled[name] = add

    def _make_parser(self, name: str) -> argparse.ArgumentParser:
        """The parser ``add_parser(name)`` would have made."""
        return self._parser_class(prog=f"{self._prog_prefix} {name}")

    def fill(self, name: str) -> None:
        add = self._unfilled.pop(name, None)
        if add is not None:
            module, _, function = add.partition(":")
            getattr(importlib.import_module(module), function)(_FillIn(self.choices[name]))

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        self.fill(values[0])
        super().__call__(parser, namespace, values, option_string)


class _ParsersOnDemand(dict):
    """A subcommand's name -> its parser, each made by ``make(name)`` when
    it is first looked up (by name, ``get``, ``values`` or ``items``);
    names and membership need none made."""

    def __init__(self, make: Callable[[str], argparse.ArgumentParser]):
        super().__init__()
        self._make = make

    def declare(self, name: str) -> None:
        super().__setitem__(name, None)

    def __getitem__(self, name: str) -> argparse.ArgumentParser:
        parser = super().__getitem__(name)
        if parser is None:
            parser = self._make(name)
            super().__setitem__(name, parser)
        return parser

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self else default

    def values(self) -> list[argparse.ArgumentParser]:  # type: ignore[override]
        return [self[name] for name in self]

    def items(self) -> list[tuple[str, argparse.ArgumentParser]]:  # type: ignore[override]
        return [(name, self[name]) for name in self]


class _FillIn:
    """What a command module's ``add_*_parser(commands)`` sees: its
    ``add_parser`` returns the subcommand's existing parser, given the
    description, epilog and formatter it asks for."""

    def __init__(self, parser: argparse.ArgumentParser):
        self._parser = parser

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        for key, value in kwargs.items():
            setattr(self._parser, key, value)
        return self._parser


def build_parser() -> argparse.ArgumentParser:
    """The whole command line. A subcommand's arguments are added when it is
    parsed (or by ``_Subcommands.fill``). Shell completions are generated
    from it."""
    parser = _Parser(
        prog="gemini-split",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        # Whole option names only, as gemini-cli's: a subcommand's option
        # (pair --list) must never be read as an abbreviation of ours
        # (--list-sessions, --list-extensions), nor split_prompt_words differ.
        allow_abbrev=False,
    )
    parser.add_argument("-v", "--version", action="version", version=f"gemini-split {__version__}")
    parser.add_argument("-p", "--prompt",
                        help="answer this prompt once and exit; piped stdin comes before it, and a pipe "
                             "that has sent nothing within 500 ms is ignored")
    parser.add_argument("-i", "--prompt-interactive", metavar="PROMPT",
                        help="open the REPL and start with this prompt (refused, exit 42, when stdin is piped)")
    parser.add_argument("-m", "--model",
                        help="Gemini model, or an alias: pro, flash, flash-lite, auto (here one model, "
                             "gemini-3.1-pro-preview: gemini-cli's auto asks a router model per prompt, "
                             "gemini-split makes no such call) (default: $GEMINI_MODEL or gemini-2.5-flash)")
    parser.add_argument("-o", "--output-format", choices=OUTPUT_FORMATS,
                        help="one-shot output: text (default), json, or stream-json "
                             "(default: output.format in settings.json, else text)")
    parser.add_argument("--workspace", metavar="DIR",
                        help="directory the local tools may use (default: the current directory)")
    _add_client_connection_args(parser)
    parser.add_argument("--approval-mode", choices=[m.value for m in ApprovalMode] + list(SEED_APPROVAL_MODES),
                        help="default: ask before edits, shell and network; auto_edit: edits run; "
                             "yolo: nothing asks; plan: read-only tools only, the model answers with a plan; "
                             "reject_dangerous: nothing asks, what would is refused; auto_approve: yolo "
                             "(default: $GEMINI_APPROVAL_MODE, general.defaultApprovalMode, or default)")
    parser.add_argument("-y", "--yolo", action="store_true", help="shortcut for --approval-mode yolo")
    parser.add_argument("--allowed-mcp-server-names", action="append", metavar="NAME",
                        help="start only these MCP servers of settings.json (repeat or separate with commas)")
    parser.add_argument("--allowed-tools", action="append", default=[], metavar="TOOL",
                        help="run these without asking, e.g. 'run_shell_command(git status)'; "
                             "repeat or separate with commas")
    parser.add_argument("--policy", action="append", metavar="FILE|DIR",
                        help="policy rules (gemini-cli TOML) to use instead of ~/.gemini/policies; "
                             "repeat or separate with commas")
    parser.add_argument("--admin-policy", action="append", metavar="FILE|DIR",
                        help="admin policy rules, above every other rule (ignored when "
                             "/etc/gemini-cli/policies has some); repeat or separate with commas")
    parser.add_argument("-s", "--sandbox", action=_OptionalValueAfterEquals, choices=("auto", "bwrap", "none"),
                        const="auto", metavar="=MODE",
                        help="run shell commands under bubblewrap: the file system read-only but for the "
                             "workspace, no network, home hidden; --sandbox=bwrap|auto|none (a bare -s is "
                             "auto; $GEMINI_SANDBOX=true|false wins, as in gemini-cli)")
    parser.add_argument("--sandbox-network", action="store_true",
                        help="let sandboxed shell commands use the network")
    parser.add_argument("--max-turns", type=positive_int, metavar="N",
                        help="embedded mode: model calls allowed per prompt (default 100)")
    parser.add_argument("-d", "--debug", action="store_true",
                        help="log details to stderr, with the context files and system instruction sent")
    _add_gemini_cli_args(parser)

    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    assert isinstance(commands, _Subcommands)
    commands.add_lazy("serve", "run the agent loop as a server for remote clients",
                      "gemini_split.commands.parsers.serve:add_parser")
    commands.add_lazy("attach", "join one of your sessions running elsewhere (--watch: read-only)",
                      "gemini_split.commands.parsers.attach:add_parser")
    commands.add_lazy("server", "manage named servers (profiles for --server)",
                      "gemini_split.commands.parsers.server:add_parser")
    commands.add_lazy("completions", "print a shell completion script",
                      "gemini_split.commands.parsers.completions:add_parser")
    commands.add_lazy("protocol", "facts about the wire protocol (its JSON Schema)",
                      "gemini_split.commands.parsers.protocol:add_parser")
    commands.add_lazy("daemon", "control the per-user local daemon (GEMINI_SERVER_MODE=local)",
                      "gemini_split.commands.parsers.daemon:add_parser")
    commands.add_lazy("extensions", "manage gemini-cli extensions (~/.gemini/extensions): install, list, enable…",
                      "gemini_split.commands.parsers.extensions:add_parser")
    commands.add_lazy("mcp", "manage MCP servers (mcpServers in settings.json); serve our tools over MCP",
                      "gemini_split.commands.parsers.mcp:add_parser")
    commands.add_lazy("hooks", "the hooks of settings.json (gemini-cli's \"hooks\" section)",
                      "gemini_split.commands.parsers.hooks:add_parser")
    commands.add_lazy("skills", "manage Agent Skills: list, install PATH, uninstall NAME",
                      "gemini_split.commands.parsers.skills:add_parser")
    commands.add_lazy("restore", "list the checkpoints (general.checkpointing.enabled), or restore one",
                      "gemini_split.commands.parsers.restore:add_parser")
    commands.add_lazy("pair", "sign a browser in to a serve --web server: a one-time link and QR code",
                      "gemini_split.commands.parsers.pair:add_parser")
    return parser


def _add_gemini_cli_args(parser: argparse.ArgumentParser) -> None:
    """The rest of gemini-cli's flags, with its meanings."""
    parser.add_argument("--include-directories", action="append", default=[], metavar="DIR[,DIR…]",
                        help="more directories the tools may use besides the workspace (repeat or "
                             "separate with commas)")
    parser.add_argument("--skip-trust", action="store_true",
                        help="trust the current folder for this run (its .gemini/settings.json and "
                             "GEMINI.md files apply)")
    parser.add_argument("-w", "--worktree", nargs="?", const="", metavar="NAME",
                        help="start in a new git worktree, .gemini/worktrees/NAME on branch worktree-NAME, "
                             "made from the current commit and kept at exit (default NAME: the time and "
                             "4 random characters); needs experimental.worktrees in settings.json")
    parser.add_argument("-e", "--extensions", action="append", metavar="NAME",
                        help="use only these installed extensions for this run (repeat or separate with "
                             "commas; 'none': none); default: those enabled for this folder")
    parser.add_argument("-l", "--list-extensions", action="store_true",
                        help="list the installed extensions and exit")
    parser.add_argument("--screen-reader", action="store_true",
                        help="plain output for screen readers: no spinner or status line")
    parser.add_argument("--raw-output", action="store_true",
                        help="print the model's text as is, escape sequences included (unsafe with "
                             "untrusted output)")
    parser.add_argument("--accept-raw-output-risk", action="store_true",
                        help="no warning for --raw-output")
    parser.add_argument("--acp", "--experimental-acp", dest="acp", action="store_true",
                        help="run as an Agent Client Protocol agent on stdin/stdout, for editors such as "
                             "Zed (docs/acp.md); with --server the model loop runs on that server")
    parser.add_argument("--log-file", metavar="FILE",
                        help="--acp: log here (default: gemini-acp.log in $GEMINI_SPLIT_HOME), "
                             "rotated at 2 MB to FILE.old")


def _add_client_connection_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("connecting to a server")
    group.add_argument("--server", metavar="ADDRESS|PROFILE",
                       help="ws://host:port, wss://…, grpc://host:port, grpcs://…, 'stdio:COMMAND …', unix:/PATH, "
                            "'local' (your local daemon, started when needed), or a profile name "
                            "(default: embedded, in this process)")
    group.add_argument("--token", help="server token (default: $GEMINI_SERVER_TOKEN)")
    group.add_argument("--ca", metavar="FILE", help="CA certificate to trust for wss:// and grpcs://")
    group.add_argument("--insecure", action="store_true",
                       help="do not verify the server's TLS certificate (testing only)")
    group.add_argument("--send-api-key", action="store_true",
                       help="give the server your own Gemini API key ($GEMINI_API_KEY) for your sessions "
                            "(needs serve --allow-client-credentials; sent only over wss:// or to this machine)")
    group.add_argument("--tools", choices=("client", "server"), default="client",
                       help="where tools run: here (client, the default) or on the server, in a workspace of "
                            "its own, asking you to approve over the wire (needs serve --server-tools)")
    group.add_argument("--project", metavar="NAME",
                       help="with --tools server: work in the server's project NAME (serve --project) "
                            "instead of a fresh workspace")
    group.add_argument("--reconnect-timeout", type=_seconds, default=120.0, metavar="SECONDS",
                       help="keep trying to reconnect and resume this long after the connection "
                            "to a server drops (default 120; 0: give up at once)")
    sessions = parser.add_argument_group("sessions (kept by the server, or in $GEMINI_SPLIT_HOME/sessions)")
    sessions.add_argument("-r", "--resume", nargs="?", const="latest", metavar="latest|N|ID",
                          help="continue an earlier conversation of this project: the latest with an "
                               "answer (default), number N of --list-sessions, or the one with this id "
                               "(from any project; any unambiguous beginning of it, such as the short id "
                               "the banner shows), in the REPL or with -p")
    sessions.add_argument("--session-id", type=_session_id, metavar="ID",
                          help="start a new session under this id (letters, digits, '-', '_'), to "
                               "--resume it by that id later; an id you already use is refused")
    sessions.add_argument("--list-sessions", action="store_true",
                          help="list your sessions of this project, numbered, oldest first (title, "
                               "last update, id)")
    sessions.add_argument("--delete-session", metavar="N|ID",
                          help="delete one of your sessions: number N of --list-sessions, or its id")
    sessions.add_argument("--rewind-to", type=_prompt_number, metavar="N",
                          help="with --resume: rewind the conversation to before its N-th prompt (1: the "
                               "first), as /rewind does, and run nothing")
    sessions.add_argument("--revert-files", action="store_true",
                          help="with --rewind-to: also put back the files the agent's edit tools changed since "
                               "then (a file changed by hand since is left as it is, and named)")


def _prompt_number(text: str) -> int:
    """A prompt's number in its session: 1, 2, 3…"""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a prompt number (1: the first prompt)")
    return int(text)


def _session_id(text: str) -> str:
    """gemini-cli's ``--session-id`` rule (plus a length limit)."""
    value = text.strip()
    if not value:
        raise argparse.ArgumentTypeError("The --session-id option cannot be empty.")
    if len(value) > 128 or not all(c.isascii() and (c.isalnum() or c in "-_") for c in value):
        raise argparse.ArgumentTypeError(
            f"Invalid session ID {value[:60]!r}: only letters, digits, dashes and underscores are allowed "
            "(at most 128).")
    return value


class _OptionalValueAfterEquals(argparse.Action):
    """gemini-cli's boolean ``-s/--sandbox``, which also takes a value, but
    only as ``--sandbox=MODE``: the word after a bare ``-s`` stays the
    prompt (``gemini-split -s "question"``). :func:`split_prompt_words`
    never hands it the next word."""

    value_only_after_equals = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, nargs="?", **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, self.const if values is None else values)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError("must be zero or more")
    return value


def main(argv: list[str] | None = None, env: Environment | None = None) -> ExitStatus:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``) in ``env``
    (default: this process's streams, environment and directory, which also
    makes this run own the process: its signals)."""
    from_command_line = argv is None and env is None
    env = env or Environment(owns_process=True)
    parser = build_parser()
    try:
        argv, words = split_prompt_words(parser, sys.argv[1:] if argv is None else list(argv))
        if words and words[0] in GEMINI_CLI_ONLY_COMMANDS:
            raise UsageError(f"gemini-split: '{words[0]}' is a gemini-cli command that gemini-split does not "
                             f"offer: {GEMINI_CLI_ONLY_COMMANDS[words[0]]}. Nothing was sent to the model "
                             "(to ask the model, use -p).")
        args = parser.parse_args(argv)
        args.query = words
        if args.command is None and args.session_id is not None and args.resume is not None:
            parser.error("--resume and --session-id cannot be combined: one continues a session, "
                         "the other starts a new one")
        if args.command is None:
            _check_rewind_flags(parser, args)
    except UsageError as exc:
        env.warn(str(exc))
        return ExitStatus.USAGE
    except SystemExit as exc:  # --help and --version
        return ExitStatus(exc.code or 0)
    if args.command == "serve" and from_command_line and not args.stdio:
        serve_on_system_malloc()  # returns only when it does not re-execute
    if args.command != "daemon":  # a daemon serves many projects: it reads none's .env
        env = load_env_file(env, skip_trust=getattr(args, "skip_trust", False))
    stop_logging = _log_to(env, args.debug) if args.debug or args.command in (None, "serve", "daemon") else None
    try:
        if args.command is not None:
            # The subcommand's parser named its runner (gemini_split/commands/parsers/).
            module, _, function = args.run.partition(":")
            runner = getattr(importlib.import_module(module), function)
            return runner(args, env, parser) if args.command == "completions" else runner(args, env)
        if env.owns_process:
            # Here, not in run(): the tools package would load the protocol
            # on --version's path. SIGTERM/SIGHUP: no tool process outlives us.
            with paused_collection(env.owns_process):  # the protocol and msgspec
                from gemini_split.tools.builtin.processes import install_signal_cleanup

            install_signal_cleanup()
        return _run_client(args, env)
    except ConfigurationError as exc:
        env.warn(f"gemini-split: {exc}")
        return exit_status_for(exc)
    except WorktreeFailed as exc:  # gemini-cli's words, whole
        env.warn(str(exc))
        return exit_status_for(exc)
    except KeyboardInterrupt as exc:
        env.warn("Interrupted.")
        return exit_status_for(exc)
    except BrokenPipeError:
        # The reader of our output went away (`| head`): stop quietly, as
        # tools ended by SIGPIPE do; not our failure.
        return ExitStatus.SUCCESS
    except BaseExceptionGroup as group:  # the same, from inside a nursery
        if group.split(BrokenPipeError)[1] is None:
            return ExitStatus.SUCCESS
        raise
    finally:
        if stop_logging is not None:
            stop_logging()


#: In the environment of the process ``serve`` re-executed itself into
#: (:func:`serve_on_system_malloc`); removed again at once.
REEXEC_MARK = "GEMINI_SPLIT_SERVE_REEXEC"


def serve_on_system_malloc() -> None:
    """Re-execute this process once, the same command line, with
    ``PYTHONMALLOC=malloc``: a listening ``serve`` keeps its small objects
    in the C library's heap, where ``malloc_trim`` can give them back to the
    system after a burst of sessions (CPython's own allocator returns a
    256 KiB arena only once all its objects are gone, which after many
    interleaved sessions is rare; see gemini_split/memory.py and
    docs/performance.md for the figures and the cost per start).

    Nothing happens when the operator set ``PYTHONMALLOC`` (their choice
    stands) or where the interpreter cannot say how it was started. In the
    re-executed process it removes the variable and its mark from the
    environment, so the tools, hooks and MCP servers it starts see the
    operator's environment, and returns: it never execs twice."""
    environ = os.environ
    if environ.pop(REEXEC_MARK, None) is not None:
        environ.pop("PYTHONMALLOC", None)  # set by the process before this one
        return
    command = getattr(sys, "orig_argv", None)
    if "PYTHONMALLOC" in environ or not command or not sys.executable or not hasattr(os, "execv"):
        return
    environ["PYTHONMALLOC"] = "malloc"
    environ[REEXEC_MARK] = "1"
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    try:
        os.execv(sys.executable, command)
    except OSError:  # serve on as we are
        del environ["PYTHONMALLOC"], environ[REEXEC_MARK]


def split_prompt_words(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[list[str], list[str]]:
    """gemini-cli's positional prompt (``gemini-split "explain this"``):
    the words that are neither options, option values nor a subcommand.
    Returns the rest of the command line and the words. When the first such
    word names a subcommand, everything is left to the subcommand."""
    commands: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            commands.update(action.choices)
    rest: list[str] = []
    words: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            words.extend(argv[i + 1:])
            break
        if token.startswith("-") and token != "-":
            rest.append(token)
            action = parser._option_string_actions.get(token.split("=", 1)[0])
            takes_value = action is not None and action.nargs != 0 and "=" not in token
            if takes_value and action.nargs == "?" and (i + 1 >= len(argv) or argv[i + 1].startswith("-")
                                                        or getattr(action, "value_only_after_equals", False)):
                takes_value = False
            if takes_value and i + 1 < len(argv):
                rest.append(argv[i + 1])
                i += 1
        elif not words and token in commands:
            return argv, []
        else:
            words.append(token)
        i += 1
    return rest, words


def _check_rewind_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.revert_files and args.rewind_to is None:
        parser.error("--revert-files goes with --rewind-to N")
    if args.rewind_to is None:
        return
    if args.resume is None:
        parser.error("--rewind-to rewinds an earlier session: name it with --resume ID (or --resume latest)")
    if args.prompt is not None or args.query or args.prompt_interactive is not None:
        parser.error("--rewind-to runs no prompt: rewind first, then --resume the session with your prompt")


def _run_client(args: argparse.Namespace, env: Environment) -> ExitStatus:
    if args.list_extensions:
        from gemini_split.commands.run_extensions import run_list_extensions

        return run_list_extensions(env)
    if args.worktree is not None:
        from gemini_split.commands.enter_worktree import enter_worktree

        env = enter_worktree(args, env)
    if args.acp:
        from gemini_split.commands.run_acp import run_acp

        return run_acp(args, env)
    if args.rewind_to is not None:
        from gemini_split.commands.run_rewind import run_rewind

        return run_rewind(args, env)
    if args.list_sessions or args.delete_session:
        from gemini_split.commands.run_sessions import run_delete_session, run_list_sessions

        return run_delete_session(args, env) if args.delete_session else run_list_sessions(args, env)
    with paused_collection(env.owns_process):  # the bulk of start-up: trio, the client
        from gemini_split.commands.run_oneshot import read_prompt, run_oneshot

    prompt = read_prompt(args, env)
    if prompt is None:
        from gemini_split.commands.run_repl import run_repl

        return run_repl(args, env)
    return run_oneshot(args, env, prompt)


def _log_to(env: Environment, debug: bool) -> Callable[[], None]:
    """Send warnings (or everything, with --debug) to ``env.stderr`` for this
    run; returns the function that stops it. Only for commands that run a
    session: ``server list`` and ``completions`` log nothing, and do not pay
    for importing logging. Per run, not per process (``logging.basicConfig``
    would keep the first run's stream): ``main`` may run many times in one
    process, each with its own streams."""
    import logging

    from gemini_split.log_limits import limit_log_handler

    handler = logging.StreamHandler(env.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # Bounded one-line messages, refusals rate-limited: a peer cannot flood the log.
    limit_log_handler(handler)
    root = logging.getLogger()
    httpx = logging.getLogger("httpx")
    mcp = logging.getLogger("mcp")
    # Every level this run may change (serve and daemon raise ours to INFO),
    # put back at the end: a later run in the same process (an embedding
    # program, a test) must not inherit them.
    touched = [root, httpx, mcp, logging.getLogger("gemini_split"), logging.getLogger("gemini_split_unix")]
    saved = [logger.level for logger in touched]
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    if not debug:
        # httpx logs every request at INFO; keep the user's terminal quiet.
        httpx.setLevel(logging.WARNING)
        # The MCP SDK logs a server's stray output with tracebacks; gemini-split
        # reports a failing MCP server itself, in one line (see /mcp).
        mcp.setLevel(logging.CRITICAL)

    def stop() -> None:
        root.removeHandler(handler)
        for logger, level in zip(touched, saved):
            logger.setLevel(level)

    return stop


def run() -> None:
    """Console-script entry point: :func:`main`, then leave with its status
    (:func:`exit_without_teardown`)."""
    exit_without_teardown(int(main()))


def exit_without_teardown(status: int) -> None:
    """Leave the process as ``sys.exit(status)`` would, without tearing the
    interpreter down.

    What the interpreter does at exit that anyone can see is done first, in
    its order: wait for the threads that are not daemons, run the ``atexit``
    handlers (logging's flush, ``weakref.finalize`` clean-ups such as
    temporary directories), flush stdout and stderr. What is skipped is
    freeing every module and object one by one, which Python does not
    promise to finish anyway (``__del__`` may not run at exit), and which
    costs a one-shot call here about as much CPU as everything it does after
    its imports (~40 ms; bench/oneshot.py). When a flush fails because the
    reader went away (``| head``), what is left unwritten is dropped and
    the status stands, without Python's "Exception ignored" at exit."""
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_handlers is None:  # not CPython: the ordinary way
        sys.exit(status)
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join()
    run_exit_handlers()
    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        try:
            stream.flush()
        except BrokenPipeError:
            _discard(stream.fileno())
        except (OSError, ValueError):
            sys.exit(status)
    os._exit(status & 0xFF)  # what sys.exit makes of any int


def _discard(fd: int) -> None:
    """Point ``fd`` at /dev/null: its reader is gone, and whatever is still
    written to it is dropped."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
