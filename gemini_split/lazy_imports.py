"""Start-up economy in one place: the heavy edges.

A module imports what it uses at its head, as usual, except for the modules
below: they cost enough to import that a path which does not need them must
not pay for them, so they are imported inside the function that needs them.
Nothing else is imported inside a function, except to break an import cycle
listed in :data:`CYCLES`; ``tests/test_app.py`` checks both (an edge imported
at the module's head as well is refused there too). The start-up tests read these tables
(``tests/cli/test_cli_start.py``, ``tests/cli/daemon/test_oneshot_imports.py``): a
path that imports one of them fails there. What each costs, measured, is in
``docs/performance.md`` ("Start-up: the heavy edges").

The command line is split the same way: ``gemini_split/commands/parsers/``
declares each subcommand's arguments (argparse only, on the start-up path)
and names the runner module that runs it; only that module is imported.
"""

#: Module (or package) → why it is imported only where it is needed.
EDGES = {
    "trio": "not on the shell's path (--version, --help, completions' server list --names)",
    "gemini_split.protocol": "not on the shell's path: msgspec and ~300 message classes",
    "gemini_split.transport": "not on the shell's path; a transport's plugin only when its scheme is used",
    "google": "google-genai and google-auth: only where a model or credentials are built",
    "httpx": "only where HTTP is spoken (the model, web_fetch, MCP over HTTP)",
    "prompt_toolkit": "the REPL only, never -p",
    "rich": "the REPL and attach's rendering only, never the thin -p",
    "gemini_split.ui.repl.loop": "the REPL (prompt-toolkit)",
    "gemini_split.ui.repl.prompt_input": "the REPL's prompts (prompt-toolkit)",
    "gemini_split.ui.follow": "attach --watch (rich)",
    "gemini_split.ui.render": "rich's console",
    "gemini_split_websocket": "the WebSocket stack (wsproto): ws:// and wss:// only",
    "wsproto": "the WebSocket stack",
    "gemini_split_grpc": "the gRPC stack: grpc:// and serve --grpc only",
    "grpc": "the gRPC stack",
    "gemini_split.acp": "the ACP stack: --acp and serve --acp-ws only",
    "gemini_split.commands.run_acp": "the ACP stack",
    "mcp": "the MCP SDK: only when MCP servers are configured, or mcp serve",
    "gemini_split.tools.mcp": "the MCP SDK",
    "gemini_split.tools.mcp.oauth": "OAuth for remote MCP servers (h11, json, webbrowser): only for a remote server",
    "httpx2": "the MCP SDK's HTTP client: only when a remote MCP server is connected to or signed in to",
    "pydantic": "the MCP SDK's models: only when an IDE companion is connected to",
    "hypercorn": "mcp serve --http only",
    "gemini_split.server": "the server, from a thin client (-p through a daemon or --server)",
    "coredis": "the Redis client: serve --store redis:// only",
    "shtab": "completions only",
    "json": "the thin -p path never loads it (msgspec does its JSON); ~1.5 ms",
    "tomllib": "policy files only when there are some",
    "logging": "not on the shell's path (server list --names runs on every Tab): ~11 ms",
    "gemini_split.userfiles.extensions": "extensions only when some are installed",
    "gemini_split.tools.checkpoints": "checkpoints only with general.checkpointing.enabled (and /restore)",
    "gemini_split.userfiles.hooks": "hooks only when a settings file has some",
    "importlib.metadata": "entry points only when a plugin is looked up",
    "gemini_split.web": "serve --web only (the page's files are read at start)",
    "segno": "gemini-split pair's QR code only",
    "gemini_split.tools.agent_mcp": "a sub-agent's own MCP servers: only when a definition has some (dataclasses)",
    "gemini_split.userfiles.remote_agents": "remote (Agent2Agent) sub-agents: only for a remote definition (httpx, json)",
    "gemini_split.tools.a2a": "a remote sub-agent's call: only when one is asked for (httpx, json)",
    "gemini_split.tools.edit_journal": "only when an edit tool runs or /rewind asks (json, hashlib, shutil)",
    "opentelemetry": "the OpenTelemetry SDK: only when telemetry is on",
    "opentelemetry.exporter.otlp.proto.grpc": "the OTLP/gRPC exporter (grpc): only for otlpProtocol grpc",
    "opentelemetry.exporter.otlp.proto.http": "the OTLP/HTTP exporter (requests): only for otlpProtocol http",
    "gemini_split.telemetry.otel": "the OpenTelemetry SDK: only when telemetry is on",
    "gemini_split.telemetry.recorder": "telemetry's events (json, logging): only when telemetry is on",
    # Modules of ours that are heavy through what they import, each kept
    # off the paths named (a module imports one of them inside a function).
    "gemini_split.commands": "a command's runner: cli imports only the one the command line names",
    "gemini_split.userfiles.settings": "msgspec and the settings schema: not on the shell's path (a .env loads them)",
    "gemini_split.log_limits": "logging (see above): only when there is logging to do",
    "gemini_split.client.profiles": "servers.json (json): only when a profile is named",
    "gemini_split.tools.tool_host": "serve --server-tools only",
    "gemini_split.userfiles.memory_import": "a context file's @imports only when it has some",
    "gemini_split.userfiles.settings_edit": "only when a setting is saved (/model set --persist, /skills disable…)",
    "gemini_split.tools.builtin.processes": "the tools and the protocol: not on --version's path",
    "gemini_split.tools.builtin.web_guard": "httpx and httpcore: only when web_fetch runs",
    "gemini_split.tools.htmltext": "html.parser: only when a fetched page is HTML",
    "gemini_split.userfiles.custom_commands": "-p /command: only when the prompt starts with one (dataclasses, shlex)",
    "gemini_split.ui.command_expansion": "custom commands' !{} and @{} (dataclasses, shlex): only when one runs",
    "gemini_split.ui.references": "@path in a prompt (dataclasses): only when the prompt has one",
    "gemini_split.ui.repl.slash_commands": "the REPL's commands (prompt-toolkit, rich): -p only for a custom command",
    "gemini_split.ui.repl.commands.conversation": "/chat (json)",
    "gemini_split.ui.repl.commands.skills": "/skills (rich)",
    "gemini_split.ui.repl.shell_passthrough": "!command (rich)",
    "gemini_split.ui.repl.commands.restore": "/restore (the checkpoints and their git): not at the REPL's start",
    "gemini_split.ui.repl.commands.hooks": "/hooks (the hooks' module): not at the REPL's start",
    "gemini_split.ui.repl.commands.extensions": "/extensions (the extensions' module): not at the REPL's start",
    "gemini_split.ui.repl.commands.trust": "/permissions trust: not at the REPL's start",
    "gemini_split.ui.repl.commands.theme": "/theme (settings_edit): not at the REPL's start",
    "gemini_split.ui.repl.commands.shells": "/shells: not at the REPL's start",
    "gemini_split.ui.repl.commands.mcp": "/mcp and MCP prompts: only when MCP servers are configured",
    "gemini_split.userfiles.mcp_enablement": "mcp-server-enablement.json: only when MCP servers are configured",
    "gemini_split.tools.mcp.resources": "MCP resources: only when MCP servers are configured",
    "gemini_split.ui.repl.commands.resume": "/resume's session browser: not at the REPL's start",
    "gemini_split.ui.repl.commands.about": "/about, /bug and /docs (resource, platform): not at the REPL's start",
    "gemini_split.shell_split": "the bash splitter (dataclasses, shlex): only when a shell command is checked",
    "gemini_split.server.model.gemini": "google-genai: not for -m scripted",
    "gemini_split.server.model.scripted": "-m scripted only (json)",
    "gemini_split.server.replicas": "serve --store redis:// only (json, secrets)",
    "gemini_split_websocket.client": "the WebSocket stack: the plugin's package is read to find the transport",
    "gemini_split_websocket.server": "the WebSocket stack",
    "gemini_split_grpc.client": "the gRPC stack: the plugin's package is read to find the transport",
    "gemini_split_grpc.server": "the gRPC stack",
    "mcp_types": "the MCP SDK's types",
    "anyio": "the MCP SDK's streams: only when an MCP server starts (tools from the cache need none)",
    "yaml": "PyYAML (~18 ms): only for a frontmatter beyond plain key: value lines (gemini_split.plain_yaml)",
    "re2": "google-re2: only when a policy or a tool compiles a pattern",
    "jsonschema": "only when an MCP tool's arguments are checked",
    "dotenv": "python-dotenv: only when a .env file exists",
    "difflib": "a close-match suggestion or an edit's diff only, never on -p",
    "sysconfig": "only where ripgrep is looked for",
    "cryptography": "gemini_split.testing only",
    "gemini_split.sdk": "the Python SDK: `import gemini_split` lends its names, loaded on first use",
}

