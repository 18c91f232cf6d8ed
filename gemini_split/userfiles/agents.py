"""Sub-agent definitions (issue 32): read where gemini-cli reads them.

gemini-cli 0.61's format: a Markdown file whose YAML frontmatter
(``name``, ``description``, ``kind``, ``display_name``, ``tools`` with
``*`` wildcards, ``mcpServers`` / ``mcp_servers``, ``model``, ``temperature``,
``max_turns``, ``timeout_mins``; no other key) describes the agent and
whose body is its system prompt. Lowest precedence first (a later
definition of the same name replaces an earlier one), as gemini-cli's
agent registry loads them:

1. the built-ins, ``codebase_investigator`` and ``generalist``
   (:func:`builtins`, gemini-cli's prompts and schemas),
2. user agents: ``~/.gemini/agents/*.md``,
3. project agents: ``<project>/.gemini/agents/*.md`` — only in a trusted
   folder, as every other project file.

A ``kind: remote`` definition is an Agent2Agent agent (gemini-cli's
``agent_card_url`` / ``agent_card_json`` and ``auth``; a file may hold a
list of them): ``userfiles/remote_agents.py`` reads it, and this client makes
its calls (``tools/a2a.py``; its credentials never reach the server).

A file named ``_*.md`` is skipped. A file that cannot be a definition (no
frontmatter, malformed YAML, a missing or wrong field) is reported with its
path and field in :attr:`Discovery.warnings` and the others still load;
``mcpServers`` entries are checked as a settings file's (a malformed one is
named by path and field, and left out) and kept in :attr:`Agent.mcp_servers`:
the client that runs the session's tools starts them and offers their tools
to that sub-agent alone (:mod:`.agent_mcp`); a tool name that is no tool gemini-split has is
said too (the server clamps what an agent gets to the session's tools in
any case, and names what it refused in ``agent_started``).

``agents.overrides.<name>`` in settings (gemini-cli's shape) turns an
agent on or off and sets its model and limits (:func:`apply_overrides`);
the enabled ones travel to the server in ``SessionContext.agents``
(:func:`wire_agents`), which runs them (``server/session/features/agents.py``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from gemini_split.errors import SettingsError
from gemini_split.files import read_bounded

from .precedence import tiers

#: The sub-agents plan mode offers: gemini-cli's built-in research agents
#: (read-only tools only).
PLAN_MODE_AGENTS = frozenset({"codebase_investigator"})
#: A definition larger than this is refused (its body travels with every request).
MAX_AGENT_BYTES = 256 * 1024
#: At most this many sub-agents are sent (the protocol's bound).
MAX_AGENTS = 64
_FRONTMATTER = re.compile(r"^---\r?\n([\s\S]*?)\r?\n---(?:\r?\n([\s\S]*))?\Z")
_NAME = re.compile(r"^[a-z0-9_-]{1,64}$")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.*-]{1,128}$")
_KEYS = frozenset({"name", "description", "kind", "display_name", "tools", "mcp_servers", "mcpServers", "model",
                   "temperature", "max_turns", "timeout_mins"})
#: The tools gemini-split has (gemini-cli's names); MCP tools are the others.
KNOWN_TOOLS = frozenset({
    "read_file", "read_many_files", "list_directory", "write_file", "replace", "glob", "grep_search",
    "run_shell_command", "web_fetch", "google_web_search", "save_memory", "write_todos", "activate_skill",
    "enter_plan_mode", "list_background_processes", "read_background_output",
})


class AgentError(Exception):
    """A definition that cannot be loaded; the text names the file and field."""


class Agent(msgspec.Struct, frozen=True):
    """One sub-agent: its definition (the wire form), where it came from
    (``builtin``, ``user`` or ``project``), whether it is on, and what was
    said about it (an unknown tool, ``mcp_servers``)."""

    definition: Any  # gemini_split.protocol.AgentDefinition (imported lazily)
    scope: str
    enabled: bool = True
    notes: tuple[str, ...] = ()
    #: A remote (Agent2Agent) agent's endpoint, card and auth
    #: (``userfiles.remote_agents.RemoteConfig``): this client's only.
    remote: Any = None
    #: Its definition's own ``mcpServers`` (name → ``MCPServerSettings``),
    #: the well-formed ones: run by this client for this sub-agent alone.
    mcp_servers: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.definition.name


class Discovery(msgspec.Struct):
    """The agents found (winners only, in name order) and what was wrong."""

    agents: list[Agent] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)

    def enabled(self) -> list[Agent]:
        return [a for a in self.agents if a.enabled]

    def get(self, name: str) -> Agent | None:
        return next((a for a in self.agents if a.name == name), None)


# --------------------------------------------------------------------------
# The built-ins (gemini-cli 0.61's codebase-investigator.ts and generalist)

_INVESTIGATOR_PROMPT = """You are **Codebase Investigator**, a hyper-specialized AI agent and an expert in reverse-engineering complex software projects. You are a sub-agent within a larger development system.
Your **SOLE PURPOSE** is to build a complete mental model of the code relevant to a given investigation. You must identify all relevant files, understand their roles, and foresee the direct architectural consequences of potential changes.
You are a sub-agent in a larger system. Your only responsibility is to provide deep, actionable context.
- **DO:** Find the key modules, classes, and functions that are part of the problem and its solution.
- **DO:** Understand *why* the code is written the way it is. Question everything.
- **DO:** Foresee the ripple effects of a change. If `function A` is modified, you must check its callers. If a data structure is altered, you must identify where its type definitions need to be updated.
- **DO:** provide a conclusion and insights to the main agent that invoked you. If the agent is trying to solve a bug, you should provide the root cause of the bug, its impacts, how to fix it etc. If it's a new feature, you should provide insights on where to implement it, what changes are necessary etc.
- **DO NOT:** Write the final implementation code yourself.
- **DO NOT:** Stop at the first relevant file. Your goal is a comprehensive understanding of the entire relevant subsystem.
You operate in a non-interactive loop and must reason based on the information provided and the output of your tools.
---
## Core Directives
<RULES>
1.  **DEEP ANALYSIS, NOT JUST FILE FINDING:** Your goal is to understand the *why* behind the code. Don't just list files; explain their purpose and the role of their key components. Your final report should empower another agent to make a correct and complete fix.
2.  **SYSTEMATIC & CURIOUS EXPLORATION:** Start with high-value clues (like tracebacks or ticket numbers) and broaden your search as needed. Think like a senior engineer doing a code review. An initial file contains clues (imports, function calls, puzzling logic). **If you find something you don't understand, you MUST prioritize investigating it until it is clear.** Treat confusion as a signal to dig deeper.
3.  **HOLISTIC & PRECISE:** Your goal is to find the complete and minimal set of locations that need to be understood or changed. Do not stop until you are confident you have considered the side effects of a potential fix (e.g., type errors, breaking changes to callers, opportunities for code reuse).
</RULES>
---
## Scratchpad Management
**This is your most critical function. Your scratchpad is your memory and your plan.**
1.  **Initialization:** On your very first turn, you **MUST** create the `<scratchpad>` section. Analyze the `task` and create an initial `Checklist` of investigation goals and a `Questions to Resolve` section for any initial uncertainties.
2.  **Constant Updates:** After **every** `<OBSERVATION>`, you **MUST** update the scratchpad.
    * Mark checklist items as complete: `[x]`.
    * Add new checklist items as you trace the architecture.
    * **Explicitly log questions in `Questions to Resolve`** (e.g., `[ ] What is the purpose of the 'None' element in this list?`). Do not consider your investigation complete until this list is empty.
    * Record `Key Findings` with file paths and notes about their purpose and relevance.
    * Update `Irrelevant Paths to Ignore` to avoid re-investigating dead ends.
