"""gemini-cli's hooks: the user's commands run at points of the agent loop.

The ``hooks`` section of ``settings.json`` (gemini-cli's format, see its
``docs/hooks/reference.md``)::

    {"hooks": {"BeforeTool": [{"matcher": "run_shell_command",
                               "hooks": [{"type": "command", "command": "~/bin/check.sh",
                                          "name": "check", "timeout": 5000}]}]}}

Hooks are the user's own configuration, so they run here, on the client,
with the user's environment (plus ``GEMINI_PROJECT_DIR``,
``CLAUDE_PROJECT_DIR``, ``GEMINI_CWD`` and ``GEMINI_SESSION_ID``), and are
never offered to the model. BeforeTool and AfterTool also run here for the
tools a server runs (``--tools server``, ``google_web_search``,
``activate_skill``, a delegation to a sub-agent): the server asks with
``hook_request`` (protocol 1.4, ``client/calls.py``) and applies the verdict of
:meth:`HookOutcome.as_output` it gets back. Definitions are gathered from the project's
settings (only in a trusted folder), the user's, the system's, then any
added with :meth:`HookSet.add` (extensions), in that order — gemini-cli's
precedence; every matching hook runs. ``hooksConfig.enabled: false`` turns
them all off, ``hooksConfig.disabled`` lists names (or commands) not to run
(the lists of every file together, as gemini-cli merges them; ``/hooks
enable|disable`` edit them through :mod:`gemini_split.userfiles.disabled_lists`).

The contract of one hook run (:func:`run_hook`): the event's JSON object on
stdin; exit 0 → stdout is a JSON object (empty stdout: no opinion); exit 2
→ the action is blocked with stderr as the reason; any other exit → a
warning and the action goes on. A hook still running at its ``timeout``
(milliseconds, default 60000) is killed with its whole process group and
counts as a warning. Output beyond :data:`MAX_STDOUT_BYTES` is not read
into memory. Every problem is reported in one line naming the hook.
"""

from __future__ import annotations

import logging
import os
import re
import signal
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgspec
import trio

from gemini_split import json_values
from gemini_split.agent_invocation import names

log = logging.getLogger(__name__)

#: gemini-cli's events, in the order ``hooks list`` shows them.
EVENTS = (
    "SessionStart", "BeforeAgent", "BeforeModel", "BeforeToolSelection", "AfterModel",
    "BeforeTool", "AfterTool", "AfterAgent", "PreCompress", "Notification", "SessionEnd",
)
#: Events whose matcher is a regular expression over the tool's name.
TOOL_EVENTS = frozenset({"BeforeTool", "AfterTool"})
#: Events fired where the model is called (the server): see README "Hooks".
#: Not asked of the client as tool hooks are: they would put a round trip
#: and a process start into every model call (AfterModel: every streamed
#: chunk), and BeforeModel's input is the whole conversation each time.
MODEL_EVENTS = frozenset({"BeforeModel", "AfterModel", "BeforeToolSelection"})
#: Events gemini-split does not fire (yet); configuring one is reported.
#: (PreCompress fires for ``/compress`` only: automatic compression is the
#: server's.)
UNSUPPORTED_EVENTS = MODEL_EVENTS
DEFAULT_TIMEOUT_MS = 60_000
#: The settings list of hooks not to run (by name, else command).
DISABLED_KEY = "hooksConfig.disabled"
#: A hook's stdout beyond this is discarded and the hook's output ignored.
MAX_STDOUT_BYTES = 1024 * 1024
#: Of stderr (a reason or a warning), this much is kept.
MAX_STDERR_BYTES = 16 * 1024
#: Seconds to keep reading a hook's output after it exited (a background
#: process it left may hold the pipes open).
OUTPUT_GRACE = 1.0