#: Imports inside a function that break a real import cycle: (importing
#: module, imported module) → the cycle. Prefer removing the cycle by moving
#: code down; what is here could not be, yet.
CYCLES = {
    ("gemini_split.userfiles.settings", "gemini_split.userfiles.folder_trust"):
        "folder_trust reads trust rules and the size limit from settings; settings names what an untrusted folder ignores",
    ("gemini_split.server.store", "gemini_split.server.store.memory"):
        "each store implements the contract its package defines",
    ("gemini_split.server.store", "gemini_split.server.store.sqlite"):
        "each store implements the contract its package defines",
    ("gemini_split.server.store", "gemini_split.server.store.redis"):
        "each store implements the contract its package defines (and coredis only for redis://)",
}

#: Never imported by ``--version``, ``--help`` and ``server list --names``
#: (the completions run it on every Tab).
SHELL_NEVER = ("trio", "gemini_split.protocol", "gemini_split.transport", "gemini_split_loopback",
               "gemini_split_websocket", "gemini_split_stdio", "google.genai", "httpx", "prompt_toolkit", "rich",
               "shtab", "opentelemetry",
               # ~3 ms: the leaves on this path say TYPE_CHECKING = False instead.
               "typing")

#: Never imported by a one-shot ``-p``, embedded or through a daemon.
ONESHOT_NEVER = ("prompt_toolkit", "rich.markdown", "gemini_split.ui.repl", "gemini_split_websocket", "wsproto",
                 "gemini_split_stdio", "gemini_split_grpc", "grpc", "mcp", "hypercorn", "opentelemetry",
                 "gemini_split.telemetry.otel", "gemini_split.sdk",
                 # git worktrees: only with -w.
                 "gemini_split.worktrees", "gemini_split.commands.enter_worktree")

