"""What a server needs to know to run sessions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gemini_split.protocol import DEFAULT_MAX_MESSAGE_SIZE

DEFAULT_MODEL = "gemini-2.5-flash"


@dataclass
class ServerConfig:
    """Limits and defaults for every session a server runs."""

    model: str = DEFAULT_MODEL
    #: Model names or patterns a client may ask for (empty: any valid name;
    #: ``model`` itself always). See :mod:`gemini_split.server.model.names`.
    allowed_models: tuple[str, ...] = ()
    #: Model calls allowed for one request before it ends with turn_limit.
    max_turns: int = 100
    #: Sub-agents one session runs at once (more wait their turn), and the
    #: seconds one runs at most whatever its definition says (issue 32).
    max_subagents: int = 4
    subagent_timeout_max: float = 24 * 3600.0
    #: Seconds of a sub-agent's final recovery turn, once it hit
    #: ``max_turns`` or ``timeout_mins`` (gemini-cli's grace period).
    subagent_grace_seconds: float = 60.0
    #: Seconds the client has to answer a tool_execution_request (approval
    #: time included).
    tool_timeout: float = 900.0
    #: Attempts of one model call (1 = no retry) on 429/5xx, and the wait
    #: before the first retry, doubling up to the ceiling: gemini-cli's
    #: figures, so a persistent 429 is ridden out for minutes (~3.5 min).
    max_attempts: int = 10
    retry_base_delay: float = 5.0
    retry_max_delay: float = 30.0
    #: A fixed system instruction for every session; None (the default):
    #: one built per session from its tools, approval mode, workspace and
    #: context files (``server/session/features/prompts.py``).
    system_instruction: str | None = None
    #: Seconds a new connection has to send hello.
    hello_timeout: float = 10.0
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    #: Unsent events a session holds before its model stream waits (deltas
    #: merge, so this counts distinct events).
    outbox_limit: int = 1000
    #: Events kept per session for replay to a reconnecting client, and the
    #: bytes of JSON they may take together.
    replay_capacity: int = 2000
    replay_bytes: int = DEFAULT_MAX_MESSAGE_SIZE
    #: Characters of delta text a session holds unsent before its model
    #: stream waits for a slow client.
    outbox_bytes: int = 4 * 1024 * 1024
    #: Seconds a session with no connection and no running request stays in
    #: memory before it is unloaded (the store keeps it; a resume or attach
    #: reloads it, nothing lost): long enough for a client to reconnect
    #: after a network blip and find it live, short enough that an idle
    #: server gives back what a burst of clients took (issue 45 item 8).
    detached_grace: float = 10.0
    #: Whether a client may join a session that has clients attached by its
    #: id alone, without the resume token (``serve --allow-attach-by-id``;
    #: ``serve`` turns it on for loopback listeners). Only ever the
    #: principal's own sessions.
    allow_attach_by_id: bool = True
    #: Seconds with no request answered after which a request already
    #: streaming stops waiting, per output, for requests that have not
    #: answered yet while the loop is busy (it waits 5 s at the most), and
    #: how many ready tasks make it busy — or as many requests unanswered
    #: while the loop runs half its time, which also begins a rush
    #: (``server/session/priority.py``).
    answer_first_wait: float = 0.5
    answer_first_busy_tasks: int = 100
    #: Told every batch of events a session logs, ``(session, batch)``:
    #: ``serve --notify-webhook`` (gemini_split/web/notify.py). Must not wait.
    observe_events: Any = None