class HookDefinition(msgspec.Struct, frozen=True):
    """One hook command and when it runs."""

    event: str
    command: str
    #: The group's ``matcher`` ("" or "*": always).
    matcher: str = ""
    name: str = ""
    description: str = ""
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    #: The group's ``sequential``.
    sequential: bool = False
    #: Where it was defined: ``"user (/home/u/.gemini/settings.json)"``, an extension's name…
    source: str = ""
    #: More environment for its command: an extension's ``extensionPath``
    #: and ``workspacePath``, which its shell expands as data.
    env: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        """How messages name the hook: its name, else its command."""
        return self.name or self.command

    def matches(self, target: str | None) -> bool:
        """Whether this hook runs for ``target`` (a tool's name for tool
        events, a trigger such as ``startup`` for lifecycle events; None:
        the event has nothing to match, every hook runs)."""
        if self.matcher in ("", "*") or target is None:
            return True
        if self.event in TOOL_EVENTS:
            try:
                return re.search(self.matcher, target) is not None
            except re.error:  # gemini-cli: an invalid regex matches exactly
                return self.matcher == target
        return self.matcher == target


def parse_hooks(raw: Any, source: str, *,
                env: tuple[tuple[str, str], ...] = ()) -> tuple[list[HookDefinition], list[str]]:
    """The hook definitions of one ``hooks`` object (gemini-cli's format),
    and one line per part left out, naming ``source`` and the key. Never
    raises: a malformed entry is reported and the others still load.
    ``env``: more environment for each of their commands.

    This is also how an extension's hooks are read: pass its ``hooks``
    object, a source such as ``"extension my-ext"`` and its
    ``Extension.hook_env``, then :meth:`HookSet.add` the result."""
    found: list[HookDefinition] = []
    warnings: list[str] = []

    def bad(key: str, why: str) -> None:
        warnings.append(f"gemini-split: {source}: key {key}: {why}; left out")

    if raw is None:
        return found, warnings
    if not isinstance(raw, dict):
        bad("hooks", f"expected an object of events, got {type(raw).__name__}")
        return found, warnings
    for event, groups in raw.items():
        if event not in EVENTS:
            bad(f"hooks.{event}", "not a hook event (one of " + ", ".join(EVENTS) + ")")
            continue
        if not isinstance(groups, list):
            bad(f"hooks.{event}", f"expected a list of hook groups, got {type(groups).__name__}")
            continue
        for i, group in enumerate(groups):
            where = f"hooks.{event}[{i}]"
            if not isinstance(group, dict):
                bad(where, f"expected an object, got {type(group).__name__}")
                continue
            matcher = group.get("matcher", "")
            sequential = group.get("sequential", False)
            commands = group.get("hooks")
            if not isinstance(matcher, str):
                bad(f"{where}.matcher", "expected a string")
                continue
            if not isinstance(sequential, bool):
                bad(f"{where}.sequential", "expected true or false")
                continue
            if not isinstance(commands, list):
                bad(f"{where}.hooks", "expected a list of hooks")
                continue
            for j, hook in enumerate(commands):
                at = f"{where}.hooks[{j}]"
                if not isinstance(hook, dict):
                    bad(at, f"expected an object, got {type(hook).__name__}")
                    continue
                if hook.get("type", "command") != "command":
                    bad(f"{at}.type", f"only \"command\" hooks exist, got {hook.get('type')!r}")
                    continue
                command, timeout = hook.get("command"), hook.get("timeout", DEFAULT_TIMEOUT_MS)
                name, description = hook.get("name", ""), hook.get("description", "")
                if not isinstance(command, str) or not command.strip():
                    bad(f"{at}.command", "expected a non-empty string")
                elif isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
                    bad(f"{at}.timeout", f"expected a positive number of milliseconds, got {timeout!r}")
                elif not isinstance(name, str) or not isinstance(description, str):
                    bad(at, "name and description must be strings")
                else:
                    found.append(HookDefinition(event, command, matcher, name, description, int(timeout),
                                                sequential, source, env))
    return found, warnings


