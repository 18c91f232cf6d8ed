"""MCP servers as tool sources: start them, list their tools, call them.

:func:`open_mcp_servers` starts every configured server at once (each in a
task of its own, each under a start timeout), waits until each is ready or
has failed, and yields an :class:`McpServers` whose :meth:`~McpServers.tools`
join the local tool registry.

With a cache directory (:mod:`.cache`), a server whose tools were listed
before (same configuration, same files) is not started at all: its tools
are declared from the cache, and the server is started when the model first
calls one of them (or :meth:`McpServers.start_all` asks, for ``/mcp`` and
``gemini-split mcp list``). A server that then fails to start fails that
call with a tool error saying why, and its entry is dropped. A server that cannot start, prints garbage,
exits, or dies later is reported by name in its :class:`ServerStatus` and
the others go on. On exit every server is stopped; a stdio server's whole
process group is ended (:mod:`.stdio`: stdin closed, SIGTERM, SIGKILL).

Servers are configured as gemini-cli's ``mcpServers`` entries
(:class:`gemini_split.userfiles.settings.MCPServerSettings`): ``command``/``args``/
``env``/``cwd`` for stdio, ``httpUrl`` (or ``url`` with ``type: "http"``) for
streamable HTTP, ``url`` for SSE, with ``headers``, ``timeout`` (ms, default
10 minutes), ``trust``,
``includeTools``/``excludeTools``.

Resource handling: a stdio server is given only a minimal environment (the
SDK's: ``HOME``, ``PATH``, ``USER``, …) plus its configured ``env``, never the
user's API keys or tokens; its stderr goes to a temporary file whose tail
explains a failure.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
from collections.abc import AsyncIterator, Collection, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from gemini_split import __version__
from gemini_split.tools.base import Tool, ToolFailed

from . import cache
from .results import content_to_text
from .stdio import open_stdio_transport
from .tool import McpTool

if TYPE_CHECKING:
    from gemini_split.userfiles.settings import MCPServerSettings

log = logging.getLogger(__name__)

#: The longest a server may take to start and list its tools (seconds).
START_TIMEOUT = 30.0
#: gemini-cli's default request timeout for MCP calls (seconds).
DEFAULT_CALL_TIMEOUT = 600.0
_STDERR_TAIL = 600


class ServerStatus(msgspec.Struct):
    """What ``/mcp`` and ``gemini-split mcp list`` show for one server."""

    name: str
    transport: str  # stdio | http | sse
    target: str  # the command line or the URL
    state: str = "connecting"  # cached | connecting | ready | failed | stopped | disabled
    tools: list[str] = msgspec.field(default_factory=list)
    #: The server's prompts and resources (names; URIs for resources).
    prompts: list[str] = msgspec.field(default_factory=list)
    resources: list[str] = msgspec.field(default_factory=list)
    error: str | None = None
    #: Tools the server offered that cannot be used, and why.
    skipped: list[str] = msgspec.field(default_factory=list)

    def summary(self) -> str:
        if self.state == "ready":
            return f"ready, {len(self.tools)} tool{'s' if len(self.tools) != 1 else ''}"
        if self.state == "failed":
            return f"failed: {self.error}"
        if self.state == "cached":
            return f"not started, {len(self.tools)} tool{'s' if len(self.tools) != 1 else ''} (cached)"
        if self.state == "disabled":
            return "disabled"
        return self.state


class McpServer:
    """One configured server and, once started, its connection."""

    def __init__(self, name: str, config: MCPServerSettings, *, cwd: Path, start_timeout: float = START_TIMEOUT,
                 cache_dir: Path | None = None, disabled: str | None = None):
        self.name = name
        self.config = config
        self.cwd = cwd
        self.trusted = bool(config.trust)
        timeout_ms = config.timeout if config.timeout and config.timeout > 0 else DEFAULT_CALL_TIMEOUT * 1000
        self.call_timeout = timeout_ms / 1000
        self.start_timeout = start_timeout
        transport, target = _transport_of(config)
        self.status = ServerStatus(name, transport, target)
        self.tools: list[McpTool] = []
        self.prompts: list[cache.CachedPrompt] = []
        self.resources: list[cache.CachedResource] = []
        #: Why the server is not started: "file" (``mcp disable``), "session"
        #: (``/mcp disable --session``), or None (enabled).
        self.disabled = disabled
        #: Set when the tools are known: from the cache, or once the server
        #: is ready or has failed.
        self.ready = trio.Event()
        #: Set once a start has ended (ready or failed).
        self.started = trio.Event()
        #: Starts :meth:`serve` in the servers' nursery (set by :func:`open_mcp_servers`).
        self.launch: Any = None
        self.launched = False
        self._client: Any = None
        #: The connection's OAuth (:func:`.oauth.auth_for`), for a refusal's message.
        self._auth: Any = None
        #: Cancels a start still under way when the servers are closed or
        #: the server is stopped (:meth:`stop`).
        self._starting = trio.CancelScope()
        #: Ends this server's connection (:meth:`stop`); set for all on close.
        self._stop = trio.Event()
        #: Set once :meth:`serve` has returned.
        self._done = trio.Event()
        self._cache_dir = cache_dir
        self._cache_key: str | None = None
        if cache_dir is not None:
            self._cache_key = cache.cache_key(config, transport, self.server_cwd)
            cached = cache.load(cache_dir, self._cache_key)
            if cached is not None and disabled is None:
                self._declare(cached)
                self.status.state = "cached"
                self.ready.set()
        if disabled is not None:
            self.status.state = "disabled"
            self.ready.set()
            self.started.set()

    @property
    def server_cwd(self) -> Path:
        """Where a stdio server runs: its ``cwd`` (relative to the workspace) or the workspace."""
        if not self.config.cwd:
            return self.cwd
        cwd = Path(os.path.expanduser(self.config.cwd))
        return cwd if cwd.is_absolute() else self.cwd / cwd

    # --- lifetime ------------------------------------------------------------

    async def start(self) -> None:
        """Start the server if nobody has, and wait until it is ready or has
        failed (see :attr:`status`). A disabled server is not started."""
        if self.disabled is not None:
            return
        if not self.launched:
            if self.launch is None:
                raise RuntimeError(f"MCP server {self.name} is not open")
            self.launch(self)
        await self.started.wait()

    async def stop(self) -> None:
        """End the connection (a stdio server's process with it) and wait
        until it is over; the server may be started again (:meth:`restart`)."""
        if self.launched:
            self._stop.set()
            if not self.started.is_set():
                self._starting.cancel()
            await self._done.wait()
        self.launched = False
        self.ready = trio.Event()
        self.started = trio.Event()
        self._stop = trio.Event()
        self._done = trio.Event()
        self._starting = trio.CancelScope()
        self.tools, self.prompts, self.resources = [], [], []
        self.status.tools, self.status.prompts, self.status.resources = [], [], []
        self.status.state = "stopped"

    async def restart(self) -> None:
        """Stop the server and start it again (``/mcp reload``); a disabled
        one stays stopped. Waits until it is ready or has failed."""
        await self.stop()
        if self.disabled is not None:
            self.status.state = "disabled"
            self.ready.set()
            self.started.set()
            return
        await self.start()

    async def set_disabled(self, how: str | None) -> None:
        """Disable the server ("file" or "session": stopped, its tools gone)
        or, with None, enable and start it again."""
        self.disabled = how
        await self.restart()

    async def serve(self, stop: trio.Event) -> None:
        """Connect, list the tools, then hold the connection until ``stop``
        (or :meth:`stop`). Never raises for the server's failures: they land
        in :attr:`status`."""
        self.launched = True
        self.status.state = "connecting"
        self.status.error = None
        errlog = tempfile.TemporaryFile()  # the server writes to its fd directly
        try:
            with self._starting:
                await self._serve(stop, errlog)
            if self.status.state == "ready":
                self.status.state = "stopped"
        except BaseException as exc:  # noqa: BLE001 - sorted below
            if not _has_real_error(exc):
                raise
            self._fail(_explain(exc), errlog)
        finally:
            self._client = None
            self.ready.set()
            self.started.set()
            self._done.set()
            errlog.close()

    async def _serve(self, stop: trio.Event, errlog: Any) -> None:
        # The SDK only when a server is configured, and loaded off the event
        # loop (see _load_sdk).
        await trio.to_thread.run_sync(_load_sdk, self.status.transport)
        from mcp import Client

        with trio.CancelScope(deadline=trio.current_time() + self.start_timeout) as starting:
            async with Client(self._open_transport(errlog), client_info=_client_info()) as client:
                listed = await _list_all_tools(client)
                found = cache.Listing(
                    [cache.CachedTool(t.name, t.description or "", getattr(t, "input_schema", None),
                                      _schema_problem(getattr(t, "input_schema", None)), _destructive(t))
                     for t in listed],
                    await _list_prompts(client), await _list_resources(client))
                starting.deadline = math.inf
                if self._cache_dir is not None and self._cache_key is not None:
                    cache.store(self._cache_dir, self._cache_key, found)
                self._declare(found)
                self.status.state = "ready"
                self._client = client
                self.ready.set()
                self.started.set()
                async with trio.open_nursery() as holding:  # until the servers close, or this one stops
                    async def until(event: trio.Event) -> None:
                        await event.wait()
                        holding.cancel_scope.cancel()

                    holding.start_soon(until, stop)
                    holding.start_soon(until, self._stop)
        if starting.cancelled_caught and self.status.state == "connecting":
            self._fail(f"did not start within {self.start_timeout:g} s", errlog)

    def _open_transport(self, errlog: Any) -> Any:
        config = self.config
        kind = self.status.transport
        if kind == "stdio":
            return open_stdio_transport(config.command or "", list(config.args), env=dict(config.env),
                                        cwd=self.server_cwd, errlog=errlog)
        from mcp.shared._httpx_utils import create_mcp_http_client

        from .oauth import auth_for  # a remote server's edge (see lazy_imports)

        url = self.status.target
        headers = dict(config.headers) or None
        auth = self._auth = auth_for(self.name, config)  # OAuth 2.1 (gemini-cli's token file), or None
        if kind == "sse":
            from mcp.client.sse import sse_client

            return sse_client(url, headers=headers, auth=auth)
        from mcp.client.streamable_http import streamable_http_client

        return streamable_http_client(url, http_client=create_mcp_http_client(headers=headers, auth=auth))

    def _declare(self, listing: cache.Listing) -> None:
        """Make :attr:`tools` (and the status's names) from what the server
        listed, keeping what ``includeTools``/``excludeTools`` select, and
        its prompts and resources."""
        listed = listing.tools
        self.prompts = list(listing.prompts)
        self.resources = list(listing.resources)
        self.status.prompts = [p.name for p in self.prompts]
        self.status.resources = [r.uri for r in self.resources]
        include = self.config.include_tools
        exclude = set(self.config.exclude_tools or ())
        tools = []
        skipped = []
        for remote in listed:
            if remote.name in exclude or (include is not None and remote.name not in include):
                continue
            if remote.problem:
                skipped.append(f"{remote.name}: its input schema is invalid ({remote.problem})")
                continue
            tools.append(McpTool(self, remote.name, remote.description, remote.input_schema,
                                 destructive=remote.destructive))
        self.tools = tools
        self.status.tools = [t.name for t in tools]
        self.status.skipped = skipped

    def _fail(self, why: str, errlog: Any) -> None:
        tail = _tail(errlog)
        self.status.state = "failed"
        self.status.error = why + (f" — its stderr ends: {tail}" if tail else "")
        self.status.tools, self.status.prompts, self.status.resources = [], [], []
        self.tools, self.prompts, self.resources = [], [], []
        log.info("MCP server %s failed: %s", self.name, self.status.error)
        if self._cache_dir is not None and self._cache_key is not None:
            cache.forget(self._cache_dir, self._cache_key)

    # --- calls ------------------------------------------------------------------

    async def _connected(self) -> Any:
        """The live connection, starting a server declared from the cache;
        :class:`ToolFailed` when there is none."""
        if self._client is None and not self.started.is_set():
            await self.start()
        client = self._client
        if client is None:
            if self.status.state == "failed":
                raise ToolFailed("unavailable", f"the MCP server '{self.name}' could not be started: "
                                 f"{self.status.error}", "do not retry this tool")
            raise ToolFailed("unavailable", f"the MCP server '{self.name}' is not running ({self.status.summary()})",
                             "do not retry this tool")
        return client

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> Any:
        """``prompts/get``: the SDK's ``GetPromptResult``; :class:`ToolFailed`
        when the server is not running, fails or does not answer in time."""
        client = await self._connected()
        with trio.move_on_after(self.call_timeout):
            try:
                return await client.get_prompt(name, arguments)
            except Exception as exc:  # the SDK's errors, the connection's
                raise ToolFailed("mcp_error", _explain(exc)) from None
        raise ToolFailed("timeout", f"the MCP server '{self.name}' did not answer within {self.call_timeout:g} s")

    async def read_resource(self, uri: str) -> list[Any]:
        """``resources/read``: the contents (``TextResourceContents`` /
        ``BlobResourceContents``); :class:`ToolFailed` as :meth:`get_prompt`."""
        client = await self._connected()
        with trio.move_on_after(self.call_timeout):
            try:
                return list((await client.read_resource(uri)).contents or ())
            except Exception as exc:  # the SDK's errors, the connection's
                raise ToolFailed("mcp_error", _explain(exc)) from None
        raise ToolFailed("timeout", f"the MCP server '{self.name}' did not answer within {self.call_timeout:g} s")

    async def call(self, tool: str, args: dict[str, Any]) -> str:
        """Call ``tool`` with ``args``; the model's text, or :class:`ToolFailed`.
        A server declared from the cache is started first."""
        client = await self._connected()
        result = None
        with trio.move_on_after(self.call_timeout):
            try:
                result = await client.call_tool(tool, args)
            except Exception as exc:  # the SDK's errors, the connection's
                refused = getattr(self._auth, "refused", None)
                if refused is not None:
                    raise ToolFailed("unauthorized", str(refused), "do not retry this tool") from None
                raise ToolFailed("mcp_error", f"the MCP server '{self.name}' failed on {tool}: {_explain(exc)}") from None
        if result is None:
            raise ToolFailed("timeout", f"the MCP server '{self.name}' did not answer {tool} within {self.call_timeout:g} s",
                             "the server may be stuck; try something else")
        content = list(result.content or ())
        text = content_to_text(content, tool)
        if not text and getattr(result, "structured_content", None) is not None:
            import json

            text = json.dumps(result.structured_content, ensure_ascii=False)[:200_000]
        if result.is_error:
            raise ToolFailed("tool_error", text or f"{tool} reported an error", None)
        return text


class McpServers:
    """The started servers, in configuration order."""

    def __init__(self, servers: list[McpServer]):
        self.servers = servers
        #: Where ``mcp-server-enablement.json`` is, for ``/mcp enable|disable``
        #: (set by whoever opened the servers; None: not recorded).
        self.enablement_dir: Path | None = None
        #: Names disabled for this session only (``/mcp disable NAME --session``).
        self.session_disabled: set[str] = set()

    async def wait_started(self) -> None:
        """Until every server's tools are known: from the cache, or the
        server ready or failed (each within its start timeout)."""
        for server in self.servers:
            await server.ready.wait()

    async def start_all(self) -> None:
        """Start every server not started yet (those declared from the
        cache) and wait until each is ready or has failed: live status."""
        async with trio.open_nursery() as nursery:
            for server in self.servers:
                nursery.start_soon(server.start)

    @property
    def started(self) -> bool:
        return all(server.ready.is_set() for server in self.servers)

    def failures(self) -> list[str]:
        """One line per server that failed, for the user."""
        return [s.status.error if (s.status.error or "").startswith(f"MCP server '{s.name}' ")  # says it all
                else f"MCP server '{s.name}' failed: {s.status.error}"
                for s in self.servers if s.status.state == "failed"]

    def statuses(self) -> list[ServerStatus]:
        return [s.status for s in self.servers]

    def get(self, name: str) -> McpServer | None:
        """The server called ``name`` (gemini-cli compares names in lower case)."""
        wanted = name.strip().lower()
        return next((s for s in self.servers if s.name.lower() == wanted), None)

    def resource(self, identifier: str) -> tuple[McpServer, cache.CachedResource] | None:
        """The resource ``identifier`` names, as gemini-cli finds it:
        ``server:uri`` first, then a bare URI any server lists."""
        server_name, sep, uri = identifier.partition(":")
        if sep and server_name:
            server = self.get(server_name)
            if server is not None and server.disabled is None:
                for found in server.resources:
                    if found.uri == uri:
                        return server, found
        for server in self.servers:
            if server.disabled is None:
                for found in server.resources:
                    if found.uri == identifier:
                        return server, found
        return None

    def offered_tools(self) -> list[Tool]:
        """:meth:`tools`, and gemini-cli's resource tools when a server lists
        resources (:func:`.resources.resource_tools`)."""
        from .resources import resource_tools

        return [*self.tools(), *resource_tools(self)]

    def sync_registry(self, registry: Any, exclude: Collection[str] = ()) -> None:
        """Make ``registry`` (a ``ToolRegistry``) hold exactly these servers'
        tools now, and the resource tools while a server lists resources:
        those of a server disabled or reloaded leave, new ones join. The
        caller announces the tools again."""
        from .resources import LIST_MCP_RESOURCES, READ_MCP_RESOURCE

        offered = {t.name: t for t in self.offered_tools() if t.name not in exclude}
        for tool in list(registry):
            ours = isinstance(tool, McpTool) and tool.server in self.servers
            if (ours or tool.name in (LIST_MCP_RESOURCES, READ_MCP_RESOURCE)) and offered.get(tool.name) is not tool:
                registry.unregister(tool.name)
        for name, tool in offered.items():
            if registry.get(name) is None:
                registry.register(tool)

    def tools(self) -> list[McpTool]:
        """Every ready server's tools; a name two servers share goes to the
        later one (gemini-cli's rule), and the earlier one's status says so."""
        by_name: dict[str, McpTool] = {}
        for server in self.servers:
            for tool in server.tools:
                previous = by_name.get(tool.name)
                if previous is not None:
                    log.warning("MCP tool %s of %s replaces the one of %s", tool.name, server.name, previous.server.name)
                by_name[tool.name] = tool
        return list(by_name.values())


@asynccontextmanager
async def open_mcp_servers(
    configs: Mapping[str, MCPServerSettings],
    *,
    cwd: Path,
    allowed: Collection[str] | None = None,
    excluded: Collection[str] = (),
    disabled: Mapping[str, str] | None = None,
    start_timeout: float = START_TIMEOUT,
    wait: bool = True,
    cache_dir: Path | None = None,
) -> AsyncIterator[McpServers]:
    """Start the servers of ``configs`` in parallel and wait for each to be
    ready or failed (at most its start timeout). ``allowed`` (gemini-cli's
    ``--allowed-mcp-server-names`` / ``mcp.allowed``), when given, keeps only
    those names; ``excluded`` (``mcp.excluded``) drops names. A server not
    ready within ``start_timeout`` seconds is stopped and reported failed.
    With ``wait=False`` it yields at once, the servers still starting
    (:meth:`McpServers.wait_started` waits for them).

    With ``cache_dir``, servers whose tools are cached there are not started
    (see the module's docstring) and the others' listings are stored.
    ``disabled`` (lower-cased name → "file" or "session", see
    :mod:`gemini_split.userfiles.mcp_enablement`) are listed but not started."""
    off = disabled or {}
    servers = [
        McpServer(name, config, cwd=cwd, start_timeout=start_timeout, cache_dir=cache_dir,
                  disabled=off.get(name.strip().lower()))
        for name, config in configs.items()
        if (allowed is None or name in allowed) and name not in excluded
    ]
    if not servers:
        yield McpServers([])
        return
    stop = trio.Event()
    async with trio.open_nursery() as nursery:

        def launch(server: McpServer) -> None:
            if not server.launched:
                server.launched = True
                nursery.start_soon(server.serve, stop, name=f"mcp:{server.name}")

        for server in servers:
            server.launch = launch
            if server.status.state not in ("cached", "disabled"):
                launch(server)
        try:
            started = McpServers(servers)
            if wait:
                await started.wait_started()
            yield started
        finally:
            stop.set()
            for server in servers:
                server._stop.set()
            for server in servers:  # one still starting would hold the exit up to its start timeout
                if server.launched and not server.started.is_set():
                    server._starting.cancel()


def _load_sdk(transport: str) -> None:
    """Import the MCP SDK modules that starting a ``transport`` server
    needs (stdio | http | sse). Called in a worker thread: the SDK takes
    about a second of CPU to import, many times that on a loaded machine,
    and on the event loop that import would hold up everything else the
    process does meanwhile — such as sending the hello to a ``--server
    stdio:…`` server, which gives up after its hello timeout (10 s) and
    exits. A thread importing a module other threads then import is safe:
    they wait for it on the module's import lock."""
    import jsonschema  # noqa: F401 - checks the listed tools' schemas (_schema_problem)
    import mcp  # noqa: F401

    if transport == "stdio":
        import mcp.client.stdio  # noqa: F401
        return
    import httpx2  # noqa: F401 - .oauth's
    import mcp.client.auth  # noqa: F401
    import mcp.client.sse  # noqa: F401
    import mcp.client.streamable_http  # noqa: F401
    import mcp.shared._httpx_utils  # noqa: F401

    from .oauth import auth_for  # noqa: F401 - a remote server's edge (see lazy_imports)


def _transport_of(config: MCPServerSettings) -> tuple[str, str]:
    """``(transport, target)`` as gemini-cli chooses: ``httpUrl`` → http,
    ``url`` → sse (or http with ``type: "http"``), ``command`` → stdio."""
    if config.http_url:
        return "http", config.http_url
    if config.url:
        return ("http" if config.type == "http" else "sse"), config.url
    if config.command:
        return "stdio", " ".join([config.command, *config.args])
    return "stdio", ""


def _client_info() -> Any:
    from mcp import Implementation

    return Implementation(name="gemini-split", version=__version__)


async def _list_all_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    for _ in range(100):  # a server that pages forever is cut off
        if cursor is None:
            page = await client.list_tools()
        else:
            from mcp.types import PaginatedRequestParams

            page = await client.list_tools(params=PaginatedRequestParams(cursor=cursor))
        tools.extend(page.tools)
        cursor = getattr(page, "next_cursor", None)
        if not cursor:
            break
    return tools


async def _list_prompts(client: Any) -> list[cache.CachedPrompt]:
    """The server's prompts (``prompts/list``), when it declares any."""
    capabilities = getattr(client, "server_capabilities", None)
    if capabilities is None or getattr(capabilities, "prompts", None) is None:
        return []
    try:
        listed = (await client.list_prompts()).prompts
    except Exception as exc:  # a server that declares prompts and fails to list them keeps its tools
        log.info("MCP prompts/list failed: %s", _explain(exc))
        return []
    return [cache.CachedPrompt(p.name, p.description or "", [
        {"name": a.name, "description": a.description or "", "required": bool(a.required)}
        for a in (p.arguments or ())]) for p in listed]


async def _list_resources(client: Any) -> list[cache.CachedResource]:
    """The server's resources (``resources/list``), when it declares any."""
    capabilities = getattr(client, "server_capabilities", None)
    if capabilities is None or getattr(capabilities, "resources", None) is None:
        return []
    try:
        listed = (await client.list_resources()).resources
    except Exception as exc:
        log.info("MCP resources/list failed: %s", _explain(exc))
        return []
    return [cache.CachedResource(str(r.uri), r.name or "", r.description or "", r.mime_type) for r in listed]


def _schema_problem(schema: Any) -> str | None:
    if schema is None:
        return None
    if not isinstance(schema, dict):
        return "not an object"
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        return exc.message[:200]
    return None


def _has_real_error(exc: BaseException) -> bool:
    """Whether ``exc`` (or a group of them) holds an ``Exception`` that is not
    a cancellation — the server's failure rather than our shutdown."""
    if isinstance(exc, BaseExceptionGroup):
        return any(_has_real_error(e) for e in exc.exceptions)
    return isinstance(exc, Exception)


def _explain(exc: BaseException) -> str:
    """One line for a user: the innermost real error's type and message."""
    while isinstance(exc, BaseExceptionGroup):
        real = [e for e in exc.exceptions if _has_real_error(e)]
        exc = real[0] if real else exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    if name == "AuthorizationRequired":  # .oauth's (not imported for a stdio server): gemini-cli's message
        return text
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or text}"
    if name in ("ClosedResourceError", "BrokenResourceError", "EndOfStream") or "Connection closed" in text:
        return "the server closed the connection (did it exit?)"
    return f"{name}: {text}"[:300] if text else name


def _tail(errlog: Any) -> str:
    try:
        size = errlog.seek(0, os.SEEK_END)
        errlog.seek(max(0, size - _STDERR_TAIL * 4))
        text = errlog.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return ""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    tail = " | ".join(lines[-3:])
    return tail[-_STDERR_TAIL:]


def _destructive(tool: Any) -> bool:
    """Whether the server declares the tool destructive (its annotations'
    ``destructiveHint: true``, and not ``readOnlyHint``): a checkpoint is
    taken before it runs (:mod:`gemini_split.tools.checkpoints`). The
    MCP default (true when unset) is not taken as a declaration."""
    annotations = getattr(tool, "annotations", None)
    if annotations is None:
        return False
    destructive = getattr(annotations, "destructive_hint", getattr(annotations, "destructiveHint", None))
    read_only = getattr(annotations, "read_only_hint", getattr(annotations, "readOnlyHint", None))
    return destructive is True and not read_only
