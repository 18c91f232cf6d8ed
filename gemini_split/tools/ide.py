"""The IDE companion: gemini-cli's editor extension, as its companion spec
(docs/ide-integration/ide-companion-spec.md) describes it.

Discovery (:func:`discover`): the companion writes
``<tmpdir>/gemini/ide/gemini-ide-server-<PID>-<PORT>.json`` (``port``,
``workspacePath``, ``authToken``, ``ideInfo``) and sets
``GEMINI_CLI_IDE_SERVER_PORT`` in its integrated terminal; a file is used
only if it is owned by this user and this directory is inside one of its
workspace paths; among several, the one whose port is the variable's
wins. With no file, ``GEMINI_CLI_IDE_SERVER_PORT`` with
``GEMINI_CLI_IDE_WORKSPACE_PATH`` and ``GEMINI_CLI_IDE_AUTH_TOKEN`` do.

The connection (:class:`IdeCompanion`) is MCP over streamable HTTP at
``http://127.0.0.1:PORT/mcp`` with ``Authorization: Bearer <authToken>``.
The companion sends ``ide/contextUpdate`` (open files, cursor,
selection), which :meth:`IdeCompanion.context_text` turns into gemini-cli's
editor-context block for the next prompt; :meth:`IdeCompanion.review`
shows an edit as a diff in the editor (``openDiff``) and waits for
``ide/diffAccepted`` (with the content the user may have changed) or
``ide/diffRejected`` / ``ide/diffClosed``. One diff is open at a time.

The MCP SDK is imported only when a companion is connected to.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import trio

log = logging.getLogger(__name__)

PORT_ENV = "GEMINI_CLI_IDE_SERVER_PORT"
WORKSPACE_ENV = "GEMINI_CLI_IDE_WORKSPACE_PATH"
TOKEN_ENV = "GEMINI_CLI_IDE_AUTH_TOKEN"
PORT_FILE = re.compile(r"^gemini-ide-server-(\d+)-\d+\.json$")
#: How long connecting may take (seconds).
CONNECT_TIMEOUT = 10.0
#: gemini-cli's limits on the context sent: files, and selected text (characters).
MAX_FILES = 10
MAX_SELECTED = 16384

# gemini-cli's words.
NOT_SUPPORTED = ("IDE integration is not supported in your current environment. To use this feature, run Gemini "
                 "CLI in one of these supported IDEs: Antigravity, VS Code, or VS Code forks.")
DISABLED = "IDE integration is currently disabled. To enable it, run /ide enable."
DISABLED_AGAIN = "IDE integration disabled. To enable it again, run /ide enable."
NO_WORKSPACE = "To use this feature, please open a workspace folder in your IDE and try again."
CLOSED = "IDE connection closed. To reconnect, run /ide enable."
COMPANION_NAME = "Gemini CLI Companion"
MARKETPLACE = "https://marketplace.visualstudio.com/items?itemName=Google.gemini-cli-vscode-ide-companion"
OPEN_VSX = "https://open-vsx.org/extension/Google/gemini-cli-vscode-ide-companion"
CONTEXT_HEAD = "Here is the user's editor context as a JSON object. This is for your information only."


def failed_to_connect(display_name: str | None) -> str:
    where = f" in {display_name}" if display_name else ""
    return (f"Failed to connect to IDE companion extension{where}. Please ensure the extension is running. "
            "To install the extension, run /ide install.")


def ide_dir() -> Path:
    """Where companions write their port files (``os.tmpdir()/gemini/ide``)."""
    return Path(tempfile.gettempdir()) / "gemini" / "ide"


@dataclass(frozen=True)
class CompanionConfig:
    """A companion found: where it listens, its token and its name."""

    port: int
    workspace_path: str
    auth_token: str | None
    display_name: str


@dataclass(frozen=True)
class Discovery:
    """What :func:`discover` found: a companion, or why none (gemini-cli's words)."""

    config: CompanionConfig | None
    problem: str = ""


def discover(cwd: Path, env: Mapping[str, str]) -> Discovery:
    """The companion this directory should talk to (see the module's doc).
    Never raises: a file that cannot be read or parsed is skipped."""
    files = _port_files()
    wanted = env.get(PORT_ENV, "")
    if files:
        valid = [c for c in files if not _workspace_problem(c.workspace_path, cwd)]
        if not valid:
            return Discovery(None, _workspace_problem(files[0].workspace_path, cwd))
        chosen = next((c for c in valid if str(c.port) == wanted), valid[0])
        return Discovery(chosen)
    if not wanted:
        return Discovery(None, NOT_SUPPORTED)
    workspace = env.get(WORKSPACE_ENV)
    problem = _workspace_problem(workspace, cwd)
    if problem:
        return Discovery(None, problem)
    try:
        port = int(wanted)
    except ValueError:
        return Discovery(None, failed_to_connect(None))
    return Discovery(CompanionConfig(port, workspace or "", env.get(TOKEN_ENV), "IDE"))


def _port_files() -> list[CompanionConfig]:
    """The port files owned by this user, the newest process's first."""
    try:
        names = [n for n in os.listdir(ide_dir()) if PORT_FILE.match(n)]
    except OSError:
        return []
    names.sort(key=lambda n: -int(PORT_FILE.match(n).group(1)))  # type: ignore[union-attr]
    found = []
    for name in names:
        path = ide_dir() / name
        try:
            if path.stat().st_uid != os.getuid():
                continue
            data = json.loads(path.read_text(encoding="utf-8"))
            info = data.get("ideInfo") or {}
            found.append(CompanionConfig(int(data["port"]), str(data.get("workspacePath", "")),
                                         data.get("authToken"), str(info.get("displayName") or "IDE")))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            log.debug("skipping IDE port file %s", name)
    return found


def _workspace_problem(workspace: str | None, cwd: Path) -> str:
    """Why ``cwd`` is not inside one of ``workspace``'s paths ("" if it is)."""
    if workspace is None:
        return failed_to_connect(None)
    if workspace == "":
        return NO_WORKSPACE
    roots = [os.path.realpath(p) for p in workspace.split(os.pathsep) if p]
    here = os.path.realpath(cwd)
    if any(here == r or here.startswith(r.rstrip(os.sep) + os.sep) for r in roots):
        return ""
    return ("Directory mismatch. Gemini CLI is running in a different location than the open workspace in the "
            f"IDE. Please run the CLI from one of the following directories: {', '.join(roots)}")


class IdeCompanion:
    """The connection to one editor's companion, kept by a front end.

    :meth:`connect` runs the connection in ``nursery`` until
    :meth:`disconnect` (or the companion goes); :attr:`status` is
    ``connected``, ``connecting`` or ``disconnected`` with
    :attr:`details` saying why."""

    def __init__(self, cwd: Path, env: Mapping[str, str]):
        self.cwd = cwd
        self.env = env
        self.status = "disconnected"
        self.details = DISABLED
        self.display_name: str | None = None
        self.context: dict[str, Any] | None = None
        self._sent_context: dict[str, Any] | None = None
        self._client: Any = None
        self._tools: set[str] = set()
        self._stop: trio.Event | None = None
        self._waiters: dict[str, tuple[trio.Event, list[Any]]] = {}
        self._diff_lock = trio.Lock()

    @property
    def connected(self) -> bool:
        return self.status == "connected" and self._client is not None

    @property
    def can_diff(self) -> bool:
        """Whether edits are reviewed in the editor (it offers openDiff and closeDiff)."""
        return self.connected and {"openDiff", "closeDiff"} <= self._tools

    async def connect(self, nursery: trio.Nursery) -> None:
        """Find the companion and connect; returns once connected or failed
        (:attr:`details` says why)."""
        if self.connected:
            return
        found = discover(self.cwd, self.env)
        if found.config is None:
            self._set("disconnected", found.problem)
            return
        self.display_name = found.config.display_name
        self._set("connecting", "")
        done = trio.Event()
        self._stop = trio.Event()
        nursery.start_soon(self._serve, found.config, self._stop, done)
        await done.wait()

    async def disconnect(self) -> None:
        """Close any open diff (rejected) and the connection."""
        for path in list(self._waiters):
            await self._close_diff(path)
            self._resolve(path, None)
        if self._stop is not None:
            self._stop.set()
        self._client = None
        self._set("disconnected", DISABLED_AGAIN)

    def _set(self, status: str, details: str) -> None:
        self.status, self.details = status, details
        if status == "disconnected":
            self.context = self._sent_context = None

    async def _serve(self, config: CompanionConfig, stop: trio.Event, done: trio.Event) -> None:
        from mcp import Client  # the SDK only when there is a companion
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        headers = {"Authorization": f"Bearer {config.auth_token}"} if config.auth_token else None
        url = f"http://127.0.0.1:{config.port}/mcp"
        transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
        try:
            with trio.CancelScope(deadline=trio.current_time() + CONNECT_TIMEOUT) as starting:
                async with Client(transport, extensions=[_notifications(self)], mode="legacy") as client:
                    listed = await client.list_tools()
                    starting.deadline = math.inf
                    self._tools = {t.name for t in listed.tools}
                    self._client = client
                    self._set("connected", "")
                    done.set()
                    await stop.wait()
            if starting.cancelled_caught:
                self._set("disconnected", failed_to_connect(config.display_name))
        except Exception as exc:  # noqa: BLE001 — any failure is a status, never a crash of the REPL
            log.info("IDE companion at port %s: %s", config.port, exc)
            if self.status == "connected":
                self._set("disconnected", CLOSED)
            else:
                self._set("disconnected", failed_to_connect(config.display_name))
        finally:
            if self._stop is stop and self.status == "connected" and not stop.is_set():
                self._set("disconnected", CLOSED)
            self._client = None
            for path in list(self._waiters):
                self._resolve(path, None)
            done.set()

    # --- context ------------------------------------------------------------------

    def _on_context(self, params: dict[str, Any]) -> None:
        self.context = params

    def open_files(self) -> list[dict[str, Any]]:
        """The open files, most recently focused first (at most :data:`MAX_FILES`)."""
        state = (self.context or {}).get("workspaceState") or {}
        files = [f for f in state.get("openFiles") or [] if isinstance(f, dict) and isinstance(f.get("path"), str)]
        files.sort(key=lambda f: -(f.get("timestamp") or 0))
        return files[:MAX_FILES]

    def context_text(self) -> str | None:
        """gemini-cli's editor-context block for the next prompt when the
        context changed since the last one sent (else None)."""
        if not self.connected or self.context is None or self.context == self._sent_context:
            return None
        self._sent_context = self.context
        files = self.open_files()
        data: dict[str, Any] = {}
        if files:
            active = files[0]
            entry: dict[str, Any] = {"path": active["path"]}
            cursor = active.get("cursor")
            if isinstance(cursor, dict):
                entry["cursor"] = {"line": cursor.get("line"), "character": cursor.get("character")}
            selected = active.get("selectedText")
            if isinstance(selected, str) and selected:
                entry["selectedText"] = selected[:MAX_SELECTED]
            data["activeFile"] = entry
            if len(files) > 1:
                data["otherOpenFiles"] = [f["path"] for f in files[1:]]
        if not data:
            return None
        return "\n".join([CONTEXT_HEAD, "```json", json.dumps(data, indent=2), "```"])

    def status_text(self) -> tuple[bool, str]:
        """``(is_error, text)``: gemini-cli's ``/ide status`` message."""
        if self.status == "connected":
            text = f"\U0001F7E2 Connected to {self.display_name}"
            files = self.open_files()
            if files:
                names = [os.path.basename(f["path"]) for f in files]
                lines = []
                for f, name in zip(files, names):
                    shown = f"{name} (/{os.path.basename(os.path.dirname(f['path']))})" if names.count(name) > 1 else name
                    lines.append(f"  - {shown}{' (active)' if f.get('isActive') else ''}")
                text += ("\n\nOpen files:\n" + "\n".join(lines) + "\n\n(Note: The file list is limited to a number "
                         "of recently accessed files within your workspace and only includes local files on disk)")
            return False, text
        if self.status == "connecting":
            return False, "\U0001F7E1 Connecting..."
        return True, "\U0001F534 Disconnected" + (f": {self.details}" if self.details else "")

    # --- diffs --------------------------------------------------------------------

    async def review(self, path: Path, new_content: str) -> str | None:
        """Show ``new_content`` for ``path`` as a diff in the editor and wait
        for the user: the content accepted (perhaps edited there), or None
        when rejected, closed, or the connection went. Raises
        :class:`RuntimeError` when the editor could not open the diff."""
        async with self._diff_lock:
            key = str(path)
            event, box = trio.Event(), []
            self._waiters[key] = (event, box)
            try:
                if self._client is None:
                    raise RuntimeError("IDE client is not connected.")
                result = await self._client.call_tool("openDiff", {"filePath": key, "newContent": new_content})
                if result.is_error:
                    raise RuntimeError(_text(result) or "Tool 'openDiff' reported an error.")
                await event.wait()
                return box[0] if box else None
            finally:
                if self._waiters.get(key, (None,))[0] is event:
                    with trio.CancelScope(shield=True):  # cancelled: the diff must not stay open
                        await self._close_diff(key)
                    del self._waiters[key]

    async def _close_diff(self, path: str) -> None:
        client = self._client
        if client is None:
            return
        try:
            with trio.move_on_after(5):
                await client.call_tool("closeDiff", {"filePath": path, "suppressNotification": True})
        except Exception as exc:  # noqa: BLE001 — closing is best effort
            log.info("closeDiff %s: %s", path, exc)

    def _resolve(self, path: str, content: str | None) -> None:
        waiter = self._waiters.pop(path, None)
        if waiter is not None:
            if content is not None:
                waiter[1].append(content)
            waiter[0].set()


def _text(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content or [])


def _notifications(companion: IdeCompanion) -> Any:
    """The MCP client extension that hears the companion's notifications."""
    from mcp.client.extension import ClientExtension, NotificationBinding
    from pydantic import BaseModel, ConfigDict

    class Params(BaseModel):
        model_config = ConfigDict(extra="allow")

    def fields(params: Any) -> dict[str, Any]:
        return params.model_dump()

    async def context(params: Any) -> None:
        companion._on_context(fields(params))

    async def accepted(params: Any) -> None:
        data = fields(params)
        if isinstance(data.get("filePath"), str) and isinstance(data.get("content"), str):
            companion._resolve(data["filePath"], data["content"])

    async def rejected(params: Any) -> None:
        data = fields(params)
        if isinstance(data.get("filePath"), str):
            companion._resolve(data["filePath"], None)

    class IdeNotifications(ClientExtension):
        identifier = "com.google/gemini-cli-ide"

        def notifications(self) -> list[Any]:
            return [NotificationBinding(method="ide/contextUpdate", params_type=Params, handler=context),
                    NotificationBinding(method="ide/diffAccepted", params_type=Params, handler=accepted),
                    NotificationBinding(method="ide/diffRejected", params_type=Params, handler=rejected),
                    NotificationBinding(method="ide/diffClosed", params_type=Params, handler=rejected)]

    return IdeNotifications()
