"""The rules gemini-split writes itself: the approval modes (the lowest
tier, as gemini-cli's bundled ``read-only.toml``, ``write.toml``,
``plan.toml`` and ``yolo.toml``), ``--allowed-tools`` / ``tools.allowed``
entries, ``tools.exclude``, trusted MCP servers and "always" answers.

The approval modes as rules (priority within the default tier):

=====  ===========================================  ==========
 prio  rule                                          decision
=====  ===========================================  ==========
   50  any tool of kind ``read``                     allow
   40  any tool, in ``plan`` mode                    deny
   15  any tool of kind ``edit``, in ``auto_edit``   allow
  998  any tool, in ``yolo`` mode                    allow
=====  ===========================================  ==========

Plan mode's own (gemini-cli's ``plan.toml``, same priorities):

=====  ===========================================  ==========
 prio  rule                                          decision
=====  ===========================================  ==========
   55  ``enter_plan_mode``, someone can be asked     ask
   55  ``enter_plan_mode``, nobody can be asked      allow
   70  ``enter_plan_mode``, in ``plan``              deny
  999  ``enter_plan_mode``, in ``yolo``              deny
   70  ``exit_plan_mode``, in ``plan``               allow (it asks itself)
   55  ``exit_plan_mode``                            deny
  999  ``exit_plan_mode``, in ``yolo``               deny
   65  ``write_file``, ``replace``, in ``plan``      deny
=====  ===========================================  ==========

A plan file of the session's plans directory is written by a rule made
for that directory (:func:`gemini_split.tools.plans.plan_write_rule`, 70).
The yolo denials keep the two tools out of a yolo session, as gemini-cli
does (a tool denied outright is not offered).

A call no rule matches is asked about (:class:`~.rules.Decision.ASK_USER`).
"""

from __future__ import annotations

from collections.abc import Iterable

from .rules import (
    ALLOWED_TOOLS_PRIORITY,
    ALWAYS_ALLOW_PRIORITY,
    DEFAULT_TIER,
    EXCLUDED_TOOLS_PRIORITY,
    SHELL_ALIASES,
    SHELL_TOOL,
    TRUSTED_TOOL_PRIORITY,
    Decision,
    Rule,
)

PLAN_DENY_MESSAGE = ("plan approval mode allows read-only tools only; describe the change in the plan instead")
#: gemini-cli's words for a write in plan mode that is not a plan file.
PLAN_WRITE_DENIED = ("You are in Plan Mode and cannot modify source code. You may ONLY use write_file or replace to "
                     "save plans to the designated plans directory as .md files.")
#: gemini-cli's words for ``enter_plan_mode`` in plan mode, and ``exit_plan_mode`` outside it.
ALREADY_PLANNING = "You are already in Plan Mode."
NOT_PLANNING = "You are not currently in Plan Mode. Use enter_plan_mode first to design a plan."
NOT_IN_YOLO = "Plan Mode is not available in YOLO mode."
ENTER_PLAN_MODE = "enter_plan_mode"
EXIT_PLAN_MODE = "exit_plan_mode"
_NON_PLAN = frozenset({"default", "auto_edit", "yolo"})
_PLAN = frozenset({"plan"})


def default_rules() -> list[Rule]:
    """The approval modes, as the lowest-tier rules (table above)."""
    src = "the approval mode"
    return [
        Rule(("*",), Decision.ALLOW, DEFAULT_TIER + 0.050, f"{src} (read-only tools run)", kinds=frozenset({"read"})),
        Rule(("*",), Decision.DENY, DEFAULT_TIER + 0.040, f"{src} plan", modes=frozenset({"plan"}),
             deny_message=PLAN_DENY_MESSAGE),
        Rule(("*",), Decision.ALLOW, DEFAULT_TIER + 0.015, f"{src} auto_edit", modes=frozenset({"auto_edit"}),
             kinds=frozenset({"edit"})),
        Rule(("*",), Decision.ALLOW, DEFAULT_TIER + 0.998, f"{src} yolo", modes=frozenset({"yolo"}),
             allow_redirection=True),
        Rule(("*",), Decision.ALLOW, TRUSTED_TOOL_PRIORITY, "a trusted MCP server (\"trust\": true)",
             modes=_NON_PLAN, trusted_only=True),
        *plan_mode_rules(),
    ]