#: Never imported by the REPL on its way to the first prompt: what only one
#: command needs is loaded when that command first runs.
REPL_START_NEVER = ("gemini_split.ui.repl.commands.restore", "gemini_split.client.restoring",
                    "gemini_split.tools.checkpoints")

#: Never imported by ``-p`` through the local daemon (a thin client).
THIN_ONESHOT_NEVER = ONESHOT_NEVER + (
    "google", "httpx", "httpx2", "h11", "gemini_split.server", "gemini_split_loopback", "rich",
    "importlib.metadata", "gemini_split.client.profiles",
    # Policy files are TOML: read only when there are some (the test has none).
    "tomllib",
    # Plain records are msgspec Structs: a dataclass costs ~0.4 ms to
    # create (it compiles its methods), a Struct ~0.02 ms.
    "dataclasses",
    # JSON output formats and tool results read it when they need it;
    # settings files, manifests and the rest are msgspec's (json: ~1.5 ms;
    # gemini_split.json_values).
    "json",
    # A typical user's files (tests/cli/daemon/test_oneshot_imports.py
    # writes gemini_split/testing/typical_setup.py's): a skill's plain
    # frontmatter needs no PyYAML, an extension without a .env no dotenv,
    # an MCP server whose tools are cached neither its SDK nor anyio.
    "yaml", "dotenv", "anyio", "mcp_types")
