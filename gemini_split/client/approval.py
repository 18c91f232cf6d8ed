"""Whether a tool call may run: the policy, and how the user is asked.

The policy decides ``ALLOW``, ``ASK`` or ``DENY`` from the tool and its
arguments. ``ASK`` goes to an :class:`Asker` (the REPL asks inline); with no
asker (one-shot mode, no terminal) the call is refused and the model is told
why, as seed 001's REJECT_DANGEROUS_TOOLS.

The modes (``--approval-mode``, ``GEMINI_APPROVAL_MODE``, ``--yolo``):

=============  ============  ===================  =======================
mode           read-only     write_file, replace  shell, web_fetch, other
=============  ============  ===================  =======================
``default``    run           ask                  ask
``auto_edit``  run           run                  ask
``yolo``       run           run                  run
=============  ============  ===================  =======================

``--allowed-tools`` entries (gemini-cli style) make calls run without asking
in any mode: ``read_file`` or ``write_file`` allow that tool outright;
``run_shell_command`` allows every command; ``run_shell_command(git status)``
allows a command only if *every* part of it (see
:mod:`gemini_split.client.shell_split`) starts with an allowed prefix, word
by word. A command the splitter cannot parse is never allowed by a prefix:
it is asked about.

Files that run code later — anything under ``.git/`` (hooks, config),
``.envrc``, ``.vscode/`` tasks and settings, shell rc files and the like
(:func:`executes_later`) — are asked about before every edit in every mode
but ``yolo``, even when the tool is allowed (by ``auto_edit``,
``--allowed-tools`` or an earlier ALWAYS), and the question says why
(:attr:`ApprovalRequest.executes_later`).

Prefix matching trusts the allowed command itself: allowing ``git`` allows
``git -c core.pager=… log``, allowing ``find`` allows ``find -exec``. Allow
the narrowest prefix that does the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from .approval_mode import ApprovalMode, parse_approval_mode  # noqa: F401  (re-exported)
from .tools.base import Tool, ToolKind

SHELL_TOOL = "run_shell_command"
_SHELL_ALIASES = frozenset({SHELL_TOOL, "ShellTool"})


class Decision(Enum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


class Answer(Enum):
    YES = "yes"
    NO = "no"
    ALWAYS = "always"  # yes, and do not ask again for this kind of call this session


@dataclass(frozen=True)
class ApprovalRequest:
    call_id: str
    tool: Tool
    args: dict[str, Any]
    #: Exactly what will happen: the full command, the path, a diff.
    description: str
    #: Why the policy asks (e.g. which parts of a command are not allowed).
    reason: str | None = None
    #: What answering ALWAYS would allow from now on, for the question's wording.
    always_scope: str | None = None
    #: Set when the call edits a file that runs code later (a git hook,
    #: ``.envrc``…): what runs and when, e.g. "a git hook: it runs at your
    #: next git command". The UI should show it prominently.
    executes_later: str | None = None


class Asker(Protocol):
    async def ask(self, request: ApprovalRequest) -> Answer: ...


def parse_allowed_tools(text: str) -> list[str]:
    """Split a comma-separated ``--allowed-tools`` value into entries,
    keeping commas inside parentheses: ``"read_file,run_shell_command(git
    log --format=%h,%s)"`` is two entries."""
    entries: list[str] = []
    depth = 0
    current: list[str] = []
    for c in text:
        if c == "(":
            depth += 1
        elif c == ")" and depth:
            depth -= 1
        if c == "," and depth == 0:
            entries.append("".join(current).strip())
            current = []
            continue
        current.append(c)
    entries.append("".join(current).strip())
    return [e for e in entries if e]


@dataclass(frozen=True)
class Verdict:
    """A decision and, when it is not ALLOW, why."""

    decision: Decision
    reason: str | None = None


