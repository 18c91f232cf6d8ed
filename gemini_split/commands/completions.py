"""``gemini-split completions bash|zsh|fish``: shell completion scripts.

The scripts are generated from :func:`gemini_split.cli.build_parser`, never
written by hand: every subcommand, option and choice the parser knows is
offered, and nothing else. Values complete as follows: ``choices`` from the
parser; profile names (from ``gemini-split server list --names``) after
``--server`` and for arguments marked ``completer = "profile"``; files for
metavars naming a FILE; directories for DIR. The copies in ``completions/``
are regenerated with::

    for s in bash zsh fish; do gemini-split completions $s > completions/$(…); done

(``tests/test_completions.py`` checks they are current and prints the exact
commands.)
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus

SHELLS = ("bash", "zsh", "fish")
PROG = "gemini-split"
#: Where each shell's script lives in the repository.
FILE_NAMES = {"bash": "gemini-split.bash", "zsh": "_gemini-split", "fish": "gemini-split.fish"}


def add_completions_parser(commands: Any) -> None:
    p = commands.add_parser(
        "completions",
        help="print a shell completion script",
        description="Print the completion script for a shell. Profile names complete after "
                    "--server.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="install:\n"
               "  bash:  gemini-split completions bash > ~/.local/share/bash-completion/completions/gemini-split\n"
               "  zsh:   gemini-split completions zsh > ~/.zfunc/_gemini-split   (with ~/.zfunc in $fpath)\n"
               "  fish:  gemini-split completions fish > ~/.config/fish/completions/gemini-split.fish\n",
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")


def run_completions(args: argparse.Namespace, env: Environment) -> ExitStatus:
    from gemini_split.cli import build_parser

    env.stdout.write(generate(args.shell, build_parser()))
    env.stdout.flush()
    return ExitStatus.SUCCESS


def generate(shell: str, parser: argparse.ArgumentParser) -> str:
    spec = _command_spec(parser, [])
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](spec)


# --- what the parser says ---------------------------------------------------------


@dataclass
class _Option:
    flags: list[str]
    takes_value: bool
    help: str
    #: "choices", "profile", "file", "dir" or "" (a free value).
    complete: str = ""
    choices: list[str] = field(default_factory=list)
    repeatable: bool = False
    metavar: str = ""


@dataclass
class _Command:
    path: list[str]
    options: list[_Option]
    positionals: list[_Option]
    subcommands: list[tuple[str, str, _Command]]

    @property
    def context(self) -> str:
        return " ".join(self.path)

    def walk(self) -> Iterator[_Command]:
        yield self
        for _, _, sub in self.subcommands:
            yield from sub.walk()


def _command_spec(parser: argparse.ArgumentParser, path: list[str]) -> _Command:
    options, positionals, subcommands = [], [], []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                if name in helps:  # aliases have no help entry: skip them
                    subcommands.append((name, _clean_help(helps[name]), _command_spec(sub, [*path, name])))
            continue
        option = _Option(
            flags=list(action.option_strings),
            takes_value=action.nargs != 0,
            help=_clean_help(_expand_help(action)),
            repeatable=isinstance(action, argparse._AppendAction | argparse._CountAction),
            metavar=_metavar(action),
        )
        option.complete, option.choices = _value_completion(action)
        (options if action.option_strings else positionals).append(option)
    return _Command(path, options, positionals, subcommands)


def _metavar(action: argparse.Action) -> str:
    metavar = action.metavar if isinstance(action.metavar, str) else None
    return metavar or action.dest.upper()


def _value_completion(action: argparse.Action) -> tuple[str, list[str]]:
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return "choices", [str(c) for c in action.choices]
    marked = getattr(action, "completer", None)
    if marked:
        return marked, []
    metavar = _metavar(action)
    if action.dest == "server" or "PROFILE" in metavar:
        return "profile", []
    if "FILE" in metavar:
        return "file", []
    if metavar == "DIR" or metavar.endswith("DIR"):
        return "dir", []
    return "", []


def _expand_help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%" in text:
        try:
            text = text % {**vars(action), "prog": PROG}
        except (KeyError, TypeError, ValueError):
            pass
    return text


def _clean_help(text: str) -> str:
    text = " ".join(text.split())
    text = re.split(r"(?<=[a-z)])\. (?=[A-Z])", text, maxsplit=1)[0]
    return text if len(text) <= 80 else text[:79] + "…"


# --- bash -----------------------------------------------------------------------------


def _bash(root: _Command) -> str:
    commands = list(root.walk())
    skip_cases, enter_cases, value_cases, option_cases, word_cases = [], [], [], [], []
    for cmd in commands:
        ctx = cmd.context
        value_flags = [f for o in cmd.options if o.takes_value for f in o.flags]
        if value_flags:
            skip_cases.append(" | ".join(_bq(f"{ctx}|{f}") for f in value_flags) + ") skip=1; continue ;;")
        for name, _, sub in cmd.subcommands:
            enter_cases.append(f'{_bq(f"{ctx}|{name}")}) ctx={_bq(sub.context)}; npos=0; continue ;;')
        for option in cmd.options:
            if option.takes_value:
                pattern = " | ".join(_bq(f"{ctx}|{f}") for f in option.flags)
                value_cases.append(f"{pattern}) {_bash_values(option)}; return ;;")
        flags = " ".join(f for o in cmd.options for f in o.flags)
        option_cases.append(f'{_bq(ctx)}) words={_bq(flags)} ;;')
        branches = []
        if cmd.subcommands:
            names = " ".join(name for name, _, _ in cmd.subcommands)
            branches.append(f'0) words={_bq(names)} ;;')
        for i, positional in enumerate(cmd.positionals):
            if positional.complete:
                branches.append(f"{i}) {_bash_values(positional)}; return ;;")
        if branches:
            word_cases.append(f'{_bq(ctx)}) case $npos in {" ".join(branches)} esac ;;')
    ind = "\n            "
    return f"""\
