"""``gemini-split serve``: the agent loop as a daemon (WebSocket) or on a
pipe (``--stdio``).

Safe by default: binds to loopback; refuses a non-loopback address without
``--auth-config`` unless ``--insecure-no-auth`` says so explicitly. SIGINT
and SIGTERM shut down gracefully: running turns are cancelled, clients get a
close with a reason, and the process exits 0.
"""

from __future__ import annotations

import argparse
import functools
import logging
import signal
import time
from pathlib import Path
from typing import Any

import msgspec
import trio

from gemini_split._trio_util import single_exceptions
from gemini_split.app import open_model, server_telemetry, server_tools_from
from gemini_split.tools.approval_mode import parse_approval_mode
from gemini_split.client.face_client import face_agents, open_face_client
from gemini_split.collector import bursting, settle_for_serving
from gemini_split.commands.options_from_args import server_tools_options
from gemini_split.dns_cache import CachingResolver
from gemini_split.environment import Environment
from gemini_split.errors import ConfigurationError, MissingApiKey
from gemini_split.exit_status import ExitStatus
from gemini_split.server.auth import load_auth_config
from gemini_split.server.config import DEFAULT_MODEL, ServerConfig
from gemini_split.server.model.callers import SERVER_HAS_NO_KEY, KeylessModel, network_caller_model
from gemini_split.server.model.names import check_model_name, parse_allowed_models
from gemini_split.server.ops import Operations
from gemini_split.server.service import AgentService
from gemini_split.server.store import StoreError, open_store
from gemini_split.server.store.redis import store_url
from gemini_split.telemetry import TelemetryFlags
from gemini_split.transport import ServeOptions, TransportError, get_transport, is_loopback_host
from gemini_split.transport.throttle import parse_networks

log = logging.getLogger("gemini_split.serve")

#: Seconds between two sweeps of idle sessions.
EXPIRY_INTERVAL = 3600.0

DEFAULT_PORT = 8080
#: Seconds running sessions get to wind down on shutdown.
SHUTDOWN_GRACE = 5.0