class HookSet(msgspec.Struct):
    """Every hook of a run, and what was wrong with their definitions."""

    hooks: list[HookDefinition] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)
    enabled: bool = True
    #: ``hooksConfig.disabled``: names or commands not to run.
    disabled: frozenset[str] = frozenset()

    def add(self, definitions: Iterable[HookDefinition], warnings: Iterable[str] = ()) -> None:
        """Add hooks defined elsewhere (an extension's), after those of the
        settings files: ``hooks.add(*parse_hooks(ext_hooks, "extension x"))``."""
        self.hooks.extend(definitions)
        self.warnings.extend(warnings)

    def active(self) -> list[HookDefinition]:
        """The hooks that run (none when ``hooksConfig.enabled`` is false)."""
        if not self.enabled:
            return []
        return [h for h in self.hooks if h.name not in self.disabled and h.command not in self.disabled]

    def for_event(self, event: str, target: str | None = None,
                  aliases: tuple[str, ...] = ()) -> list[HookDefinition]:
        """The active hooks of ``event`` that match ``target`` or one of
        its ``aliases`` (a tool's other names)."""
        return [h for h in self.active() if h.event == event and any(h.matches(t) for t in (target, *aliases))]

    def unsupported_notice(self) -> str | None:
        """One line naming the configured events gemini-split does not fire,
        or None: a hook that never runs is never silent."""
        events = sorted({h.event for h in self.active() if h.event in UNSUPPORTED_EVENTS}, key=EVENTS.index)
        if not events:
            return None
        return ("gemini-split: hooks for " + ", ".join(events) + " are configured but do not run: the model "
                "is called on the server, and gemini-split does not hold up each model call (AfterModel: each "
                "streamed chunk) to run commands here (see README \"Hooks\")")


def load_hooks(loaded: Any) -> HookSet:
    """The hooks of a run's settings files (a ``settings.LoadedSettings``):
    the project's (only when ``loaded.trusted``), the user's, the system's
    and the system defaults', in gemini-cli's order of precedence."""
    files = {f.scope: f for f in loaded.files}
    order = ["project", "user", "system", "system-defaults"]
    result = HookSet()
    config: dict[str, Any] = {}
    disabled: set[str] = set()
    for scope in reversed(order):  # hooksConfig.enabled: the later file wins, as for any setting
        f = files.get(scope)
        if f is None or not f.exists or (scope == "project" and not loaded.trusted):
            continue
        section = f.raw.get("hooksConfig")
        if isinstance(section, dict):
            config.update(section)
            names = section.get("disabled")  # gemini-cli merges this list: a union
            if isinstance(names, list):
                disabled.update(d for d in names if isinstance(d, str))
    for scope in order:
        f = files.get(scope)
        if f is None or not f.exists or (scope == "project" and not loaded.trusted):
            continue
        result.add(*parse_hooks(f.raw.get("hooks"), f"{f.path}"))
    result.enabled = config.get("enabled", True) is not False
    result.disabled = frozenset(disabled)
    return result


# --------------------------------------------------------------------------
# Running.


class HookResult(msgspec.Struct):
    """What one hook run said."""

    hook: HookDefinition
    #: The JSON object it printed (empty when none, or when unusable).
    output: dict[str, Any] = msgspec.field(default_factory=dict)
    #: Exit status 2: block, with ``stderr`` as the reason.
    blocked: bool = False
    stderr: str = ""
    #: A line for the user when the hook failed (timeout, garbage, exit ≠ 0/2).
    warning: str | None = None


