"""Policy rules: what a rule matches, what it decides, and where it came from.

A :class:`Rule` is one ``[[rule]]`` of a gemini-cli policy file after
checking, or a rule gemini-split makes itself (the approval modes, an
``--allowed-tools`` entry, an "always" answer). Priorities are gemini-cli's
tiers: ``tier + priority / 1000``, so any admin rule beats any user rule,
which beats any workspace rule, which beats the built-in defaults
(:data:`DEFAULT_TIER` … :data:`ADMIN_TIER`).

Nothing here touches the file system; see :mod:`.files` for loading.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any

import msgspec

#: gemini-cli's priority tiers (``packages/core/src/policy/config.ts``).
DEFAULT_TIER = 1
EXTENSION_TIER = 2
WORKSPACE_TIER = 3
USER_TIER = 4
ADMIN_TIER = 5

#: Rules gemini-split makes, at gemini-cli's priorities for the same things.
EXCLUDED_TOOLS_PRIORITY = USER_TIER + 0.4  # tools.exclude
ALLOWED_TOOLS_PRIORITY = USER_TIER + 0.3  # --allowed-tools, tools.allowed
TRUSTED_TOOL_PRIORITY = USER_TIER + 0.2  # an MCP server with "trust": true
ALWAYS_ALLOW_PRIORITY = WORKSPACE_TIER + 0.95  # an "always" answer in the REPL

SHELL_TOOL = "run_shell_command"
#: Other names gemini-cli accepts for the shell tool in rules and entries.
SHELL_ALIASES = frozenset({SHELL_TOOL, "ShellTool"})

#: The approval modes, as rules name them. gemini-cli writes ``autoEdit``;
#: gemini-split's flag says ``auto_edit``; the seeds' wire names
#: ``auto_approve`` (= yolo) and ``reject_dangerous`` (= default, with no
#: one to ask) are accepted where a mode is given to :meth:`Policy.decide`.
MODES = ("default", "auto_edit", "yolo", "plan")
_MODE_ALIASES = {"autoedit": "auto_edit", "auto-edit": "auto_edit", "auto_approve": "yolo",
                 "reject_dangerous": "default"}


def normalize_mode(mode: Any) -> str:
    """``mode`` (an ``ApprovalMode``, or its name as a rule or the wire
    writes it) as one of :data:`MODES`. Raises :class:`ValueError` for any
    other name."""
    text = str(getattr(mode, "value", mode)).strip()
    key = _MODE_ALIASES.get(text.lower(), text.lower())
    if key not in MODES:
        raise ValueError(f"unknown approval mode {text!r}: valid modes are default, autoEdit (auto_edit), yolo, plan")
    return key


class Decision(Enum):
    """What a rule decides for a call."""

    ALLOW = "allow"
    DENY = "deny"
    ASK_USER = "ask_user"
    ASK = "ask_user"  # the same member: gemini-split's older name

    @property
    def strictness(self) -> int:
        return {"allow": 0, "ask_user": 1, "deny": 2}[self.value]


class Rule(msgspec.Struct, frozen=True, eq=False):
    """One checked rule. Equality is identity: two rules written alike in
    two files are still two rules (each is named in messages).

    ``tool_names`` are patterns where ``*`` matches any run of characters
    (``*`` alone: every tool; ``mcp_github_*``: one MCP server's tools).
    ``command_prefixes`` (shell only) are word tuples; ``command_regex``
    (shell only) is matched at the start of a command; ``args_pattern`` is
    searched in the call's arguments as gemini-cli writes them (sorted keys,
    compact JSON, each top-level ``"key":value`` between NUL characters)."""

    tool_names: tuple[str, ...]
    decision: Decision
    priority: float
    #: For messages: "user policy /home/me/.gemini/policies/git.toml, rule #2".
    source: str
    command_prefixes: tuple[tuple[str, ...], ...] | None = None
    command_regex: Any = None  # a compiled linear-time pattern (re2)
    command_regex_text: str | None = None
    args_pattern: Any = None
    args_pattern_text: str | None = None
    modes: frozenset[str] | None = None
    interactive: bool | None = None
    allow_redirection: bool = False
    deny_message: str | None = None
    mcp_name: str | None = None
    #: Rules gemini-split makes: the tool kinds (``read``, ``edit``,
    #: ``execute``, ``network``) the rule applies to; None: any.
    kinds: frozenset[str] | None = None
    #: Rules gemini-split makes: only tools marked trusted (``"trust": true``).
    trusted_only: bool = False
    #: ``subagent``: the rule applies only to the calls that sub-agent
    #: makes (its definition's name); None: to every agent's, the main
    #: agent's too.
    subagent: str | None = None
    #: ``toolAnnotations``: only ``readOnlyHint`` is known here (a tool of
    #: kind ``read``); any other key never matches.
    annotations: dict[str, Any] | None = None
    #: ``allowNetwork`` (gemini-split's own field, on an ``allow`` rule for
    #: ``run_shell_command``): a command this rule allows keeps the network
    #: inside the sandbox (:mod:`gemini_split.sandbox`), as if
    #: ``--sandbox-network`` were given for it alone.
    allow_network: bool = False
    _name_patterns: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        names = tuple(SHELL_TOOL if n in SHELL_ALIASES else n for n in self.tool_names)
        msgspec.structs.force_setattr(self, "tool_names", names)
        msgspec.structs.force_setattr(self, "_name_patterns", tuple(_name_pattern(n) for n in names))

    def __repr__(self) -> str:
        return f"<Rule {self.describe()} priority={self.priority:.3f} from {self.source}>"

    @property
    def constrained(self) -> bool:
        """Whether the rule looks at the shell command (prefix or regex)."""
        return self.command_prefixes is not None or self.command_regex is not None

    def applies(self, tool_name: str, mode: str, *, interactive: bool, kind: str | None,
                trusted: bool, server_name: str | None, subagent: str | None = None) -> bool:
        """Whether the rule is about this tool in this mode, called by the
        sub-agent ``subagent`` (None: the main agent), arguments aside."""
        if self.modes is not None and mode not in self.modes:
            return False
        if self.interactive is not None and self.interactive != interactive:
            return False
        if self.subagent is not None and self.subagent != subagent:
            return False
        if self.kinds is not None and kind not in self.kinds:
            return False
        if self.trusted_only and not trusted:
            return False
        if self.mcp_name is not None and (server_name is None or self.mcp_name not in ("*", server_name)):
            return False
        if self.annotations is not None:
            for key, value in self.annotations.items():
                if key != "readOnlyHint" or value != (kind == "read"):
                    return False
        return any(p is None and n == tool_name or p is not None and p.fullmatch(tool_name)
                   for n, p in zip(self.tool_names, self._name_patterns))

    def describe(self) -> str:
        """The rule in a few words, for messages: ``deny run_shell_command
        (commandPrefix "rm")``."""
        what = ", ".join(self.tool_names)
        if self.command_prefixes is not None:
            what += " (commandPrefix " + ", ".join(repr(" ".join(p)) for p in self.command_prefixes) + ")"
        elif self.command_regex_text is not None:
            what += f" (commandRegex {self.command_regex_text!r})"
        elif self.args_pattern_text is not None:
            what += f" (argsPattern {self.args_pattern_text!r})"
        return f"{self.decision.value} {what}"


def _name_pattern(name: str) -> re.Pattern[str] | None:
    if "*" not in name:
        return None
    return re.compile(".*".join(re.escape(piece) for piece in name.split("*")), re.DOTALL)


class Verdict(msgspec.Struct, frozen=True):
    """The decision for one call: ``rule`` decided it (None: the approval
    mode's default), ``reason`` says why when it is not ALLOW (for the
    question asked or the refusal the model gets)."""

    decision: Decision
    reason: str | None = None
    rule: Rule | None = None
    #: An allowed shell command keeps the sandbox's network: every part of
    #: it was allowed by a rule with ``allowNetwork``.
    network: bool = False

    @property
    def source(self) -> str | None:
        """Where the deciding rule was written, if anywhere."""
        return self.rule.source if self.rule is not None else None


def stable_args(args: Any) -> str:
    """``args`` as gemini-cli's ``stableStringify`` writes them for
    ``argsPattern``: keys sorted, no spaces, non-ASCII as is, and each
    top-level ``"key":value`` pair between NUL characters (so a pattern
    can anchor on a whole parameter)."""
    import json

    def dump(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)

    if not isinstance(args, dict):
        return dump(args)
    pairs = [f"\0{dump(str(k))}:{dump(args[k])}\0" for k in sorted(args, key=str)]
    return "{" + ",".join(pairs) + "}"