def run_serve(args: argparse.Namespace, env: Environment) -> ExitStatus:
    """Check everything that can be checked, then serve until told to stop."""
    e = env.environ
    # The key first, before anything else (this also builds the model, which
    # imports google-genai).
    model_name, model = _serve_model(args, env)
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ConfigurationError("--tls-cert and --tls-key go together")

    auth_path = args.auth_config or e.get("GEMINI_AUTH_CONFIG")
    authenticate = load_auth_config(auth_path) if auth_path else None
    if args.grpc and args.stdio:
        raise ConfigurationError("--grpc listens on a port; it does not go with --stdio")
    if args.no_websocket and not args.grpc:
        raise ConfigurationError("--no-websocket goes with --grpc HOST:PORT (otherwise nothing would be served)")
    grpc_address = _grpc_address(args, authenticate) if args.grpc else None
    local = True
    if args.stdio:
        address = "stdio:-"
    elif args.no_websocket:
        address = None
        local = False  # gRPC only: attach by id is for loopback WebSocket / stdio
    elif (args.listen or "").startswith("unix:"):
        if args.tls_cert:
            raise ConfigurationError("--tls-cert: a unix: socket is not served over TLS")
        address = args.listen  # the unix transport checks its path and refuses other uids (SO_PEERCRED)
    else:
        host, port = _parse_listen(args.listen, e.get("GEMINI_SERVER_PORT"))
        if authenticate is None and not is_loopback_host(host) and not args.insecure_no_auth:
            raise ConfigurationError(
                f"refusing to listen on {host} without authentication: anyone who can reach it "
                "could use your API key. Pass --auth-config FILE (or GEMINI_AUTH_CONFIG), or "
                "--insecure-no-auth if you really mean it."
            )
        local = is_loopback_host(host)
        scheme = "wss" if args.tls_cert else "ws"
        address = f"{scheme}://{_bracket(host)}:{port}"

    acp_address = None
    if getattr(args, "acp_ws", None) is not None:
        if args.stdio:
            raise ConfigurationError("--acp-ws needs a listening server, not --stdio")
        acp_host, acp_port = _parse_listen(args.acp_ws or None, e.get("GEMINI_PORT") or "4444")
        if authenticate is None and not is_loopback_host(acp_host) and not args.insecure_no_auth:
            raise ConfigurationError(
                f"refusing to serve ACP on {acp_host} without authentication: pass --auth-config FILE "
                "(or GEMINI_AUTH_CONFIG), or --insecure-no-auth if you really mean it."
            )
        acp_address = f"{'wss' if args.tls_cert else 'ws'}://{_bracket(acp_host)}:{acp_port}"

    notice = _check_who_can_connect(args, authenticate, address, grpc_address, acp_address)
    config = ServerConfig(model=model_name, tool_timeout=args.tool_timeout, max_message_size=args.max_message_size,
                          replay_capacity=args.replay_capacity,
                          allow_attach_by_id=local if args.allow_attach_by_id is None else args.allow_attach_by_id)
    if args.serve_max_turns:
        config.max_turns = args.serve_max_turns
    if args.allowed_models:
        try:
            config.allowed_models = parse_allowed_models(args.allowed_models)
        except ValueError as exc:
            raise ConfigurationError(f"--allowed-models: {exc}") from None
    options = ServeOptions(
        authenticate=authenticate,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        allowed_origins=tuple(args.allow_origin),
        max_message_size=args.max_message_size,
        max_connections_per_user=args.max_connections_per_user,
        trusted_proxies=_trusted_proxies(args.trusted_proxy),
    )
    if not args.debug:
        # A daemon's operator wants sessions opening and closing in the log.
        logging.getLogger("gemini_split").setLevel(logging.INFO)

    redis_url = store_url(args.store, e)
    if redis_url is not None and not redis_url.startswith(("redis://", "rediss://")):
        raise ConfigurationError("--store: give a redis:// or rediss:// URL (sessions on disk: --state-dir)")
    if redis_url is not None and args.state_dir:
        raise ConfigurationError("--store and --state-dir: give one (sessions live in Redis or on disk)")
    # A stdio server is one process per connection (often spawned over ssh):
    # several may share the directory, so only a listening server locks it.
    store = open_store(redis_url or state_dir(args.state_dir, env), replay_capacity=args.replay_capacity,
                       exclusive=not args.stdio)

    server_tools = server_tools_from(server_tools_options(args), env)
    client_model = None
    if args.allow_client_credentials:
        client_model = functools.partial(network_caller_model, base_url=e.get("GOOGLE_GEMINI_BASE_URL") or None)
    service = AgentService(model, config, authenticate=authenticate, store=store, server_tools=server_tools,
                           client_model=client_model)
    if redis_url is not None:
        # Lazy: replicas only with --store (gemini_split/lazy_imports.py).
        from gemini_split.server.replicas.replica import DEFAULT_LEASE_TTL, Replica

        # One replica of several: a session runs where its lease is held.
        service.manager.replica = Replica(store, lease_ttl=args.lease_ttl or DEFAULT_LEASE_TTL)  # type: ignore[arg-type]
    elif args.lease_ttl is not None:
        raise ConfigurationError("--lease-ttl goes with --store redis://… (replicas)")

    ops = Operations(service)
    options.health, options.ready, options.metrics = ops.health, ops.ready, ops.metrics
    if args.notify_webhook:
        # Lazy: only with --notify-webhook (gemini_split/lazy_imports.py).
        from gemini_split.web.notify import Notifier

        if not args.notify_webhook.startswith(("http://", "https://")):
            raise ConfigurationError("--notify-webhook: give an http:// or https:// URL")
        service.notifier = Notifier(args.notify_webhook, detail=args.notify_detail)
        config.observe_events = service.notifier.observe
    elif args.notify_detail:
        raise ConfigurationError("--notify-detail goes with --notify-webhook URL")
    if args.web:
        if address is None or address.startswith(("stdio:", "unix:")):
            raise ConfigurationError("--web is served on the WebSocket listener: give --listen HOST:PORT")
        # Lazy: the web face only with --web (gemini_split/lazy_imports.py).
        from gemini_split.web.face import web_face_for

        options.extra["web"] = web_face_for(
            service, pair_ttl=args.web_pair_ttl, cookie_days=args.web_cookie_days, static_dir=args.web_static)
    stop_log = None
    acp = None
    if acp_address is not None:
        # Lazy: the ACP stack only with --acp-ws (gemini_split/lazy_imports.py).
        from gemini_split.commands.run_acp import log_path, open_log

        try:
            mode = parse_approval_mode(e.get("GEMINI_APPROVAL_MODE") or "default")
        except ValueError as exc:
            raise ConfigurationError(f"GEMINI_APPROVAL_MODE: {exc}") from None
        acp = (acp_address, mode, args.acp_ring)
        stop_log = open_log(log_path(args, env))
    listeners = [(address, options)] if address else []
    if grpc_address:
        listeners.append((grpc_address, msgspec.structs.replace(options, extra={
            # The face opens its streams' sessions with the native client.
            "open_client": open_face_client,
            "check_model": functools.partial(check_model_name, allowed=config.allowed_models, default=config.model),
            "allowed_config": _grpc_config_keys(args.grpc_allow_config),
            "max_streams": args.grpc_max_streams,
            "server_tools": bool(args.server_tools),
            # (Issue 32) Sub-agents work with the session's tools: only
            # when the server runs tools for gRPC sessions.
            "agents": face_agents(env) if args.server_tools else (),
        })))
    flags = TelemetryFlags(enabled=args.telemetry, target=args.telemetry_target,
                           otlp_endpoint=args.telemetry_otlp_endpoint, otlp_protocol=args.telemetry_otlp_protocol,
                           outfile=args.telemetry_outfile, log_prompts=args.telemetry_log_prompts)
    try:
        with single_exceptions(), server_telemetry(env, flags, model=model_name):
            trio.run(_serve, service, listeners, env, args.session_ttl, acp, options, ops, notice)
    except TransportError as exc:
        env.warn(f"gemini-split serve: cannot serve {' and '.join(a for a, _ in listeners)}: {exc}")
        return ExitStatus.ERROR
    except StoreError as exc:
        env.warn(f"gemini-split serve: {exc}")
        return ExitStatus.ERROR
    finally:
        if stop_log is not None:
            stop_log()
    return ExitStatus.SUCCESS


