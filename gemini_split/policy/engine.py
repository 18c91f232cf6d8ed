"""The policy engine: the highest-priority rule that matches a call decides.

:meth:`Policy.decide` is the one place both sides ask whether a tool call
may run: the client for its own tools, the server for tools it runs in a
session's workspace. It needs nothing but the call (tool name and
arguments), the approval mode and a few facts about the tool (its kind, and
whether its MCP server is trusted).

Shell commands (``run_shell_command``) are judged part by part, as
gemini-cli does: ``git commit -m x && rm -rf /`` is two commands, and the
verdict is the strictest of theirs — a ``deny`` on any part denies the
whole, an ``ask_user`` on any part asks. Parts are found by
:mod:`gemini_split.shell_split` (lists, pipelines, subshells,
command substitutions, ``bash -c`` and ``eval`` contents). Matching errs
one way:

- an ``allow`` rule with ``commandPrefix`` / ``commandRegex`` covers a part
  only when the part's words are literal, it sets no variables and (unless
  the rule says ``allowRedirection``) redirects to no file;
- a ``deny`` or ``ask_user`` rule matches the words alone (``FOO=1 rm``,
  ``rm > log`` and ``/bin/rm`` all match ``commandPrefix = "rm"``), and
  also the whole command line for ``commandRegex``;
- ``deny``/``ask_user`` rules also see what a wrapper runs
  (:func:`gemini_split.shell_split.inner_commands`): the command after
  ``env``, ``nice``, ``timeout``, ``sudo``… and their options, ``find
  -exec``'s and ``xargs``'s (the words ``xargs`` adds are unknown), traps,
  aliases, variables a program runs (``GIT_EDITOR``, ``PS4``…), the
  commands git runs, and git without its global options (``git -C . push``
  is ``git push``); a denied command inside denies the whole, whatever
  allows the wrapper. A program that runs a command among its words,
  options not modelled (``strace -f git push``, ``ssh host git push``), is
  asked about when a denied command is among them.
  ``allow`` rules do not: a wrapper changes how its command runs (its
  user, environment, files), so it is allowed by its own name only
  (``bash -c`` and ``eval``, which change nothing, excepted);
- a part that cannot be checked against a ``deny``/``ask_user`` rule (the
  command cannot be parsed, a word is only known when it runs, such as
  ``$cmd`` or ``r$(echo m)``, or a wrapper runs a program that cannot be
  seen: a shell or interpreter reading it from standard input) is at least
  asked about, never allowed by a lower rule, nor by an allow rule for
  the wrapper.

Then the one gemini-split heuristic: an edit of a file that runs code later
(a git hook, ``.envrc``…; see :func:`gemini_split.tools.approval.executes_later`)
that would be allowed is asked about instead, in every mode but yolo.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from gemini_split.agent_invocation import names

from .builtin import default_rules
from .rules import SHELL_ALIASES, SHELL_TOOL, Decision, Rule, Verdict, normalize_mode, stable_args

_MAX_WRAPPER_DEPTH = 8


class _Call(msgspec.Struct, frozen=True):
    tool_name: str
    mode: str
    interactive: bool
    kind: str | None
    trusted: bool
    server_name: str | None
    subagent: str | None = None
    #: Other names a rule's ``toolName`` matches this call by (a sub-agent's,
    #: for ``invoke_agent``: :func:`gemini_split.agent_invocation.names`).
    aliases: tuple[str, ...] = ()


class Policy:
    """An ordered set of rules (highest priority first; among equal
    priorities, the one added first).

    ``Policy()`` holds the approval modes' rules only; :func:`load_policy`
    adds the policy files'. :meth:`add` and :meth:`remove` change it (an
    "always" answer, its revocation); :meth:`with_rules` makes a copy.
    ``warnings`` are lines for the user from loading (e.g. an
    ``--admin-policy`` ignored)."""

    def __init__(self, rules: Iterable[Rule] | None = None, *, warnings: Sequence[str] = ()):
        self._rules: list[Rule] = []
        self.warnings: list[str] = list(warnings)
        self.add(*(default_rules() if rules is None else rules))

    @property
    def rules(self) -> tuple[Rule, ...]:
        return tuple(self._rules)

    def add(self, *rules: Rule) -> None:
        self._rules.extend(rules)
        self._rules.sort(key=lambda r: -r.priority)  # stable: equal priorities keep their order

    def remove(self, rule: Rule) -> None:
        self._rules = [r for r in self._rules if r is not rule]

    def with_rules(self, rules: Iterable[Rule]) -> Policy:
        policy = Policy(self._rules, warnings=self.warnings)
        policy.add(*rules)
        return policy

    # ------------------------------------------------------------------

    def decide(self, tool_name: str, args: Any, mode: Any = "default", *, kind: str | None = None,
               interactive: bool = True, trusted: bool = False, server_name: str | None = None,
               executes_later: str | None = None, subagent: str | None = None) -> Verdict:
        """The verdict for calling ``tool_name`` with ``args`` in approval
        ``mode`` (``default``, ``auto_edit``/``autoEdit``, ``yolo``, ``plan``,
        or the wire names ``auto_approve``, ``reject_dangerous``).

        ``kind``: the tool's kind (``read``, ``edit``, ``execute``,
        ``network``); ``interactive``: someone can be asked (rules with
        ``interactive = false`` apply otherwise); ``trusted``: its MCP
        server is trusted; ``server_name``: its MCP server (for
        ``mcpName``); ``executes_later``: the call edits a file that runs
        code later (what it is, for the question); ``subagent``: the
        sub-agent that makes the call (its name; None: the main agent), for
        rules with ``subagent``. A call of ``invoke_agent`` (gemini-cli's
        delegation) is matched by its ``agent_name`` too, as gemini-cli
        does: a rule naming the sub-agent as its ``toolName`` applies.

        ``ASK_USER`` with no one to ask is the caller's to refuse. Raises
        :class:`ValueError` for an unknown mode."""
        name = SHELL_TOOL if tool_name in SHELL_ALIASES else tool_name
        call = _Call(name, normalize_mode(mode), interactive, getattr(kind, "value", kind), trusted, server_name,
                     subagent or None, names(name, args)[1:])
        if name == SHELL_TOOL and isinstance(args, dict) and isinstance(args.get("command"), str):
            verdict = self._decide_shell(call, args["command"], args)
        else:
            verdict = self._decide_plain(call, args)
        if verdict.decision is Decision.ALLOW and executes_later and call.mode != "yolo":
            return Verdict(Decision.ASK_USER, f"this edits {executes_later}; such files are asked about in "
                                              "every approval mode but yolo", verdict.rule)
        return verdict

    def denied_outright(self, tool_name: str, mode: Any = "default", *, kind: str | None = None,
                        interactive: bool = True) -> Rule | None:
        """The rule that refuses every call of ``tool_name`` in ``mode``,
        whatever its arguments — the highest applicable rule is a ``deny``
        with no condition on them — or None (the arguments decide, or it
        may run). Such a tool is not offered to the model at all, as
        gemini-cli leaves it out of the tool registry."""
        name = SHELL_TOOL if tool_name in SHELL_ALIASES else tool_name
        call = _Call(name, normalize_mode(mode), interactive, getattr(kind, "value", kind), False, None)
        for rule in self._applicable(call):
            if rule.command_prefixes is not None or rule.command_regex is not None \
                    or rule.args_pattern is not None or rule.annotations is not None:
                return None  # a call's arguments decide
            return rule if rule.decision is Decision.DENY else None
        return None

    def _applicable(self, call: _Call) -> list[Rule]:
        return [r for r in self._rules if any(
            r.applies(name, call.mode, interactive=call.interactive, kind=call.kind, trusted=call.trusted,
                      server_name=call.server_name, subagent=call.subagent)
            for name in (call.tool_name, *call.aliases))]

    def _decide_plain(self, call: _Call, args: Any) -> Verdict:
        text: str | None = None
        for rule in self._applicable(call):
            if rule.args_pattern is not None:
                text = stable_args(args) if text is None else text
                if not rule.args_pattern.search(text):
                    continue
            elif rule.constrained:
                continue  # a command rule, and this call has no command
            return _verdict(rule, call)
        return _default(call)

    # --- shell ---------------------------------------------------------

    def _decide_shell(self, call: _Call, command: str, args: dict[str, Any]) -> Verdict:
        rules = self._applicable(call)
        stable = stable_args(args) if any(r.args_pattern is not None for r in rules) else ""
        # Rules that look at the arguments as a whole (argsPattern) or not at
        # all, and deny/ask regexes on the whole command line, decide first
        # if they outrank everything a part could match.
        verdicts: list[Verdict] = []
        whole = next((r for r in rules if r.args_pattern is not None and r.args_pattern.search(stable)), None)
        if whole is not None and whole.decision is not Decision.ALLOW:
            verdicts.append(_verdict(whole, call))
        for rule in rules:
            if (rule.command_regex is not None and rule.decision is not Decision.ALLOW
                    and rule.command_regex.match(command)):
                verdicts.append(_verdict(rule, call))
                break
        from gemini_split.shell_split import ShellParseError, split_command

        try:
            parts = split_command(command)
        except ShellParseError as exc:
            verdicts.append(_opaque(rules, call, f"the command cannot be checked ({exc})"))
        else:
            if not parts:
                verdicts.append(_opaque(rules, call, "the command is empty"))
            # An argsPattern that allows the call covers a single command
            # only: it was written against the whole command line.
            single = whole if whole is not None and whole.decision is Decision.ALLOW and len(parts) == 1 else None
            for part in parts:
                verdicts.append(self._decide_part(rules, call, part, 0, single))
        return _strictest(verdicts, rules, call)

    def _decide_part(self, rules: list[Rule], call: _Call, part: Any, depth: int,
                     whole: Rule | None = None) -> Verdict:
        from gemini_split.shell_split import inner_commands, runs_its_words, without_git_options

        if part.group:
            if all(r.harmless for r in part.redirects):
                return Verdict(Decision.ALLOW)  # its contents are parts of their own
            return _opaque(rules, call, f"{_q(part)} redirects to or from a file")
        if not part.words or not part.words[0].literal:
            return _opaque(rules, call, f"{_q(part)} runs a command only known when it runs")
        # deny/ask rules also see git without its global options.
        git = without_git_options(part)
        views = (part,) if git is None else (part, git)
        # A program that runs a command among its words (strace -f git
        # push, unshare -r git push) may run a denied one.
        unknown = runs_its_words(part)
        uncertain: Rule | None = None
        own: Rule | None = None
        for rule in rules:
            if rule.args_pattern is not None:
                if rule is whole:
                    own = rule
                    break
                continue  # judged on the whole call
            if not rule.constrained:
                own = rule
                break
            if rule.decision is Decision.ALLOW:
                hit = _part_matches(rule, part)
            else:
                hit = _any_view_matches(rule, views)
                if hit is False and unknown and _later_match(rule, part):
                    hit = None
            if hit is None:
                uncertain = uncertain or rule
                continue
            if hit:
                own = rule
                break
        inners = inner_commands(part)
        if inners and depth >= _MAX_WRAPPER_DEPTH:
            if own is not None and own.constrained and own.decision is not Decision.ALLOW:
                return _verdict(own, call)
            inner_verdict = _unseen(rules, call, f"what {_q(part)} runs is nested too deeply to follow")
            transparent = False
        else:
            inner_verdict = _strictest([self._decide_inner(rules, call, part, inner, depth) for inner in inners],
                                       rules, call) if inners else None
            transparent = bool(inners) and all(i.transparent for i in inners)
        if inner_verdict is not None:
            if inner_verdict.decision is Decision.DENY:
                return inner_verdict
            # A deny or ask rule that matches (or may match) what the wrapper
            # runs is not overruled by the wrapper's own allow.
            objection = inner_verdict if _objects(inner_verdict) else None
            if own is not None and own.constrained:
                verdict = _verdict(own, call)  # the wrapper itself, by name
            elif transparent:
                verdict = inner_verdict  # bash -c / eval: their commands decide
            else:
                # Any other wrapper changes how its command runs, so an
                # allow rule for the command does not cover it wrapped.
                verdict = _verdict(own, call) if own is not None else _default(call, f"{_q(part)}")
            if objection is not None and verdict.decision is Decision.ALLOW:
                return objection
        else:
            verdict = _verdict(own, call) if own is not None else _default(call, f"{_q(part)}")
        # A rule that may match (a word only known when it runs) asks where
        # the verdict would allow, and names the question where nothing but
        # the approval mode asks (so a wrapper's allow cannot overrule it).
        if uncertain is not None and (own is None or uncertain.priority > own.priority) \
                and (verdict.decision is Decision.ALLOW
                     or verdict.decision is Decision.ASK_USER and verdict.rule is None):
            return Verdict(Decision.ASK_USER, f"{_q(part)} cannot be checked against {uncertain.describe()} "
                                              f"({uncertain.source})", uncertain)
        if verdict.decision is Decision.ALLOW and own is not None and own.constrained \
                and not own.allow_redirection and not all(r.harmless for r in part.redirects):
            return Verdict(Decision.ASK_USER, f"{_q(part)} redirects to or from a file", own)
        return verdict

    def _decide_inner(self, rules: list[Rule], call: _Call, part: Any, inner: Any, depth: int) -> Verdict:
        """The verdict for what a wrapper ``part`` runs (one
        :class:`~gemini_split.shell_split.Inner`)."""
        from gemini_split.shell_split import ShellParseError, split_command

        if inner.command is not None:
            return self._decide_part(rules, call, inner.command, depth + 1)
        if inner.text is None:
            return _unseen(rules, call, f"what {_q(part)} runs cannot be seen ({_clip(inner.unseen)})")
        try:
            inner_parts = split_command(inner.text)
        except ShellParseError as exc:
            return _opaque(rules, call, f"{_q(inner.text)} cannot be checked ({exc})")
        return _strictest([self._decide_part(rules, call, p, depth + 1) for p in inner_parts]
                          or [_opaque(rules, call, "the command is empty")], rules, call)


def _q(part: Any) -> str:
    """A part quoted for a message, shortened: a hostile command can be
    megabytes long."""
    text = str(part)
    return f"'{text}'" if len(text) <= 200 else f"'{text[:200]}…'"


def _clip(text: str) -> str:
    return text if len(text) <= 300 else text[:300] + "…"


def _any_view_matches(rule: Rule, views: Sequence[Any]) -> bool | None:
    """A deny/ask rule against a part seen several ways (as written, git
    without its global options): True if any matches, else None if any may."""
    results = [_part_matches(rule, view) for view in views]
    if any(results):
        return True
    return None if None in results else False


def _later_match(rule: Rule, part: Any) -> bool:
    """Whether a deny/ask rule matches the words of ``part`` from its
    second word on (``commandRegex``: from one of its first 16)."""
    from gemini_split.shell_split import SimpleCommand

    words = part.words
    if rule.command_prefixes is not None:
        firsts = {prefix[0] for prefix in rule.command_prefixes if prefix}
        starts = [k for k in range(1, len(words))
                  if words[k].literal and words[k].text.rsplit("/", 1)[-1] in firsts]
    else:
        starts = list(range(1, min(len(words), 17)))
    return any(_part_matches(rule, SimpleCommand(words[k:])) for k in starts)


def _objects(verdict: Verdict) -> bool:
    """Whether ``verdict`` asks or denies because of a deny or ask rule
    about commands (rather than because nothing allowed it)."""
    rule = verdict.rule
    return verdict.decision is not Decision.ALLOW and rule is not None and rule.constrained \
        and rule.decision is not Decision.ALLOW


def _part_matches(rule: Rule, part: Any) -> bool | None:
    """Whether a command rule matches one simple command: True, False, or
    None when it cannot be told (a word only known when it runs).

    ``allow`` rules match strictly (literal words, no assignments, no
    redirection but to /dev/null or another descriptor — checked by the
    caller), ``deny``/``ask_user`` rules on the words alone, the command
    word also by its base name (``/bin/rm`` is ``rm``)."""
    words = part.words
    strict = rule.decision is Decision.ALLOW
    if strict and part.assignments:
        return False
    if rule.command_prefixes is not None:
        unknown = False
        for prefix in rule.command_prefixes:
            if len(words) < len(prefix):
                continue
            result: bool | None = True
            for i, (word, want) in enumerate(zip(words, prefix)):
                if not word.literal:
                    result = False if strict else None
                    break
                text = word.text if strict or i else word.text.rsplit("/", 1)[-1]
                if text != want:
                    result = False
                    break
            if result:
                return True
            unknown = unknown or result is None
        return None if unknown else False
    text = " ".join(w.text for w in words)
    if rule.command_regex.match(text):
        return not strict or all(w.literal for w in words)
    if not strict:
        base = words[0].text.rsplit("/", 1)[-1]
        if base != words[0].text and rule.command_regex.match(" ".join([base, *(w.text for w in words[1:])])):
            return True
        if not all(w.literal for w in words):
            return None
    return False


def _verdict(rule: Rule, call: _Call) -> Verdict:
    if rule.decision is Decision.ALLOW:
        return Verdict(Decision.ALLOW, None, rule, network=rule.allow_network)
    if rule.decision is Decision.DENY:
        reason = rule.deny_message or f"denied by {rule.source}: {rule.describe()}"
        if rule.deny_message and rule.source and rule.source.startswith(("user", "admin", "workspace", "--policy")):
            reason += f" ({rule.source})"
        return Verdict(Decision.DENY, reason, rule)
    return Verdict(Decision.ASK_USER, f"{rule.source} asks: {rule.describe()}", rule)


_WHAT = {"edit": "file edits", "network": "network access", "execute": "running commands"}


def _default(call: _Call, part: str | None = None) -> Verdict:
    """No rule matched: ask."""
    if call.tool_name == SHELL_TOOL:
        what = "running shell commands"
    else:
        what = _WHAT.get(call.kind or "", f"running {call.tool_name}")
    reason = f"{call.mode} approval mode asks before {what}"
    if part is not None:
        reason = f"{part} is not an allowed command ({reason})"
    return Verdict(Decision.ASK_USER, reason)


def _opaque(rules: list[Rule], call: _Call, why: str) -> Verdict:
    """The verdict for a part that cannot be split into words: only rules
    that ignore the command decide it; a command rule that might deny or
    ask and outranks the one deciding makes it a question about that rule."""
    best = next((r for r in rules if not r.constrained and r.args_pattern is None), None)
    verdict = _verdict(best, call) if best is not None else _default(call)
    if verdict.decision is Decision.DENY:
        return verdict
    risky = next((r for r in rules if r.constrained and r.decision is not Decision.ALLOW
                  and (best is None or r.priority > best.priority)), None)
    if risky is not None:
        return Verdict(Decision.ASK_USER, f"{why}, so it cannot be checked against {risky.describe()} "
                                          f"({risky.source})", risky)
    if verdict.decision is Decision.ALLOW or verdict.rule is not None:
        return verdict
    return Verdict(verdict.decision, f"{why}; {verdict.reason}" if verdict.reason else why)


def _unseen(rules: list[Rule], call: _Call, why: str) -> Verdict:
    """The verdict for a program a wrapper runs that cannot be seen (a shell
    reading standard input, ``xargs``'s input): asked about when a deny or
    ask rule about commands could match it (one that outranks every rule
    allowing any command), else no objection (ALLOW: the wrapper's own
    rule decides)."""
    best = next((r for r in rules if not r.constrained and r.args_pattern is None), None)
    risky = next((r for r in rules if r.constrained and r.decision is not Decision.ALLOW
                  and (best is None or r.priority > best.priority)), None)
    if risky is None:
        return Verdict(Decision.ALLOW)
    return Verdict(Decision.ASK_USER, f"{why}, so it cannot be checked against {risky.describe()} "
                                      f"({risky.source})", risky)


def _strictest(verdicts: list[Verdict], rules: list[Rule], call: _Call) -> Verdict:
    """The strictest verdict (deny > ask > allow); the reasons of every
    part asked about are joined, so the question names each."""
    if not verdicts:
        return _default(call)
    worst = max(v.decision.strictness for v in verdicts)
    chosen = [v for v in verdicts if v.decision.strictness == worst]
    if worst == Decision.ASK_USER.strictness:
        reasons = list(dict.fromkeys(v.reason for v in chosen if v.reason))
        # A rule that objects (deny/ask about commands) names the question
        # and keeps a wrapper's own allow from overruling it.
        rule = next((v.rule for v in chosen if _objects(v)), chosen[0].rule)
        return Verdict(Decision.ASK_USER, "; ".join(reasons) or None, rule)
    if worst == Decision.ALLOW.strictness:
        # The network only when every part's rule grants it.
        return Verdict(Decision.ALLOW, None, chosen[0].rule, network=all(v.network for v in chosen))
    return chosen[0]