3.  **Thinking on Paper:** The scratchpad must show your reasoning process, including how you resolve your questions.
---
## Termination
Your mission is complete **ONLY** when your `Questions to Resolve` list is empty and you have identified all files and necessary change *considerations*.
When you are finished, you **MUST** call the `complete_task` tool. The `report` argument for this tool **MUST** be a valid JSON object containing your findings.

**Example of the final report**
```json
{
  "SummaryOfFindings": "The core issue is a race condition in the `updateUser` function. The function reads the user's state, performs an asynchronous operation, and then writes the state back. If another request modifies the user state during the async operation, that change will be overwritten. The fix requires implementing a transactional read-modify-write pattern, potentially using a database lock or a versioning system.",
  "ExplorationTrace": [
    "Used `grep` to search for `updateUser` to locate the primary function.",
    "Read the file `src/controllers/userController.js` to understand the function's logic.",
    "Used `ls -R` to look for related files, such as services or database models.",
    "Read `src/services/userService.js` and `src/models/User.js` to understand the data flow and how state is managed."
  ],
  "RelevantLocations": [
    {
      "FilePath": "src/controllers/userController.js",
      "Reasoning": "This file contains the `updateUser` function which has the race condition. It's the entry point for the problematic logic.",
      "KeySymbols": ["updateUser", "getUser", "saveUser"]
    }
  ]
}
```
"""

#: gemini-cli's ``CodebaseInvestigationReportSchema`` as JSON schema.
INVESTIGATION_REPORT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "SummaryOfFindings": {"type": "string", "description": "A summary of the investigation's conclusions and "
                                                               "insights for the main agent."},
        "ExplorationTrace": {"type": "array", "items": {"type": "string"},
                             "description": "A step-by-step list of actions and tools used during the investigation."},
        "RelevantLocations": {
            "type": "array",
            "description": "A list of relevant files and the key symbols within them.",
            "items": {"type": "object", "properties": {
                "FilePath": {"type": "string"}, "Reasoning": {"type": "string"},
                "KeySymbols": {"type": "array", "items": {"type": "string"}}},
                "required": ["FilePath", "Reasoning", "KeySymbols"]},
        },
    },
    "required": ["SummaryOfFindings", "ExplorationTrace", "RelevantLocations"],
}


def builtins() -> list[Any]:
    """The built-in definitions (gemini-cli's, in its words)."""
    from gemini_split.protocol import AgentDefinition

    return [
        AgentDefinition(
            name="codebase_investigator",
            description=("The specialized tool for codebase analysis, architectural mapping, and understanding "
                         "system-wide dependencies. Invoke this tool for tasks like vague requests, bug root-cause "
                         "analysis, system refactoring, comprehensive feature implementation or to answer questions "
                         "about the codebase that require investigation. It returns a structured report with key "
                         "file paths, symbols, and actionable architectural insights."),
            tools=("list_directory", "read_file", "glob", "grep_search"),
            temperature=0.1, max_turns=50, timeout_mins=10,
            system_prompt=_INVESTIGATOR_PROMPT,
            input_schema={"type": "object", "properties": {"objective": {
                "type": "string",
                "description": ("A comprehensive and detailed description of the user's ultimate goal. You must "
                                "include original user's objective as well as questions and any extra context and "
                                "questions you may have.")}}, "required": ["objective"]},
            query=("Your task is to do a deep investigation of the codebase to find all relevant files, code "
                   "locations, architectural mental map and insights to solve  for the following user objective:\n"
                   "<objective>\n${objective}\n</objective>"),
            output_name="report", output_schema=INVESTIGATION_REPORT_SCHEMA, source="builtin",
        ),
        AgentDefinition(
            name="generalist",
            description=("A general-purpose AI agent with access to all tools. Highly recommended for tasks that are "
                         "turn-intensive or involve processing large amounts of data. Use this to keep the main "
                         "session history lean and efficient. Excellent for: batch refactoring/error fixing across "
                         "multiple files, running commands with high-volume output, and speculative investigations."),
            tools=("*",), max_turns=20, timeout_mins=10,
            input_schema={"type": "object", "properties": {"request": {
                "type": "string", "description": "The task or question for the generalist agent."}},
                "required": ["request"]},
            query="${request}", source="builtin",
        ),
    ]


# --------------------------------------------------------------------------
# Reading the files


def agent_roots(config_dir: Path, project: Path | None, *, trusted: bool) -> list[tuple[str, Path]]:
    """The directories searched, lowest precedence first, with their scope.
    ``config_dir`` is the user's ``~/.gemini`` (``$GEMINI_SPLIT_HOME``);
    ``project`` the workspace root (None or untrusted: no project tier; a
    project directory that is the user's own adds nothing)."""
    projects = [project / ".gemini" / "agents"] if project is not None and trusted else []
    return tiers([config_dir / "agents"], projects)


def discover(roots: Sequence[tuple[str, Path]], *, overrides: Mapping[str, Any] | None = None,
             with_builtins: bool = True, proxy: str | None = None,
             environ: Mapping[str, str] | None = None) -> Discovery:
    """The built-ins, then every definition under ``roots`` (later wins),
    with ``overrides`` (``agents.overrides``) applied. A missing directory
    is no error. A remote agent's card is read now (through ``proxy``,
    ``general.proxy``; ``environ`` for its auth's ``$VAR`` and
    ``!command`` when the card asks for credentials)."""
    found: dict[str, Agent] = {}
    warnings: list[str] = []
    if with_builtins:
        for definition in builtins():
            found[definition.name] = Agent(definition, "builtin")
    for scope, root in roots:
        for path in _agent_files(Path(root), warnings):
            try:
                loaded = load_agents(path, scope, warnings, proxy=proxy, environ=environ)
            except AgentError as exc:
                warnings.append(str(exc))
                continue
            for agent in loaded:
                found[agent.name] = agent
    agents = [apply_overrides(a, (overrides or {}).get(a.name)) for a in sorted(found.values(), key=lambda a: a.name)]
    return Discovery(agents, warnings)


def _agent_files(root: Path, warnings: list[str]) -> list[Path]:
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        warnings.append(f"{root}: agents directory is not a directory; skipped")
        return []
    except OSError as exc:
        warnings.append(f"{root}: cannot list agents: {exc.strerror or exc}")
        return []
    return [Path(e.path) for e in entries if e.name.endswith(".md") and not e.name.startswith("_")]


def load_agents(path: Path, scope: str, warnings: list[str], *, proxy: str | None = None,
                environ: Mapping[str, str] | None = None) -> list[Agent]:
    """The definitions in ``path``: one local or remote agent, or (gemini-cli's
    list form, remote agents only) several; a bad entry of a list is said in
    ``warnings`` and the others load. Raises :class:`AgentError` for a file
    that yields nothing."""
    text = _read(path)
    match = _FRONTMATTER.match(text)
    meta = _parse(path, match.group(1), lists=True) if match is not None else None
    if isinstance(meta, dict) and meta.get("kind") != "remote":
        return [load_agent(path, scope)]
    if meta is None:
        return [load_agent(path, scope)]  # says what is wrong
    from .remote_agents import RemoteAgentError, load_remote  # lazy_imports.EDGES

    entries = meta if isinstance(meta, list) else [meta]
    if not all(isinstance(e, dict) and e.get("kind") == "remote" for e in entries):
        raise AgentError(f"{path}: the frontmatter is not a mapping of fields (name:, description: …); a list "
                         "may hold remote agents only, each with 'kind: remote' (as in gemini-cli)")
    agents = []
    for entry in entries:
        try:
            definition, remote = load_remote(path, entry, proxy=proxy, environ=environ)
        except (AgentError, RemoteAgentError) as exc:
            if len(entries) == 1:
                raise AgentError(str(exc)) from None
            warnings.append(str(exc))
            continue
        agents.append(Agent(definition, scope, remote=remote))
    return agents


def load_agent(path: Path, scope: str = "user") -> Agent:
    """The definition in ``path``. Raises :class:`AgentError` naming the
    file (and the field) for anything gemini-cli refuses."""
    from gemini_split.protocol import AgentDefinition

    text = _read(path)
    match = _FRONTMATTER.match(text)
    if match is None:
        raise AgentError(f"{path}: missing YAML frontmatter (an agent file starts with a '---' line, then "
                         "name:, description: …, then '---', then its system prompt)")
    meta = _parse(path, match.group(1))
    if meta.get("kind") == "remote":
        return load_agents(path, scope, [])[0]
    notes: list[str] = []
    unknown = sorted(set(meta) - _KEYS)
    if unknown:
        raise AgentError(f"{path}: unknown field {unknown[0]!r} (known: {', '.join(sorted(_KEYS - {'mcpServers'}))})")
    name = meta.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise AgentError(f"{path}: field 'name' must be a slug of lowercase letters, digits, '-' and '_' "
                         f"(at most 64), got {name!r}")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise AgentError(f"{path}: field 'description' is required (text the main model reads to decide when "
                         "to delegate)")
    kind = meta.get("kind", "local")
    if kind != "local":
        raise AgentError(f"{path}: field 'kind' must be 'local' or 'remote', got {kind!r}")
    tools = meta.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not all(isinstance(t, str) and _TOOL_NAME.match(t) for t in tools):
            raise AgentError(f"{path}: field 'tools' must be a list of tool names ('*' wildcards allowed)")
        unknown_tools = [t for t in tools if "*" not in t and t not in KNOWN_TOOLS and "__" not in t
                         and not t.startswith("mcp_")]
        if unknown_tools:
            notes.append(f"{path}: field 'tools': no tool named {', '.join(unknown_tools)} (not granted)")
    servers: dict[str, Any] = {}
    notes += mcp_server_notes(path, meta, servers)
    model = meta.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise AgentError(f"{path}: field 'model' must be a model name (or 'inherit')")
    temperature = _number(path, meta, "temperature", 0, 2)
    max_turns = _number(path, meta, "max_turns", 1, 1000, integer=True)
    timeout = _number(path, meta, "timeout_mins", 1, 1440, integer=True)
    body = (match.group(2) or "").strip()
    try:
        definition = AgentDefinition(
            name=name, description=description.strip(), tools=tuple(tools) if tools is not None else None,
            model=None if model in (None, "inherit") else model.strip(), temperature=temperature,
            max_turns=max_turns, timeout_mins=timeout, system_prompt=body, source=str(path))
    except (msgspec.ValidationError, TypeError) as exc:
        raise AgentError(f"{path}: {exc}") from None
    return Agent(definition, scope, notes=tuple(notes), mcp_servers=servers)


def mcp_server_notes(path: Path, meta: dict, servers: dict[str, Any] | None = None) -> list[str]:
    """What is said of a definition's ``mcpServers`` (or ``mcp_servers``):
    each entry checked as a settings file's ``mcpServers`` entry is
    (gemini-cli's ``MCPServerConfig``: a malformed one is named by path and
    field, and left out). The well-formed ones are put in ``servers``
    (name → ``MCPServerSettings``; ``mcpServers`` wins a name both keys give)."""
    from gemini_split.userfiles.settings import MCPServerSettings

    notes: list[str] = []
    for key in ("mcpServers", "mcp_servers"):
        servers_of = meta.get(key)
        if servers_of is None:
            continue
        if not isinstance(servers_of, dict):
            notes.append(f"{path}: field '{key}' must be a mapping of server names to server settings "
                         f"(command:, args: … or httpUrl:), got {type(servers_of).__name__}")
            continue
        for name, entry in servers_of.items():
            if not isinstance(name, str) or not name.strip() or not name.isprintable():
                notes.append(f"{path}: field '{key}': {str(name)[:80]!r} is no MCP server name")
                continue
            try:
                server = msgspec.convert(entry, MCPServerSettings)
            except msgspec.ValidationError as exc:
                message, _, at = str(exc).partition(" - at `$")
                message = message.replace("`", "")
                notes.append(f"{path}: field '{key}.{name}{at.rstrip('`')}': {message[:1].lower()}{message[1:]}; "
                             "this MCP server is left out")
                continue
            if not (server.command or server.url or server.http_url):
                notes.append(f"{path}: field '{key}.{name}': needs 'command' (a stdio server), 'httpUrl' or 'url'; "
                             "this MCP server is left out")
                continue
            if servers is not None and (key == "mcpServers" or name not in servers):
                servers[name] = server
    return notes


def _number(path: Path, meta: dict, key: str, low: float, high: float, *, integer: bool = False) -> Any:
    value = meta.get(key)
    if value is None:
        return None
    kind_ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not kind_ok or not low <= value <= high:
        what = "a whole number" if integer else "a number"
        raise AgentError(f"{path}: field {key!r} must be {what} from {low:g} to {high:g}, got {value!r}")
    return value


def _read(path: Path) -> str:
    try:
        data = read_bounded(path, MAX_AGENT_BYTES)
    except OSError as exc:
        raise AgentError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_AGENT_BYTES:
        raise AgentError(f"{path}: more than the {MAX_AGENT_BYTES} bytes an agent file may have; skipped")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise AgentError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def _parse(path: Path, text: str, *, lists: bool = False) -> Any:
    import yaml

    try:
        meta = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 2})" if where is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise AgentError(f"{path}: malformed YAML frontmatter{line}: {problem}") from None
    if lists and isinstance(meta, list):
        return meta
    if not isinstance(meta, dict):
        raise AgentError(f"{path}: the frontmatter is not a mapping of fields (name:, description: …)")
    return meta