class ApprovalPolicy:
    """Decides per call from the mode and the allowed-tools entries.

    ``allowed_tools`` entries are validated here: a malformed entry raises
    :class:`ValueError` saying what is wrong (the CLI shows it). Answers of
    ALWAYS widen the policy for the rest of the session
    (:meth:`remember`)."""

    def __init__(self, mode: ApprovalMode = ApprovalMode.DEFAULT, allowed_tools: list[str] | tuple[str, ...] = ()):
        self.mode = mode
        self.allowed_tools = tuple(allowed_tools)
        #: Tools allowed outright (from entries or ALWAYS answers).
        self.always: set[str] = set()
        #: Allowed shell command prefixes, as word tuples.
        self.shell_prefixes: list[tuple[str, ...]] = []
        for entry in self.allowed_tools:
            self._add_entry(entry)

    def _add_entry(self, entry: str) -> None:
        text = entry.strip()
        if not text:
            raise ValueError("empty --allowed-tools entry")
        if "(" not in text:
            if text.endswith(")"):
                raise ValueError(f"--allowed-tools entry {entry!r}: unbalanced parenthesis")
            self.always.add(SHELL_TOOL if text in _SHELL_ALIASES else text)
            return
        name, _, rest = text.partition("(")
        name = name.strip()
        if not rest.endswith(")"):
            raise ValueError(f"--allowed-tools entry {entry!r}: expected NAME or NAME(ARGS) with a closing ')'")
        inner = rest[:-1].strip()
        if name not in _SHELL_ALIASES:
            raise ValueError(
                f"--allowed-tools entry {entry!r}: only {SHELL_TOOL} takes an argument "
                f"(a command prefix, as in {SHELL_TOOL}(git status)); give other tools by name alone"
            )
        if not inner:
            self.always.add(SHELL_TOOL)
            return
        from .shell_split import ShellParseError, parse_prefix  # only with shell entries

        try:
            self.shell_prefixes.append(parse_prefix(inner))
        except ShellParseError as exc:
            raise ValueError(f"--allowed-tools entry {entry!r}: {exc}") from None

    def check(self, tool: Tool, args: dict[str, Any], *, executes_later: str | None = None) -> Verdict:
        """The decision for one call, with a reason when it is not ALLOW.

        ``executes_later``: the call edits a file that runs code later (see
        :func:`executes_later`); then it is asked about in every mode but
        yolo, whatever is allowed."""
        if tool.kind is ToolKind.READ:
            return Verdict(Decision.ALLOW)
        if self.mode is ApprovalMode.PLAN:
            return Verdict(Decision.DENY, "plan approval mode allows read-only tools only; "
                                          "describe the change in the plan instead")
        if executes_later and self.mode is not ApprovalMode.YOLO:
            return Verdict(Decision.ASK, f"this edits {executes_later}; such files are asked about in every "
                                         "approval mode but yolo")
        if tool.trusted or tool.name in self.always:
            return Verdict(Decision.ALLOW)
        if self.mode is ApprovalMode.YOLO:
            return Verdict(Decision.ALLOW)
        if self.mode is ApprovalMode.AUTO_EDIT and tool.kind is ToolKind.EDIT:
            return Verdict(Decision.ALLOW)
        if tool.name == SHELL_TOOL:
            command = args.get("command")
            if not isinstance(command, str):
                return Verdict(Decision.ASK, "no command given")
            if not self.shell_prefixes:
                return Verdict(Decision.ASK, f"{self.mode.value} approval mode asks before running shell commands")
            from .shell_split import command_allowed

            ok, reasons = command_allowed(command, self.shell_prefixes)
            if ok:
                return Verdict(Decision.ALLOW)
            return Verdict(Decision.ASK, "not covered by --allowed-tools: " + "; ".join(reasons))
        what = {ToolKind.EDIT: "file edits", ToolKind.NETWORK: "network access"}.get(tool.kind, f"running {tool.name}")
        return Verdict(Decision.ASK, f"{self.mode.value} approval mode asks before {what}")

    def decide(self, tool: Tool, args: dict[str, Any]) -> Decision:
        return self.check(tool, args).decision

    def always_scope(self, tool: Tool, args: dict[str, Any]) -> str | None:
        """What :meth:`remember` would allow for this call, in
        ``--allowed-tools`` syntax, or None if ALWAYS cannot be offered (a
        shell command the splitter cannot parse)."""
        if tool.name != SHELL_TOOL:
            return tool.name
        roots = _root_commands(args.get("command"))
        if not roots:
            return None
        return ", ".join(f"{SHELL_TOOL}({r})" for r in roots)

    def remember(self, tool: Tool, args: dict[str, Any]) -> None:
        """The user answered ALWAYS for this call: allow this tool from now
        on — for the shell, the root commands of this command (``git`` for
        ``git status && git diff``), not every command."""
        if tool.name != SHELL_TOOL:
            self.always.add(tool.name)
            return
        for root in _root_commands(args.get("command")):
            if (root,) not in self.shell_prefixes:
                self.shell_prefixes.append((root,))