class HookOutcome(msgspec.Struct):
    """The hooks of one event, combined: any deny denies, any
    ``continue: false`` stops, texts are joined in order."""

    results: list[HookResult] = msgspec.field(default_factory=list)

    @property
    def denied(self) -> bool:
        return any(r.blocked or str(r.output.get("decision", "")).lower() in ("deny", "block")
                   for r in self.results)

    @property
    def reason(self) -> str:
        parts = []
        for r in self.results:
            if r.blocked:
                parts.append(r.stderr.strip() or f"blocked by hook {r.hook.label}")
            elif str(r.output.get("decision", "")).lower() in ("deny", "block"):
                parts.append(str(r.output.get("reason") or f"denied by hook {r.hook.label}"))
        return "\n".join(parts)

    @property
    def stopped(self) -> bool:
        return any(r.output.get("continue") is False for r in self.results)

    @property
    def stop_reason(self) -> str:
        return "\n".join(str(r.output.get("stopReason") or r.output.get("reason") or
                             f"stopped by hook {r.hook.label}")
                         for r in self.results if r.output.get("continue") is False)

    @property
    def messages(self) -> list[str]:
        """Lines for the user: each hook's warning and ``systemMessage``."""
        lines = []
        for r in self.results:
            if r.warning:
                lines.append(r.warning)
            if isinstance(r.output.get("systemMessage"), str) and r.output["systemMessage"]:
                lines.append(r.output["systemMessage"])
        return lines

    def specific(self, key: str) -> list[Any]:
        """Every ``hookSpecificOutput[key]`` given, in order."""
        values = []
        for r in self.results:
            specific = r.output.get("hookSpecificOutput")
            if isinstance(specific, dict) and specific.get(key) is not None:
                values.append(specific[key])
        return values

    @property
    def additional_context(self) -> str:
        return "\n".join(str(v) for v in self.specific("additionalContext"))

    def as_output(self) -> dict[str, Any]:
        """The combined verdict as one hook output object (gemini-cli's
        fields), what a ``hook_response`` carries to a server: ``decision``
        ``deny`` with the joined ``reason`` (exit status 2 included),
        ``continue: false`` with ``stopReason``, and in
        ``hookSpecificOutput`` the joined ``additionalContext`` and the
        merged ``tool_input`` rewrites. ``{}``: no opinion. Messages for
        the user (``systemMessage``, warnings) are not in it: they were
        shown where the hooks ran."""
        output: dict[str, Any] = {}
        if self.denied:
            output.update(decision="deny", reason=self.reason)
        if self.stopped:
            output.update({"continue": False, "stopReason": self.stop_reason})
        specific: dict[str, Any] = {}
        if self.additional_context:
            specific["additionalContext"] = self.additional_context
        rewrites = [r for r in self.specific("tool_input") if isinstance(r, dict)]
        if rewrites:
            specific["tool_input"] = {k: v for rewrite in rewrites for k, v in rewrite.items()}
        if specific:
            output["hookSpecificOutput"] = specific
        return output

    @classmethod
    def from_output(cls, event: str, output: Any, where: str) -> HookOutcome:
        """The outcome a combined output object stands for (what
        :meth:`as_output` made, on another machine: ``where`` names it in
        a default reason); anything but an object is no opinion."""
        hook = HookDefinition(event, where, name=where)
        return cls([HookResult(hook, output=dict(output) if isinstance(output, dict) else {})])


