"""Telemetry for operators: gemini-cli's OpenTelemetry logs and metrics.

Off by default. gemini-cli's ``telemetry`` settings turn it on
(``enabled``, ``target``, ``otlpEndpoint``, ``otlpProtocol``, ``outfile``,
``logPrompts``, ``useCollector``), each overridden by its
``GEMINI_TELEMETRY_*`` variable and, for ``serve``, by its ``--telemetry*``
flags (:func:`resolve_config`). Where it goes (``docs/telemetry.md``):

- ``outfile`` set: gemini-cli's JSON records appended to that file;
- otherwise OTLP to ``otlpEndpoint`` (default ``http://localhost:4317``)
  over ``otlpProtocol`` (``grpc``, the default, or ``http``);
- ``target: gcp`` without ``useCollector`` (gemini-cli's direct export to
  Google Cloud) is not done here: a warning, and nothing is exported.

Who emits what: each process exports what happens in it, under its own
configuration. A client (the user's settings) reports ``gemini_cli.config``
at start, ``gemini_cli.user_prompt`` per prompt and ``gemini_cli.tool_call``
per tool call it runs; a server (``serve``'s operator) reports every model
call (``gemini_cli.api_request`` / ``api_response`` / ``api_error``),
``gemini_cli.chat_compression``, and the tool calls it runs itself
(``--server-tools``); embedded mode, one process, reports both under the
user's settings. Both sides name the session (``session.id``) and the
request (``prompt_id``) alike, so their records join.

What is never exported: prompt text, tool arguments and the model's
requests and answers unless ``logPrompts`` is true (gemini-split's default
is false, gemini-cli's true); the values of secret-looking environment
variables (API keys, tokens) in any text, even then.

This module is on every run's path and imports nothing heavy: the
OpenTelemetry SDK (:mod:`.otel`) and the events (:mod:`.recorder`) are
imported only when telemetry is on (``gemini_split/lazy_imports.py``).
The process's recorder lives in a context variable, set by the command
around its run (:func:`activated`) and read where things happen
(:func:`current`): tasks and threads started inside inherit it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import msgspec

from gemini_split.errors import SettingsError

#: gemini-cli's default collector address (OTLP/gRPC).
DEFAULT_OTLP_ENDPOINT = "http://localhost:4317"
TARGETS = ("local", "gcp")
PROTOCOLS = ("grpc", "http")
#: Seconds a finishing command waits at most for its last records to be
#: exported (a dead collector must not hold up the exit).
CLOSE_BUDGET = 1.0


class TelemetryConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Telemetry as resolved for one process (see :func:`resolve_config`)."""

    enabled: bool = False
    target: str = "local"
    otlp_endpoint: str = DEFAULT_OTLP_ENDPOINT
    otlp_protocol: str = "grpc"
    #: An absolute path: the records go to this file, not to ``otlp_endpoint``.
    outfile: str | None = None
    log_prompts: bool = False
    use_collector: bool = False

    def destination(self) -> str:
        """Where the records go, in words (for logs and warnings)."""
        if self.outfile:
            return f"file {self.outfile}"
        return f"OTLP/{'gRPC' if self.otlp_protocol == 'grpc' else 'HTTP'} {self.otlp_endpoint}"


class TelemetryFlags(msgspec.Struct, frozen=True, kw_only=True):
    """Command-line overrides (``serve --telemetry*``); None: not given."""

    enabled: bool | None = None
    target: str | None = None
    otlp_endpoint: str | None = None
    otlp_protocol: str | None = None
    outfile: str | None = None
    log_prompts: bool | None = None


