"""Whether a tool call may run: the policy, and how the user is asked.

The decision is the policy engine's (:mod:`gemini_split.policy`, gemini-cli's
TOML rules): ``ALLOW``, ``ASK`` or ``DENY`` from the tool, its arguments and
the approval mode. ``ASK`` goes to an :class:`Asker` (the REPL asks inline);
with no asker (one-shot mode, no terminal) the call is refused and the model
is told why, as seed 001's REJECT_DANGEROUS_TOOLS.

The modes (``--approval-mode``, ``GEMINI_APPROVAL_MODE``, ``--yolo``), as the
lowest-priority rules (:mod:`gemini_split.policy.builtin`):

=============  ============  ===================  =======================
mode           read-only     write_file, replace  shell, web_fetch, other
=============  ============  ===================  =======================
``default``    run           ask                  ask
``auto_edit``  run           run                  ask
``yolo``       run           run                  run
``plan``       run           refused              refused
=============  ============  ===================  =======================

Rules from policy files (``~/.gemini/policies/*.toml``, ``--policy``,
``--admin-policy``, a trusted project's ``.gemini/policies``) outrank the
modes: a ``deny`` rule refuses even in yolo.

``--allowed-tools`` entries (gemini-cli style) are allow rules (in every
mode but plan): ``read_file`` or ``write_file`` allow that tool outright;
``run_shell_command`` allows every command; ``run_shell_command(git status)``
allows a command only if *every* part of it (see
:mod:`gemini_split.shell_split`) starts with an allowed prefix, word
by word. A command the splitter cannot parse is never allowed by a prefix:
it is asked about.

Files that run code later — anything under ``.git/`` (hooks, config),
``.envrc``, ``.vscode/`` tasks and settings, shell rc files and the like
(:func:`executes_later`) — are asked about before every edit in every mode
but ``yolo``, even when the tool is allowed (by ``auto_edit``,
``--allowed-tools``, a policy rule or an earlier ALWAYS), and the question
says why (:attr:`ApprovalRequest.executes_later`).

Prefix matching trusts the allowed command itself: allowing ``git`` allows
``git -c core.pager=… log``, allowing ``find`` allows ``find -exec``. Allow
the narrowest prefix that does the job.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

import msgspec

from gemini_split.agent_invocation import AGENT_TOOL, invocation
from gemini_split.policy import (  # noqa: F401  (Decision, Verdict, parse_allowed_tools re-exported)
    Decision,
    Policy,
    Rule,
    Verdict,
    allowed_tools_rules,
    always_rules,
    parse_allowed_tools,
)

from .approval_mode import ApprovalMode, parse_approval_mode  # noqa: F401  (re-exported)
from .base import Tool
from .plans import plan_write_rule

SHELL_TOOL = "run_shell_command"


def seen_as(tool: Tool, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The tool name and arguments policy rules and the user's tool hooks
    see for a call: the tool's own, or for a call that delegates to a
    sub-agent (``tool.invokes_agent``), gemini-cli 0.61's ``invoke_agent``
    with ``{"agent_name", "prompt"}`` (:mod:`gemini_split.agent_invocation`)."""
    return (AGENT_TOOL, invocation(tool.name, args)) if tool.invokes_agent else (tool.name, args)


class Answer(Enum):
    YES = "yes"
    NO = "no"
    ALWAYS = "always"  # yes, and do not ask again for this kind of call this session


class ProposedEdit(msgspec.Struct, frozen=True):
    """What an edit (``write_file``, ``replace``) would make of its file:
    ``path`` as the approval shows it (relative to the workspace),
    ``before`` the text now (None: no such file), ``after`` the whole text
    it would write."""

    path: str
    before: str | None
    after: str


class Edited(msgspec.Struct, frozen=True):
    """An asker's yes to a :attr:`ApprovalRequest.edit`, with the whole
    text the user changed it to (in their editor): that text is written
    instead of the proposal."""

    content: str


class ApprovalRequest(msgspec.Struct, frozen=True):
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
    #: (1.4) The sub-agent whose call this is ("": the main agent): the
    #: question says which agent asks.
    agent: str = ""
    #: An edit's whole proposed text, for an asker that says it
    #: ``reviews_edits`` (it may answer :class:`Edited`); else None.
    edit: ProposedEdit | None = None
    #: Said with the question, under it (why the editor does not show it).
    note: str | None = None


class Asker(Protocol):
    """Asks the user about a call. An asker whose ``reviews_edits`` is
    true is given :attr:`ApprovalRequest.edit` for edits and may answer
    :class:`Edited` (yes, with the user's text)."""

    async def ask(self, request: ApprovalRequest) -> Answer | Edited: ...