# bash completion for {PROG}
# Generated by `{PROG} completions bash` from the argument parser: do not edit.
# Install: source it from ~/.bashrc, or save it as
# ~/.local/share/bash-completion/completions/{PROG}

_gemini_split_profiles() {{
    local prog="${{COMP_WORDS[0]}}"
    command -v "$prog" >/dev/null 2>&1 || prog={PROG}
    "$prog" server list --names 2>/dev/null
}}

_gemini_split() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="" ctx="" w words="" skip=0 npos=0 i
    COMPREPLY=()
    # Where are we: the subcommand path (ctx) and how many positional
    # arguments it already has (npos), skipping the values of options.
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${{COMP_WORDS[i]}}"
        if ((skip)); then
            skip=0
            [[ "$w" == "=" ]] && skip=1
            continue
        fi
        [[ "$w" == "=" ]] && {{ skip=1; continue; }}
        case "$ctx|$w" in
            {ind.join(skip_cases + enter_cases)}
        esac
        [[ "$w" == -* ]] || ((npos++))
    done
    prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    [[ "$prev" == "=" ]] && prev="${{COMP_WORDS[COMP_CWORD-2]}}"
    [[ "$cur" == "=" ]] && cur=""
    if ((COMP_CWORD > 1)); then
        case "$ctx|$prev" in
            {ind.join(value_cases)}
        esac
    fi
    if [[ "$cur" == -* ]]; then
        case "$ctx" in
            {ind.join(option_cases)}
        esac
    else
        case "$ctx" in
            {ind.join(word_cases)}
        esac
    fi
    [[ -n "$words" ]] && COMPREPLY=($(compgen -W "$words" -- "$cur"))
    return 0
}}