# --------------------------------------------------------------------------
# agents.overrides, and what goes to the server


def apply_overrides(agent: Agent, override: Any) -> Agent:
    """``agents.overrides.<name>`` (a settings ``AgentOverride``, or None)
    applied to ``agent``."""
    if override is None:
        return agent
    changes: dict[str, Any] = {}
    if override.model_config.model:
        changes["model"] = None if override.model_config.model == "inherit" else override.model_config.model
    if override.run_config.max_turns is not None:
        changes["max_turns"] = override.run_config.max_turns
    if override.run_config.max_time_minutes is not None:
        changes["timeout_mins"] = override.run_config.max_time_minutes
    definition = msgspec.structs.replace(agent.definition, **changes) if changes else agent.definition
    enabled = agent.enabled if override.enabled is None else override.enabled
    return Agent(definition, agent.scope, enabled, agent.notes, agent.remote, agent.mcp_servers)


def wire_agents(discovery: Discovery, *, excluded: Iterable[str] = (), only: Iterable[str] | None = None,
                plan: bool = False, remote: bool = True) -> tuple:
    """The enabled agents' definitions, as ``SessionContext.agents`` carries
    them (at most :data:`MAX_AGENTS`), offered as the session's tools are:
    ``excluded`` (``tools.exclude``) takes an agent out as it takes out a
    tool, ``only`` (``tools.core``, an allowlist of names) keeps just the
    agents it names, and in plan mode only the built-in research agents
    (:data:`PLAN_MODE_AGENTS`) are offered, as in gemini-cli. ``remote``
    False (``--tools server``: no client runs the session's tools, and a
    remote agent is called by that client): no remote agent is offered."""
    off = set(excluded)
    allowed = set(only) if only is not None else None
    return tuple(a.definition for a in discovery.enabled()
                 if a.name not in off and (allowed is None or a.name in allowed)
                 and (remote or a.remote is None)
                 and (not plan or a.name in PLAN_MODE_AGENTS))[:MAX_AGENTS]


def set_enabled(path: Path, name: str, enabled: bool) -> bool:
    """Set ``agents.overrides.<name>.enabled`` in the settings file
    ``path``, keeping everything else, comments too
    (:mod:`gemini_split.userfiles.settings_edit`). Returns whether the file changed.
    Raises :class:`AgentError` for a file that is not a JSON object, or
    whose ``agents.overrides.<name>`` is not one (it is left as it was),
    ``OSError`` when it cannot be written."""
    from gemini_split.userfiles.settings_edit import SettingsFile  # lazy_imports.EDGES

    key = ("agents", "overrides", name, "enabled")
    try:
        settings = SettingsFile.read(path)
        if settings.get(key, None) is enabled:
            return False
        settings.set(key, enabled)
    except SettingsError as exc:
        raise AgentError(str(exc)) from None
    return settings.save()


__all__ = ["Agent", "AgentError", "Discovery", "agent_roots", "discover", "load_agent",
           "apply_overrides", "wire_agents", "set_enabled", "builtins"]