def resolve_config(section: Any, environ: Mapping[str, str], flags: TelemetryFlags | None = None, *,
                   cwd: Path) -> TelemetryConfig:
    """gemini-cli's ``resolveTelemetrySettings``: each value from the flag,
    else its ``GEMINI_TELEMETRY_*`` variable, else ``section`` (settings.json's
    ``telemetry``, a :class:`gemini_split.userfiles.settings.TelemetrySettings`). A
    boolean variable is true when it is ``true`` or ``1``; the endpoint also
    comes from ``OTEL_EXPORTER_OTLP_ENDPOINT``. A relative ``outfile`` is
    relative to ``cwd``.

    Raises :class:`~gemini_split.errors.SettingsError` (exit 52) for a target
    or protocol gemini-cli does not know, in gemini-cli's words."""
    flags = flags or TelemetryFlags()
    e = environ

    def pick(flag: Any, variable: str | None, setting: Any) -> Any:
        if flag is not None:
            return flag
        if variable is not None and e.get(variable) is not None:
            return e[variable]
        return setting

    def boolean(flag: bool | None, variable: str, setting: bool | None) -> bool | None:
        if flag is not None:
            return flag
        if variable in e:
            return e[variable] in ("true", "1")
        return setting

    enabled = boolean(flags.enabled, "GEMINI_TELEMETRY_ENABLED", section.enabled)
    target = pick(flags.target, "GEMINI_TELEMETRY_TARGET", section.target)
    if target is not None and target not in TARGETS:
        raise SettingsError(f"Invalid telemetry configuration: Invalid telemetry target: {target}. "
                            "Valid values are: local, gcp.")
    endpoint = pick(flags.otlp_endpoint, "GEMINI_TELEMETRY_OTLP_ENDPOINT",
                    e.get("OTEL_EXPORTER_OTLP_ENDPOINT") or section.otlp_endpoint)
    protocol = pick(flags.otlp_protocol, "GEMINI_TELEMETRY_OTLP_PROTOCOL", section.otlp_protocol)
    if protocol is not None and protocol not in PROTOCOLS:
        raise SettingsError(f"Invalid telemetry configuration: Invalid telemetry OTLP protocol: {protocol}. "
                            "Valid values are: grpc, http.")
    outfile = pick(flags.outfile, "GEMINI_TELEMETRY_OUTFILE", section.outfile)
    if outfile:
        outfile = str(cwd / Path(outfile).expanduser())
    return TelemetryConfig(
        enabled=bool(enabled),
        target=target or "local",
        otlp_endpoint=(endpoint or DEFAULT_OTLP_ENDPOINT).strip("\"'"),
        otlp_protocol=protocol or "grpc",
        outfile=outfile or None,
        log_prompts=bool(boolean(flags.log_prompts, "GEMINI_TELEMETRY_LOG_PROMPTS", section.log_prompts)),
        use_collector=bool(boolean(None, "GEMINI_TELEMETRY_USE_COLLECTOR", section.use_collector)),
    )


class Recorder:
    """What happens in this process, as gemini-cli's events and metrics.

    This base class records nothing (telemetry off): every method returns
    at once, so callers call unconditionally. The recording one is
    :class:`gemini_split.telemetry.recorder.EventRecorder`. Methods never
    raise and never block: records are exported in the background."""

    enabled = False

    def user_prompt(self, prompt: str, *, prompt_id: str, session_id: str | None) -> None:
        """A prompt the user sent (``gemini_cli.user_prompt``)."""

    def tool_call(self, name: str, args: Any, *, duration_ms: int, success: bool, decision: str | None,
                  prompt_id: str | None, session_id: str | None, error: str | None = None,
                  error_type: str | None = None, mcp_server_name: str | None = None,
                  content_length: int | None = None) -> None:
        """A tool call that ended (``gemini_cli.tool_call``, the
        ``gemini_cli.tool.call.*`` metrics)."""

    def api_request(self, *, model: str, prompt_id: str, session_id: str | None, contents: Any) -> None:
        """A model call about to be made (``gemini_cli.api_request``)."""

    def api_response(self, *, model: str, duration_ms: int, usage: Any, prompt_id: str, session_id: str | None,
                     parts: Any) -> None:
        """A model call that answered (``gemini_cli.api_response``, the API
        and token metrics)."""

    def api_error(self, *, model: str, error: str, error_type: str, status_code: int | None, duration_ms: int,
                  prompt_id: str, session_id: str | None) -> None:
        """A model call that failed (``gemini_cli.api_error``)."""

    def chat_compression(self, *, tokens_before: int, tokens_after: int, prompt_id: str | None,
                         session_id: str | None) -> None:
        """A history compressed (``gemini_cli.chat_compression``)."""

    def close(self, budget: float = CLOSE_BUDGET) -> None:
        """Export what is left, waiting at most ``budget`` seconds."""