class ApprovalPolicy:
    """The client's view of the policy engine: the current approval mode
    (the REPL changes :attr:`mode`), the rules, and what this session's
    ALWAYS answers added (:meth:`remember`, :meth:`forget`).

    ``allowed_tools`` entries are validated here: a malformed entry raises
    :class:`ValueError` saying what is wrong (the CLI shows it).
    ``policy``: the rules loaded from policy files
    (:func:`gemini_split.policy.load_policy`); default: the modes' only."""

    def __init__(self, mode: ApprovalMode = ApprovalMode.DEFAULT,
                 allowed_tools: list[str] | tuple[str, ...] = (), policy: Policy | None = None):
        self._mode = mode
        #: Told every change of :attr:`mode` (the new one), in order: the
        #: front end's display, the client's announcement of its tools.
        self.listeners: list[Callable[[ApprovalMode], None]] = []
        #: Why a mode may not be switched to now (settings, folder trust, a
        #: server's cap), or None: what :meth:`refusal` asks.
        self.refuses: Callable[[ApprovalMode], str | None] = lambda mode: None
        self.allowed_tools = tuple(allowed_tools)
        self.engine = (policy or Policy()).with_rules(allowed_tools_rules(self.allowed_tools))
        #: Rules added by ALWAYS answers, by (tool, root) so they can be taken back.
        self._granted: dict[tuple[str, str | None], Rule] = {}
        self._plan_dirs: set[Path] = set()

    @property
    def mode(self) -> ApprovalMode:
        """The approval mode in force; setting it tells :attr:`listeners`."""
        return self._mode

    @mode.setter
    def mode(self, mode: ApprovalMode) -> None:
        if mode is self._mode:
            return
        self._mode = mode
        for listener in list(self.listeners):
            listener(mode)

    def refusal(self, mode: ApprovalMode) -> str | None:
        """Why ``mode`` may not be switched to now, or None."""
        return self.refuses(mode)

    def offers(self, tool: Tool, *, interactive: bool) -> bool:
        """Whether the model is offered ``tool`` in the current mode: not
        when the rules refuse every call of it (gemini-cli leaves such a
        tool out of its registry: shell commands in plan mode,
        ``exit_plan_mode`` outside it)."""
        return self.engine.denied_outright(tool.name, self._mode, kind=tool.kind.value,
                                           interactive=interactive) is None

    def allow_plans(self, directory: Path) -> None:
        """Let plan mode write the plans of ``directory`` (once per
        directory: :func:`~.plans.plan_write_rule`)."""
        if directory not in self._plan_dirs:
            self._plan_dirs.add(directory)
            self.engine.add(plan_write_rule(directory))

    def check(self, tool: Tool, args: dict[str, Any], *, executes_later: str | None = None,
              interactive: bool = True, agent: str = "") -> Verdict:
        """The verdict for one call, with a reason when it is not ALLOW.

        ``executes_later``: the call edits a file that runs code later (see
        :func:`executes_later`); then it is asked about in every mode but
        yolo, whatever is allowed. ``interactive``: someone can be asked.
        ``agent``: the sub-agent that calls ("": the main agent), for rules
        with ``subagent``. A call that delegates to a sub-agent
        (``tool.invokes_agent``) is decided as gemini-cli's ``invoke_agent``
        call of it, which rules naming either match."""
        server = getattr(getattr(tool, "server", None), "name", None)
        name, args = seen_as(tool, args)
        return self.engine.decide(name, args, self.mode, kind=tool.kind.value, interactive=interactive,
                                  trusted=tool.trusted, server_name=server, executes_later=executes_later,
                                  subagent=agent or None)

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
        ``git status && git diff``), not every command. (Rules above it, such
        as a policy file's deny, still win.)"""
        if tool.name != SHELL_TOOL:
            self._grant(tool.name, None, always_rules(tool.name)[0])
            return
        roots = _root_commands(args.get("command"))
        for root, rule in zip(roots, always_rules(SHELL_TOOL, roots)):
            self._grant(SHELL_TOOL, root, rule)

    def _grant(self, tool: str, root: str | None, rule: Rule) -> None:
        if (tool, root) not in self._granted:
            self._granted[(tool, root)] = rule
            self.engine.add(rule)

    def forget(self, tool: str, roots: tuple[str, ...] = ()) -> None:
        """Take back what :meth:`remember` allowed (``--allowed-tools`` and
        policy files stay as they are)."""
        for key in [(tool, r) for r in roots] if roots else [(tool, None)]:
            rule = self._granted.pop(key, None)
            if rule is not None:
                self.engine.remove(rule)


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
    too), if every part has a literal one and runs no other command; else [].

    A part that runs another command (``env git status``, ``find -exec``,
    ``xargs``, ``timeout 5 make``) has no root to remember: an allow rule
    covers a wrapper by its own name, so ALWAYS for ``env`` would allow
    ``env rm -rf ~`` unasked — more than the user saw."""
    if not isinstance(command, str):
        return []
    from gemini_split.shell_split import ShellParseError, inner_commands, split_command, wrapped_command

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
                    elif inner_commands(part):
                        return []
                    elif part.words[0].text not in roots:
                        roots.append(part.words[0].text)
            pending = nxt
    except ShellParseError:
        return []
    return roots