def _page_url(address: str) -> str:
    """The page's address for links: ``ws://h:p`` → ``http://h:p`` (a
    wildcard host is left as it is: the operator knows the real name)."""
    return address.replace("wss://", "https://", 1).replace("ws://", "http://", 1)


def _serve_model(args: argparse.Namespace, env: Environment) -> tuple[str, Any]:
    """The server's own model name and model: with ``--auth-method``, only
    by that method; with ``--allow-client-credentials`` and no credentials
    at all, none (each session runs on its client's key)."""

    environ = dict(env.environ)
    selected = None
    if args.auth_method == "api-key":
        environ.pop("GOOGLE_GENAI_USE_VERTEXAI", None)
    elif args.auth_method == "vertex-ai":
        if args.allow_client_credentials:
            raise ConfigurationError("--allow-client-credentials takes Gemini API keys from clients; it does not "
                                     "go with --auth-method vertex-ai (every session on Vertex AI)")
        selected = "vertex-ai"
    try:
        return open_model(args.serve_model, env, environ=environ, selected_type=selected,
                          missing_key_hint="; the server needs it to talk to Gemini"
                          + (", or --allow-client-credentials to take each client's own key."
                             if not args.allow_client_credentials else "."))
    except MissingApiKey:
        if not args.allow_client_credentials or args.auth_method == "vertex-ai" \
                or environ.get("GOOGLE_GENAI_USE_VERTEXAI"):
            raise

    return args.serve_model or environ.get("GEMINI_MODEL") or DEFAULT_MODEL, KeylessModel(SERVER_HAS_NO_KEY)