complete -F _gemini_split {PROG}
"""


def _bash_values(option: _Option) -> str:
    if option.complete == "choices":
        return f'COMPREPLY=($(compgen -W {_bq(" ".join(option.choices))} -- "$cur"))'
    if option.complete == "profile":
        return 'COMPREPLY=($(compgen -W "$(_gemini_split_profiles)" -- "$cur"))'
    if option.complete == "file":
        return 'compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur"))'
    if option.complete == "dir":
        return 'compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur"))'
    return ":"


def _bq(text: str) -> str:
    """Double-quoted for bash (the texts here hold no $, ` or \\)."""
    return '"' + text.replace('"', '\\"') + '"'


# --- zsh --------------------------------------------------------------------------------


def _zsh(root: _Command) -> str:
    functions = []
    for cmd in root.walk():
        name = _zsh_function(cmd)
        specs = []
        for option in cmd.options:
            specs.append(_zsh_option(option))
        for i, positional in enumerate(cmd.positionals):
            specs.append(f"'{i + 1}:{_zq(positional.metavar.lower())}:{_zsh_action(positional)}'")
        body = []
        if cmd.subcommands:
            entries = " ".join(f"'{_zq(n, desc=True)}:{_zq(h)}'" for n, h, _ in cmd.subcommands)
            specs.append("'1: :->command'")
            specs.append("'*:: :->args'")
            cases = "\n".join(f"        {n}) {_zsh_function(sub)} && ret=0 ;;" for n, _, sub in cmd.subcommands)
            body = [
                "  case $state in",
                "    command)",
                "      local -a commands",
                f"      commands=({entries})",
                "      _describe -t commands 'command' commands && ret=0 ;;",
                "    args)",
                "      curcontext=\"${curcontext%:*:*}:" + "-".join([PROG, *cmd.path]) + "-$words[1]:\"",
                "      case $words[1] in",
                cases,
                "      esac ;;",
                "  esac",
            ]
        spec_lines = " \\\n    ".join(specs)
        functions.append("\n".join([
            f"{name}() {{",
            "  local curcontext=\"$curcontext\" state state_descr line ret=1",
            "  typeset -A opt_args",
            f"  _arguments -s -S -C \\\n    {spec_lines} && ret=0",
            *body,
            "  return ret",
            "}",
        ]))
    return f"""\
#compdef {PROG}
# zsh completion for {PROG}
# Generated by `{PROG} completions zsh` from the argument parser: do not edit.
# Install: save as _{PROG} in a directory of $fpath (e.g. ~/.zfunc), then compinit.

_gemini_split_profiles() {{
  local -a profiles
  profiles=(${{(f)"$(${{words[1]:-{PROG}}} server list --names 2>/dev/null)"}})
  _describe -t profiles 'profile' profiles
}}

{chr(10).join(f + chr(10) for f in functions)}
if [[ "$funcstack[1]" == "_{PROG}" ]]; then
  _gemini_split "$@"
else
  compdef _gemini_split {PROG}
fi
"""


def _zsh_function(cmd: _Command) -> str:
    return "_" + "_".join(["gemini_split", *[p.replace("-", "_") for p in cmd.path]])


def _zsh_option(option: _Option) -> str:
    help_text = f"[{_zq(option.help, desc=True)}]"
    value = f":{_zq(option.metavar.lower())}:{_zsh_action(option)}" if option.takes_value else ""
    star = "*" if option.repeatable else ""
    if len(option.flags) == 1:
        return f"'{star}{option.flags[0]}{help_text}{value}'"
    exclusive = "" if option.repeatable else f"({' '.join(option.flags)})"
    flags = ",".join(option.flags)
    return f"'{exclusive}'{star}{{{flags}}}'{help_text}{value}'"


def _zsh_action(option: _Option) -> str:
    if option.complete == "choices":
        return "(" + " ".join(_zq(c) for c in option.choices) + ")"
    if option.complete == "profile":
        return "_gemini_split_profiles"
    if option.complete == "file":
        return "_files"
    if option.complete == "dir":
        return "_files -/"
    return " "


def _zq(text: str, desc: bool = False) -> str:
    """For inside a single-quoted _arguments spec."""
    text = text.replace("\\", "\\\\").replace("'", "'\\''").replace(":", "\\:")
    if desc:
        text = text.replace("[", "\\[").replace("]", "\\]")
    return text


# --- fish --------------------------------------------------------------------------------


def _fish(root: _Command) -> str:
    commands = list(root.walk())
    cases = []
    for cmd in commands:
        ctx = cmd.context
        value_flags = [f for o in cmd.options if o.takes_value for f in o.flags]
        if value_flags:
            cases.append("            case " + " ".join(_fq(f"{ctx}|{f}") for f in value_flags) + "\n"
                         "                set skip 1")
        for name, _, sub in cmd.subcommands:
            cases.append(f"            case {_fq(f'{ctx}|{name}')}\n                set ctx {_fq(sub.context)}")
    lines = [
        f"# fish completion for {PROG}",
        f"# Generated by `{PROG} completions fish` from the argument parser: do not edit.",
        f"# Install: save as ~/.config/fish/completions/{PROG}.fish",
        "",
        "function __gemini_split_profiles",
        "    set -l prog (commandline -opc)[1]",
        f"    command -q $prog; or set prog {PROG}",
        "    $prog server list --names 2>/dev/null",
        "end",
        "",
        "# The subcommand path of the command line so far, skipping option values.",
        "function __gemini_split_context",
        "    set -l words (commandline -opc)",
        "    set -l ctx ''",
        "    set -l skip 0",
        "    for w in $words[2..-1]",
        "        if test $skip = 1",
        "            set skip 0",
        "            continue",
        "        end",
        '        switch "$ctx|$w"',
        *cases,
        "        end",
        "    end",
        "    echo $ctx",
        "end",
        "",
        "function __gemini_split_at",
        "    set -l ctx (__gemini_split_context)",
        '    test "$ctx" = "$argv[1]"',
        "end",
        "",
        f"complete -c {PROG} -f",
    ]
    for cmd in commands:
        condition = f"-n '__gemini_split_at \"{cmd.context}\"'"
        for name, help_text, _ in cmd.subcommands:
            lines.append(f"complete -c {PROG} {condition} -a {_fq(name)} -d {_fq(help_text)}")
        for option in cmd.options:
            parts = [f"complete -c {PROG}", condition]
            for flag in option.flags:
                if flag.startswith("--"):
                    parts.append(f"-l {flag[2:]}")
                elif len(flag) == 2:
                    parts.append(f"-s {flag[1]}")
                else:
                    parts.append(f"-o {flag[1:]}")
            if option.takes_value:
                parts.append(_fish_values(option))
            parts.append(f"-d {_fq(option.help)}")
            lines.append(" ".join(parts))
        for positional in cmd.positionals:
            if positional.complete:
                lines.append(f"complete -c {PROG} {condition} {_fish_values(positional)} -d {_fq(positional.help)}")
    return "\n".join(lines) + "\n"


def _fish_values(option: _Option) -> str:
    if option.complete == "choices":
        return "-x -a " + _fq(" ".join(option.choices))
    if option.complete == "profile":
        return "-x -a '(__gemini_split_profiles)'"
    if option.complete == "file":
        return "-r -F"
    if option.complete == "dir":
        return "-x -a '(__fish_complete_directories)'"
    return "-x"


def _fq(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