def plan_mode_rules() -> list[Rule]:
    """Plan mode's transitions and writes (the second table above)."""
    src = "plan mode"
    yolo = frozenset({"yolo"})
    return [
        Rule((ENTER_PLAN_MODE,), Decision.ASK_USER, DEFAULT_TIER + 0.055, src, interactive=True),
        Rule((ENTER_PLAN_MODE,), Decision.ALLOW, DEFAULT_TIER + 0.055, src, interactive=False),
        Rule((ENTER_PLAN_MODE,), Decision.DENY, DEFAULT_TIER + 0.070, src, modes=_PLAN,
             deny_message=ALREADY_PLANNING),
        Rule((ENTER_PLAN_MODE, EXIT_PLAN_MODE), Decision.DENY, DEFAULT_TIER + 0.999, src,
             modes=yolo, deny_message=NOT_IN_YOLO),
        Rule((EXIT_PLAN_MODE,), Decision.ALLOW, DEFAULT_TIER + 0.070, src, modes=_PLAN),
        Rule((EXIT_PLAN_MODE,), Decision.DENY, DEFAULT_TIER + 0.055, src, deny_message=NOT_PLANNING),
        Rule(("write_file", "replace"), Decision.DENY, DEFAULT_TIER + 0.065, src, modes=_PLAN,
             deny_message=PLAN_WRITE_DENIED),
    ]


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


def allowed_tools_rules(entries: Iterable[str], source: str = "--allowed-tools",
                        priority: float = ALLOWED_TOOLS_PRIORITY) -> list[Rule]:
    """Allow rules for ``--allowed-tools`` (or ``tools.allowed``) entries,
    as gemini-cli turns them into rules: ``read_file`` allows that tool;
    ``run_shell_command`` (or ``run_shell_command()``) every command;
    ``run_shell_command(git status)`` commands whose every part starts with
    those words. Not in plan mode (plan allows read-only tools only).

    Raises :class:`ValueError` saying what is wrong with a malformed entry."""
    rules: list[Rule] = []
    for entry in entries:
        text = entry.strip()
        where = f"{source} entry {entry!r}"
        if not text:
            raise ValueError(f"empty {source} entry")
        if "(" not in text:
            if text.endswith(")"):
                raise ValueError(f"{where}: unbalanced parenthesis")
            rules.append(Rule((text,), Decision.ALLOW, priority, f"{source} {text}", modes=_NON_PLAN))
            continue
        name, _, rest = text.partition("(")
        name = name.strip()
        if not rest.endswith(")"):
            raise ValueError(f"{where}: expected NAME or NAME(ARGS) with a closing ')'")
        inner = rest[:-1].strip()
        if name not in SHELL_ALIASES:
            raise ValueError(
                f"{where}: only {SHELL_TOOL} takes an argument (a command prefix, as in "
                f"{SHELL_TOOL}(git status)); give other tools by name alone"
            )
        if not inner:
            rules.append(Rule((SHELL_TOOL,), Decision.ALLOW, priority, f"{source} {SHELL_TOOL}", modes=_NON_PLAN))
            continue
        from gemini_split.shell_split import ShellParseError, parse_prefix

        try:
            prefix = parse_prefix(inner)
        except ShellParseError as exc:
            raise ValueError(f"{where}: {exc}") from None
        rules.append(Rule((SHELL_TOOL,), Decision.ALLOW, priority, f"{source} {SHELL_TOOL}({inner})",
                          command_prefixes=(prefix,), modes=_NON_PLAN))
    return rules


def excluded_tools_rules(names: Iterable[str], source: str = "settings tools.exclude") -> list[Rule]:
    """Deny rules for ``tools.exclude`` (gemini-cli's meaning: never run)."""
    return [Rule((n.strip(),), Decision.DENY, EXCLUDED_TOOLS_PRIORITY, f"{source} {n.strip()}",
                 deny_message=f"{n.strip()} is excluded by {source}") for n in names if n.strip()]


def always_rules(tool_name: str, roots: Iterable[str] = ()) -> list[Rule]:
    """Rules for an "always" answer: the tool outright, or for the shell
    commands starting with each of ``roots``. Not in plan mode."""
    source = "an \"always\" answer this session"
    roots = tuple(roots)
    if roots:
        return [Rule((SHELL_TOOL,), Decision.ALLOW, ALWAYS_ALLOW_PRIORITY, f"{source}: {SHELL_TOOL}({r})",
                     command_prefixes=((r,),), modes=_NON_PLAN) for r in roots]
    return [Rule((tool_name,), Decision.ALLOW, ALWAYS_ALLOW_PRIORITY, f"{source}: {tool_name}", modes=_NON_PLAN)]