def state_dir(value: str | None, env: Environment) -> str:
    """``--state-dir``, or ``sessions/`` under ``GEMINI_SPLIT_HOME``."""
    if value:
        return value if value == ":memory:" else str(Path(value).expanduser())
    return str(env.config_dir / "sessions")


async def _expire_sessions(store: Any, ttl: float, server_tools: Any = None) -> None:
    while True:
        try:
            gone = await store.expire(time.time() - ttl)
        except StoreError as exc:  # the store is away for now: next time
            log.warning("could not drop idle sessions: %s", exc)
            gone = []
        if gone:
            log.info("dropped %d session(s) idle for more than %gs", len(gone), ttl)
            for session_id in gone if server_tools is not None else ():
                server_tools.remove_workspace(session_id)
        await trio.sleep(EXPIRY_INTERVAL)


async def _serve(service: Any, listeners: list[tuple[str, Any]], env: Environment, session_ttl: float,
                 acp: tuple[str, Any, int] | None = None, options: Any = None, ops: Any = None,
                 notice: str | None = None) -> None:
    """Run ``service`` behind each ``(address, options)`` listener (and the
    ACP bridge, with ``options``) until a signal (or a stdio server's one
    connection) ends it; ``ops`` (/ready, /metrics) watches the store.
    ``notice``: a warning said once everything listens."""

    # The model's endpoint is looked up once per few seconds, not once per
    # connection (a burst's thousand new connections): gemini_split/dns_cache.py.
    trio.socket.set_custom_hostname_resolver(CachingResolver())
    try:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                # Before listening: a bad state directory must stop us, not a client.
                await nursery.start(service.run)
                notifier = getattr(service, "notifier", None)
                if notifier is not None:  # serve --notify-webhook
                    nursery.start_soon(notifier.run)
                if getattr(service, "pairing", None) is not None:  # serve --web: hears revocations elsewhere
                    await nursery.start(service.pairing.run)
                # Built once, and then out of the collector's way (gemini_split/collector.py).
                service.model.warm_up(service.config.model)
                settle_for_serving()
                # A burst's young collections wait for its first deltas.
                service.priority.on_burst.append(bursting)

                for address, listen_options in listeners:
                    transport = get_transport(address)

                    async def serve_then_stop(*, task_status: Any, transport: Any = transport,
                                              address: str = address, listen_options: Any = listen_options) -> None:
                        await transport.serve(address, service.handle_connection, listen_options,
                                              task_status=task_status)
                        # Only a stdio server returns: its one connection has ended.
                        nursery.cancel_scope.cancel()

                    bound = await nursery.start(serve_then_stop)
                    notifier = getattr(service, "notifier", None)
                    if notifier is not None and "web" in listen_options.extra:
                        notifier.base_url = _page_url(bound)  # links in notifications open the page
                    if not address.startswith("stdio:"):
                        log.info("gemini-split serving on %s (model %s, auth %s, store %s)", bound,
                                 service.config.model, "on" if listen_options.authenticate else "off",
                                 describe_store(service.store))
                    if "web" in listen_options.extra:
                        log.info("the web page is at %s/ — sign a browser in with: gemini-split pair --server %s",
                                 _page_url(bound), bound)

                if getattr(service.model, "auth_description", ""):  # once, however many listeners
                    log.info("the model is reached through %s", service.model.auth_description)

                async def stop_on_signal() -> None:
                    async for signum in signals:
                        log.info("received %s: shutting down", signal.Signals(signum).name)
                        await service.shutdown(grace=SHUTDOWN_GRACE)
                        nursery.cancel_scope.cancel()
                        return

                if acp is not None:
                    from gemini_split.acp.bridge import serve_acp_ws

                    acp_address, mode, ring = acp
                    acp_bound = await nursery.start(functools.partial(
                        serve_acp_ws, service, acp_address, options, approval_mode=mode, ring_capacity=ring))
                    log.info("ACP bridge on %s", acp_bound)

                if notice:
                    log.warning("%s", notice)
                nursery.start_soon(stop_on_signal)
                nursery.start_soon(_expire_sessions, service.store, session_ttl, service.server_tools)
                if ops is not None:
                    nursery.start_soon(ops.run)
    finally:
        with trio.CancelScope(shield=True):
            await service.aclose()


