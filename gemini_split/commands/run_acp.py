"""``gemini-split --acp``: an ACP agent on stdin/stdout, for editors (Zed…).

The editor starts this process and speaks the Agent Client Protocol to it,
one JSON-RPC message per line. Each ACP session is a native session, on the
embedded service (default) or on a ``serve`` daemon (``--server``): the
editor talks to a thin local process while the model loop may run
elsewhere. See ``docs/acp.md``.

Without an API key the agent still starts and answers ``initialize`` (an
editor starts it with a trimmed environment): it advertises gemini-cli's
``gemini-api-key`` authentication method, ``session/new`` fails with
ACP's auth-required error (-32000) saying what is missing, and
``authenticate`` with ``_meta: {"api-key": KEY}`` opens the model with that
key (never logged, never in a tool's environment).

Nothing but protocol reaches stdout (the stdio transport moves stray output
to stderr); logs go to ``--log-file`` (default ``gemini-acp.log`` in the
state directory), rotated at 2 MB to ``.old``.
"""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from gemini_split.acp.agent import AcpAgent
from gemini_split.acp.jsonrpc import DEFAULT_MAX_MESSAGE_SIZE
from gemini_split.acp.peer import RpcPeer
from gemini_split.app import (
    attach_context,
    client_telemetry,
    embedded_service,
    embedded_service_for,
    hold_embedded,
    resolve_client_settings,
)
from gemini_split.client.connect import ClientSettings
from gemini_split.commands.options_from_args import client_options
from gemini_split.environment import Environment
from gemini_split.errors import MissingApiKey
from gemini_split.exit_status import ExitStatus
from gemini_split.log_limits import limit_log_handler
from gemini_split.options import ClientOptions
from gemini_split.transport import ServeOptions, get_transport

if TYPE_CHECKING:
    from gemini_split.server.service import AgentService

#: The log is rotated to ``.old`` beyond this many bytes (seed 003).
LOG_MAX_BYTES = 2 * 1024 * 1024
LOG_NAME = "gemini-acp.log"
#: What ``session/new`` says (with ACP's auth-required code) until the
#: editor authenticates, when the agent started without a key.
MISSING_KEY = ("Gemini API key is missing: set GEMINI_API_KEY (or GOOGLE_API_KEY) in this agent's environment "
               "(the editor's settings for it, e.g. Zed's agent_servers \"env\"), or authenticate with method "
               "'gemini-api-key' and _meta {\"api-key\": KEY}. Get a key at https://aistudio.google.com/apikey")


class _PrivateLogHandler(logging.handlers.RotatingFileHandler):
    """A rotating log whose files are created 0600 whatever the umask (a
    log names sessions and users)."""

    def _open(self):  # type: ignore[no-untyped-def]
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        info = os.fstat(fd)
        if info.st_uid == os.geteuid() and info.st_mode & 0o077:  # left readable by an earlier version
            os.fchmod(fd, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


def open_log(path: Path, *, level: int = logging.INFO) -> Callable[[], None]:
    """Log to ``path``, rotated to ``path.old`` at start when it is over
    2 MB and whenever it grows past that while running (the standard
    ``RotatingFileHandler``, one backup). Returns the function that stops.
    Messages are bounded one-liners (``log_limits``); nothing here logs a
    token or a file's content."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    handler = _PrivateLogHandler(path, maxBytes=LOG_MAX_BYTES, backupCount=1,
                                                   encoding="utf-8", delay=False)
    handler.namer = lambda name: name[:-2] + ".old" if name.endswith(".1") else name
    if path.exists() and path.stat().st_size >= LOG_MAX_BYTES:
        handler.doRollover()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    limit_log_handler(handler)
    root = logging.getLogger()
    saved = root.level
    root.addHandler(handler)
    root.setLevel(min(level, saved) if saved else level)
    for noisy in ("httpx", "httpcore", "mcp"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    def stop() -> None:
        root.removeHandler(handler)
        root.setLevel(saved)
        handler.close()

    return stop


def log_path(args: argparse.Namespace, env: Environment) -> Path:
    given = getattr(args, "log_file", None)
    if given:
        path = Path(given).expanduser()
        return path if path.is_absolute() else env.cwd / path
    return env.config_dir / LOG_NAME


def run_acp(args: argparse.Namespace, env: Environment) -> ExitStatus:
    stop = open_log(log_path(args, env), level=logging.DEBUG if args.debug else logging.INFO)
    try:
        options = client_options(args)
        settings = resolve_client_settings(options, env, interactive=True)
        missing = None
        try:
            embedded = embedded_service_for(options, env, settings)
        except MissingApiKey:
            # The editor is told at session/new (it never shows our stderr).
            embedded, missing = None, MISSING_KEY
            logging.getLogger(__name__).warning("no Gemini API key: waiting for the editor to authenticate")
            env.warn("gemini-split: no Gemini API key (GEMINI_API_KEY): the editor is told at session/new "
                     "and may authenticate with one")
        login = _key_login(options, env, settings) if settings.endpoint.server is None else None
        with client_telemetry(settings, env, interactive=True, debug=bool(args.debug)):
            return trio.run(_serve_stdio, settings, embedded, env, login, missing)
    finally:
        stop()


def _key_login(options: ClientOptions, env: Environment,
               settings: ClientSettings) -> Callable[[str], AbstractAsyncContextManager[str]]:
    """How ``authenticate`` serves an embedded service with the editor's
    key: the key joins this command's environment for the model only (the
    process's environment, which tools start from, never has it)."""

    @asynccontextmanager
    async def serve_with_key(api_key: str) -> AsyncIterator[str]:
        keyed = Environment(stdin=env.stdin, stdout=env.stderr, stderr=env.stderr, cwd=env.cwd,
                            environ={**env.environ, "GEMINI_API_KEY": api_key})
        service = embedded_service(options, keyed, settings.loaded_settings)
        async with hold_embedded(settings, service) as held:
            assert held.endpoint.embedded_address is not None
            yield held.endpoint.embedded_address

    return serve_with_key


def settings_for_cwd(base: ClientSettings, env: Environment) -> Callable[[Path], ClientSettings]:
    """A session's settings: the base with the editor's ``cwd`` as the
    workspace, and that folder's context files (``GEMINI.md``…)."""

    def for_cwd(cwd: Path) -> ClientSettings:
        settings = base.with_tools(workspace=cwd.resolve())
        attach_context(settings, Environment(stdin=env.stdin, stdout=env.stderr, stderr=env.stderr,
                                             environ=env.environ, cwd=cwd), interactive=True)
        return settings

    return for_cwd


async def _serve_stdio(settings: ClientSettings, embedded: AgentService | None, env: Environment,
                       login: Callable[[str], AbstractAsyncContextManager[str]] | None,
                       missing_key: str | None) -> ExitStatus:

    transport = get_transport("stdio:-")
    async with hold_embedded(settings, embedded) as settings, trio.open_nursery() as nursery:
        agent = AcpAgent(settings, model=settings.session.model if settings.endpoint.server else None,
                         settings_for_cwd=settings_for_cwd(settings, env), login=login, missing_key=missing_key)
        await nursery.start(agent.run)

        async def handler(stream) -> None:
            await agent.serve_peer(RpcPeer(stream, agent.handle))

        await transport.serve("stdio:-", handler, ServeOptions(max_message_size=DEFAULT_MAX_MESSAGE_SIZE))
        nursery.cancel_scope.cancel()
    return ExitStatus.SUCCESS