class HookRunner(msgspec.Struct):
    """Runs a :class:`HookSet`'s hooks for events of one session."""

    hooks: HookSet
    #: The project directory (``GEMINI_PROJECT_DIR``, the hooks' cwd).
    project_dir: Path
    environ: Mapping[str, str] = msgspec.field(default_factory=lambda: dict(os.environ))
    session_id: str = ""
    transcript_path: str = ""
    #: Where lines for the user go (warnings, ``systemMessage``).
    notify: Callable[[str], None] | None = None

    def has(self, event: str, target: str | None = None) -> bool:
        return bool(self.hooks.for_event(event, target))

    @property
    def has_tool_hooks(self) -> bool:
        """Whether any BeforeTool or AfterTool hook may run."""
        return any(self.has(event) for event in TOOL_EVENTS)

    def longest_tool_round(self) -> float:
        """The longest one BeforeTool or AfterTool round may take, in
        seconds (what a server waits for it, ``hello.tool_hooks_timeout``):
        its parallel hooks at once beside its sequential ones one after
        another, each with its output grace."""
        longest = 0.0
        for event in TOOL_EVENTS:
            hooks = self.hooks.for_event(event)
            parallel = max((h.timeout_ms for h in hooks if not h.sequential), default=0) / 1000
            sequential = [h.timeout_ms / 1000 + OUTPUT_GRACE for h in hooks if h.sequential]
            longest = max(longest, parallel + OUTPUT_GRACE if parallel else 0.0, sum(sequential))
        return longest

    async def fire(self, event: str, fields: dict[str, Any], target: str | None = None) -> HookOutcome:
        """Run the hooks of ``event`` matching ``target`` with ``fields``
        added to the common input, and tell the user their messages.
        Hooks of a ``sequential`` group run one after another, the others
        at once. A tool event of gemini-cli's ``invoke_agent`` also matches
        by its ``agent_name`` (:func:`gemini_split.agent_invocation.names`):
        a matcher naming the sub-agent still runs for its call."""
        aliases = names(target, fields.get("tool_input"))[1:] if event in TOOL_EVENTS and target else ()
        hooks = self.hooks.for_event(event, target, aliases)
        outcome = HookOutcome()
        if not hooks:
            return outcome
        import json  # lazy_imports.EDGES: only when a hook runs, never for its definitions

        payload = json.dumps({
            "session_id": self.session_id, "transcript_path": self.transcript_path,
            "cwd": str(self.project_dir), "hook_event_name": event,
            "timestamp": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"), **fields,
        }).encode()
        env = {**self.environ, "GEMINI_PROJECT_DIR": str(self.project_dir), "CLAUDE_PROJECT_DIR": str(self.project_dir),
               "GEMINI_CWD": str(self.project_dir), "GEMINI_SESSION_ID": self.session_id}
        results: list[HookResult | None] = [None] * len(hooks)

        async def one(i: int) -> None:
            results[i] = await run_hook(hooks[i], payload, env, self.project_dir)

        parallel = [i for i, h in enumerate(hooks) if not h.sequential]
        async with trio.open_nursery() as nursery:
            for i in parallel:
                nursery.start_soon(one, i)
            for i, h in enumerate(hooks):
                if h.sequential:
                    await one(i)
        outcome.results = [r for r in results if r is not None]
        if self.notify is not None:
            for line in outcome.messages:
                self.notify(line)
        return outcome