def _check_who_can_connect(args: argparse.Namespace, authenticate: Any, address: str | None,
                           grpc_address: str | None, acp_address: str | None) -> str | None:
    """Refuse ``--server-tools`` where nothing says who connects; → what
    to say once listening about who can use a server without tokens (None:
    nothing). Without ``--auth-config``
    only ``--stdio`` (ssh has authenticated its caller) and ``--listen
    unix:PATH`` (the kernel tells the peer's uid; other uids are refused)
    know who is there: a TCP port on loopback carries no peer identity, so
    every local account could connect."""
    if authenticate is not None:
        return None
    tcp = [a for a in (address, grpc_address, acp_address) if a and not a.startswith(("stdio:", "unix:"))]
    if not tcp:
        return None
    if args.server_tools:
        raise ConfigurationError(
            f"refusing --server-tools on {tcp[0]} without authentication: every local account (and anyone "
            "who can reach it) could run commands as this server's user. Pass --auth-config FILE (or "
            "GEMINI_AUTH_CONFIG), or serve one user over --listen unix:/PATH (peer uid checked) or --stdio.")
    return ("no --auth-config: every local account on this machine can use this server (its sessions and "
            "your API key); give tokens (--auth-config) or use --listen unix:/PATH on a shared machine")


def _grpc_address(args: argparse.Namespace, authenticate: Any) -> str:
    """``--grpc HOST:PORT`` as a grpc:// or grpcs:// address. A
    non-loopback address needs TLS and tokens unless --insecure-no-auth."""

    host, port = _parse_listen(args.grpc, None)
    if not is_loopback_host(host) and not (authenticate is not None and args.tls_cert) and not args.insecure_no_auth:
        raise ConfigurationError(
            f"refusing to serve gRPC on {host} without TLS and authentication: pass --tls-cert/--tls-key "
            "and --auth-config FILE, or --insecure-no-auth if you really mean it."
        )
    return f"{'grpcs' if args.tls_cert else 'grpc'}://{_bracket(host)}:{port}"


def _trusted_proxies(entries: list[str]) -> tuple[str, ...]:
    """``--trusted-proxy`` entries, checked now (a typo must stop the start,
    not silently count every client as the proxy)."""

    try:
        parse_networks(entries)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    return tuple(entries)


def _grpc_config_keys(text: str) -> tuple[str, ...]:
    """``--grpc-allow-config`` as a tuple of keys (the gRPC plugin refuses
    to start with a key it does not know)."""
    return tuple(k.strip() for k in text.split(",") if k.strip())


def _parse_listen(listen: str | None, env_port: str | None) -> tuple[str, int]:
    if not listen:
        port_text = env_port or str(DEFAULT_PORT)
        host = "127.0.0.1"
    else:
        host, sep, port_text = listen.rpartition(":")
        if not sep:
            raise ConfigurationError(f"--listen {listen!r}: expected HOST:PORT, e.g. 127.0.0.1:8080")
        host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
        if not 0 <= port <= 65535:
            raise ValueError
    except ValueError:
        raise ConfigurationError(f"{port_text!r} is not a port number (0-65535)") from None
    return host, port


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def describe_store(store: Any) -> str:
    """Where ``store`` keeps sessions, for the start-up line: the SQLite
    file, the Redis URL without user, password or query, or memory."""
    path = getattr(store, "path", None)
    if path is not None:
        return f"sqlite {path}"
    name = getattr(store, "name", None)  # RedisStore: already redacted
    if name:
        return str(name)
    return "memory (nothing kept after exit)"