_EXECUTES_LATER_DIRS = {
    ".git": "a file inside .git (hooks and config run code at your next git command)",
    ".husky": "a git hook managed by husky (it runs at your next git command)",
    ".githooks": "a git hooks directory (its hooks run at your next git command once configured)",
    ".vscode": "editor configuration (.vscode tasks and settings can run commands when you open the folder)",
    ".idea": "IDE configuration (.idea run configurations and settings can run commands)",
    ".devcontainer": "a dev container definition (it runs commands when the container is built)",
    ".direnv": "direnv state (it runs code when you enter the directory)",
    ".ssh": "SSH configuration (keys and config used at your next ssh)",
}
_EXECUTES_LATER_FILES = {
    ".envrc": "direnv's .envrc (it runs when you enter the directory)",
    ".pre-commit-config.yaml": "the pre-commit configuration (its hooks run at your next commit)",
    ".gitconfig": "a git configuration file (it can define commands git runs)",
    ".bashrc": "a shell startup file (it runs when a shell starts)",
    ".bash_profile": "a shell startup file (it runs when a shell starts)",
    ".bash_login": "a shell startup file (it runs when a shell starts)",
    ".bash_logout": "a shell startup file (it runs when a shell exits)",
    ".profile": "a shell startup file (it runs when a shell starts)",
    ".zshrc": "a shell startup file (it runs when a shell starts)",
    ".zshenv": "a shell startup file (it runs when a shell starts)",
    ".zprofile": "a shell startup file (it runs when a shell starts)",
    ".zlogin": "a shell startup file (it runs when a shell starts)",
    ".zlogout": "a shell startup file (it runs when a shell exits)",
    ".cshrc": "a shell startup file (it runs when a shell starts)",
    ".tcshrc": "a shell startup file (it runs when a shell starts)",
    ".kshrc": "a shell startup file (it runs when a shell starts)",
    ".inputrc": "a readline startup file (read when a shell starts)",
    "config.fish": "a shell startup file (it runs when a shell starts)",
    ".npmrc": "an npm configuration file (it can change what npm runs)",
    ".pythonrc": "a Python startup file (it runs when Python starts)",
    "sitecustomize.py": "a Python startup hook (it runs when Python starts)",
    "usercustomize.py": "a Python startup hook (it runs when Python starts)",
}


def executes_later(rel_path: str) -> str | None:
    """If the workspace-relative ``rel_path`` (resolved: no symlinks, ``/``
    or ``os.sep`` separated) is a file that runs code when the user next
    acts — a git hook, ``.envrc``, editor tasks, a shell rc file… — a short
    description of what it is and when it runs; else None.

    Compared case-insensitively (``.GIT/hooks`` is ``.git/hooks`` on a
    case-insensitive file system)."""
    parts = [p for p in rel_path.replace("\\", "/").split("/") if p and p != "."]
    if not parts:
        return None
    lowered = [p.lower() for p in parts]
    for part in lowered[:-1]:
        if part in _EXECUTES_LATER_DIRS:
            return _EXECUTES_LATER_DIRS[part]
    name = lowered[-1]
    if name == ".git":
        return _EXECUTES_LATER_DIRS[".git"]
    if name.endswith(".pth"):
        return "a Python path file (import lines in it run when Python starts)"
    return _EXECUTES_LATER_FILES.get(name)


def _root_commands(command: Any) -> list[str]:
    """The first word of each part of ``command`` (inside eval / bash -c
    too), if every part has a literal one; else []."""
    if not isinstance(command, str):
        return []
    from .shell_split import ShellParseError, split_command, wrapped_command

    roots: list[str] = []
    pending = [command]
    depth = 0
    try:
        while pending:
            depth += 1
            if depth > 5:
                return []
            nxt: list[str] = []
            for text in pending:
                for part in split_command(text):
                    if part.assignments or not all(r.harmless for r in part.redirects):
                        return []  # ALWAYS would not cover it anyway: never offer it
                    if part.group:
                        continue
                    if not part.words or not part.words[0].literal:
                        return []
                    inner = wrapped_command(part)
                    if inner is not None:
                        nxt.append(inner)
                    elif part.words[0].text not in roots:
                        roots.append(part.words[0].text)
            pending = nxt
    except ShellParseError:
        return []
    return roots