#: The recorder of the running command (:func:`activated`), or the
#: silent one.
_current: ContextVar[Recorder] = ContextVar("gemini_split_telemetry", default=Recorder())


def current() -> Recorder:
    """This run's recorder: the silent one unless telemetry is on."""
    return _current.get()


@contextmanager
def activated(config: TelemetryConfig, *, role: str, warn: Callable[[str], None],
              secrets: Collection[str] = (), config_attributes: Mapping[str, Any] | None = None,
              common: Mapping[str, Any] | None = None, state_dir: Path | None = None) -> Iterator[Recorder]:
    """Record this command's run (``with`` around its ``trio.run``) as
    ``config`` says; with telemetry off, the silent recorder and nothing
    imported.

    ``role`` is ``client``, ``server`` or ``embedded`` (which events a
    process emits, and whether its metrics carry ``session.id``: a server's
    do not, one series per session would grow without end).
    ``warn(line)`` tells the user (once) that records could not be
    exported; ``secrets`` are values never exported in any text;
    ``config_attributes`` the ``gemini_cli.config`` event's attributes (None:
    no such event); ``common`` attributes every record carries;
    ``state_dir`` where ``installation_id`` is kept.

    Resource handling: on leaving, the last records are exported within
    :data:`CLOSE_BUDGET` seconds; what is not is dropped (``warn`` says so)."""
    if not config.enabled:
        yield _current.get()
        return
    if config.target == "gcp" and not config.use_collector:
        warn("telemetry: target gcp exports straight to Google Cloud in gemini-cli; gemini-split exports "
             "OTLP only: run an OpenTelemetry collector with Google Cloud's exporter and set "
             "telemetry.useCollector (and otlpEndpoint). Nothing is exported for this run")
        yield _current.get()
        return
    try:
        # Lazy: the OpenTelemetry SDK only when telemetry is on (lazy_imports.EDGES).
        from .otel import open_sink
        from .recorder import EventRecorder

        sink = open_sink(config, warn=warn)
    except ImportError as exc:
        warn(f"telemetry is on but the OpenTelemetry SDK is missing ({exc.name}): "
             "pip install 'gemini-split[telemetry]'. Nothing is exported for this run")
        yield _current.get()
        return
    attributes = dict(common or {})
    if state_dir is not None:
        attributes["installation.id"] = installation_id(state_dir)
    recorder = EventRecorder(sink, log_prompts=config.log_prompts, role=role, common=attributes,
                             secrets=secrets)
    if config_attributes is not None:
        recorder.config(dict(config_attributes, log_user_prompts_enabled=config.log_prompts))
    token = _current.set(recorder)
    try:
        yield recorder
    finally:
        _current.reset(token)
        recorder.close()


def installation_id(state_dir: Path) -> str:
    """gemini-cli's ``installation.id``: a random id kept in
    ``installation_id`` in the config directory, made on first use (a
    fresh one each time when it cannot be kept)."""
    path = state_dir / "installation_id"
    try:
        text = path.read_text(encoding="utf-8").strip()
        if text:
            return text[:100]
    except OSError:
        pass
    new = str(uuid.uuid4())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new)
    except OSError:
        pass
    return new


def secret_values(environ: Mapping[str, str], is_secret: Callable[[str], bool]) -> tuple[str, ...]:
    """The values of ``environ``'s secret-looking variables (``is_secret(name)``)
    long enough to be told apart from ordinary words: never exported."""
    return tuple(sorted({v for k, v in environ.items() if len(v) >= 8 and is_secret(k)}, key=len, reverse=True))