async def run_hook(hook: HookDefinition, payload: bytes, env: Mapping[str, str], cwd: Path) -> HookResult:
    """Run one hook command (``sh -c``) in its own process group with
    ``payload`` on stdin; see the module's docstring for the contract.
    Never raises for the hook's failure (Trio cancellation propagates, and
    the hook's process group is killed)."""
    what = f"hook {hook.label!r} ({hook.event})"
    try:
        process = await trio.lowlevel.open_process(
            ["/bin/sh", "-c", hook.command], stdin=-1, stdout=-1, stderr=-1,
            cwd=str(cwd), env={**env, **dict(hook.env)}, start_new_session=True)
    except OSError as exc:
        return HookResult(hook, warning=f"gemini-split: {what} could not start: {exc.strerror or exc}")
    out, err = bytearray(), bytearray()
    over = [False]

    async def feed() -> None:
        try:
            await process.stdin.send_all(payload)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # a hook need not read its input
        finally:
            await process.stdin.aclose()

    async def drain(stream: Any, into: bytearray, limit: int, flag: list[bool] | None, done: trio.Event) -> None:
        while chunk := await stream.receive_some(65536):
            room = limit - len(into)
            if room > 0:
                into += chunk[:room]
            if len(chunk) > room and flag is not None:
                flag[0] = True
        done.set()

    timed_out = False
    try:
        with trio.move_on_after(hook.timeout_ms / 1000) as scope:
            async with trio.open_nursery() as nursery:
                out_done, err_done = trio.Event(), trio.Event()
                nursery.start_soon(feed)
                nursery.start_soon(drain, process.stdout, out, MAX_STDOUT_BYTES, over, out_done)
                nursery.start_soon(drain, process.stderr, err, MAX_STDERR_BYTES, None, err_done)
                await process.wait()
                # Something the hook started in the background may hold its
                # pipes open: what it wrote by now is the answer.
                with trio.move_on_after(OUTPUT_GRACE):
                    await out_done.wait()
                    await err_done.wait()
                nursery.cancel_scope.cancel()
        timed_out = scope.cancelled_caught
    finally:
        if process.returncode is None or timed_out:
            _kill_group(process.pid)
            with trio.CancelScope(shield=True):
                await process.wait()
        with trio.CancelScope(shield=True):
            for stream in (process.stdin, process.stdout, process.stderr):
                await stream.aclose()
    stderr = err.decode("utf-8", "replace")
    if timed_out:
        return HookResult(hook, stderr=stderr, warning=f"gemini-split: {what} did not finish within "
                          f"{hook.timeout_ms / 1000:g} s and was killed; going on without it")
    code = process.returncode
    if code == 2:
        return HookResult(hook, blocked=True, stderr=stderr)
    if code != 0:
        if code == 126:
            why = "its command is not executable"
        elif code == 127:
            why = "its command was not found"
        elif code < 0:
            why = f"it was killed by signal {-code}"
        else:
            why = f"it exited with status {code}"
        detail = stderr.strip().splitlines()[-1][:300] if stderr.strip() else ""
        return HookResult(hook, stderr=stderr, warning=f"gemini-split: {what}: {why}" +
                          (f" ({detail})" if detail else "") + "; going on without it")
    if over[0]:
        return HookResult(hook, stderr=stderr, warning=f"gemini-split: {what} printed more than "
                          f"{MAX_STDOUT_BYTES // 1024} KiB on stdout; its output is ignored")
    text = out.decode("utf-8", "replace").strip()
    if not text:
        return HookResult(hook, stderr=stderr)
    try:
        value = json_values.loads(text)
    except (ValueError, RecursionError):  # json.JSONDecodeError
        value = None
    if not isinstance(value, dict):
        preview = text[:80].replace("\n", "\\n")
        return HookResult(hook, stderr=stderr, warning=f"gemini-split: {what} printed something that is not a "
                          f"JSON object on stdout ({preview!r}); its output is ignored")
    return HookResult(hook, output=value, stderr=stderr)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def describe(hooks: HookSet) -> list[str]:
    """Lines for ``hooks list`` and ``/hooks``: each event's hooks with
    matcher, timeout and where each was defined."""
    lines: list[str] = []
    active = set(map(id, hooks.active()))
    if not hooks.enabled:
        lines.append("hooks are disabled (hooksConfig.enabled is false)")
    for event in EVENTS:
        here = [h for h in hooks.hooks if h.event == event]
        if not here:
            continue
        note = "  (not fired by gemini-split)" if event in UNSUPPORTED_EVENTS else \
            "  (/compress only)" if event == "PreCompress" else ""
        lines.append(f"{event}:{note}")
        for h in here:
            state = "" if id(h) in active else "  [disabled]"
            matcher = f"  matcher {h.matcher!r}" if h.matcher not in ("", "*") else ""
            lines.append(f"  {h.label}{matcher}  timeout {h.timeout_ms / 1000:g} s{state}")
            if h.name:
                lines.append(f"    command: {h.command}")
            if h.description:
                lines.append(f"    {h.description}")
            lines.append(f"    from {h.source}")
    if not hooks.hooks:
        lines.append("no hooks configured (the \"hooks\" section of settings.json)")
    return lines


#: At most this long is waited for the SessionEnd hooks when a session closes.
SESSION_END_WAIT = 5.0


@asynccontextmanager
async def session_hooks(client: Any, runner: HookRunner, *, resumed: bool) -> AsyncIterator[None]:
    """Hooks around one connected client (a ``ProtocolClient``):
    ``SessionStart`` now (source ``startup`` or ``resume``; its
    ``additionalContext`` goes before the first prompt), ``BeforeAgent``
    and ``AfterAgent`` around each prompt (``userfiles.hooks``), and
    ``SessionEnd`` (reason ``exit``) when the block ends, waited for at most
    :data:`SESSION_END_WAIT` seconds."""
    if client.connected is not None:
        runner.session_id = client.connected.session_id
    client.hooks = runner
    source = "resume" if resumed else "startup"
    start = await runner.fire("SessionStart", {"source": source}, target=source)
    if start.additional_context:
        client.pending_hook_context = start.additional_context
    try:
        yield
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(SESSION_END_WAIT):
            await runner.fire("SessionEnd", {"reason": "exit"}, target="exit")
