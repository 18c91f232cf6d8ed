"""Late-joiner replay: which logged events a client attaching asks for.

``hello.replay`` (or the WebSocket query ``?limit=&since=&before=`` the ACP
bridge of the seeds accepts) names them: the last ``limit`` *whole turns*
— from a ``request_started`` to its ``finished``/``error``, never a
response cut mid-stream, the turn still running included — the events
``since`` a time, ``before`` a time (Unix ms), or a combination (the time
window first, then the last turns that start in it). :func:`plan_replay` is
the one place that decides it, from the kept events' marks
(:meth:`~gemini_split.server.store.SessionStore.event_marks`); any face of the server that replays
(native protocol, the ACP WebSocket bridge) calls it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .error_codes import ErrorCode, RemoteProtocolError
from .messages import REPLAY_LIMIT_MAX, REPLAY_TIME_MAX, Replay

#: The event that opens a turn.
TURN_START = "request_started"
#: What a new attach replays when the client names nothing: the last turn.
DEFAULT_ATTACH_REPLAY = Replay(limit=1)


@dataclass(frozen=True)
class EventMark:
    """What replay planning needs of a kept event: no data."""

    seq: int
    timestamp: int
    request_id: str | None
    type: str


def mark_replayed(text: str) -> str:
    """An encoded event marked ``replayed: true`` (the text is a JSON
    object encoded by us, never marked yet). Every face that replays (the
    service, the Redis relay) marks with this one function."""
    return text[:-1] + ',"replayed":true}'


@dataclass(frozen=True)
class ReplayPlan:
    """The seqs to send (in order), and whether fewer turns or less time
    than asked were still kept (``replay_truncated``)."""

    seqs: tuple[int, ...]
    truncated: bool


def plan_replay(marks: Sequence[EventMark], replay: Replay, *, upto: int,
                hidden: Sequence[tuple[int, int | None]] = ()) -> ReplayPlan:
    """The events of ``marks`` (kept events, oldest first) that ``replay``
    asks for, up to seq ``upto`` (where the live part starts).

    ``hidden``: ``(first, last)`` seq ranges (``last`` None: open) that a
    rewind took back (1.4): never replayed, so a late joiner sees the
    conversation as it now is.

    ``truncated`` is true when what is asked reaches back past the oldest
    kept event and the log had dropped events before it."""
    kept = [m for m in marks if m.seq <= upto]
    dropped_before = bool(kept) and kept[0].seq > 1
    if hidden:
        kept = [m for m in kept if not any(first <= m.seq and (last is None or m.seq <= last)
                                           for first, last in hidden)]
    window = [m for m in kept
              if (replay.since is None or m.timestamp > replay.since)
              and (replay.before is None or m.timestamp < replay.before)]
    truncated = dropped_before and replay.since is not None and bool(kept) and kept[0].timestamp > replay.since
    if replay.limit is not None:
        starts = [i for i, m in enumerate(window) if m.type == TURN_START]
        if replay.limit == 0:
            window = []
        elif len(starts) >= replay.limit:
            window = window[starts[-replay.limit]:]
        else:
            window = window[starts[0]:] if starts else []
            # Fewer turns than asked: were more of them dropped?
            truncated = truncated or (dropped_before and (replay.since is None or kept[0].timestamp > replay.since))
    elif replay.since is None and replay.before is not None:
        truncated = truncated or dropped_before
    return ReplayPlan(tuple(m.seq for m in window), truncated)


def replay_from_query(query: dict[str, str]) -> Replay | None:
    """``?limit=&since=&before=`` of a WebSocket URL as a :class:`Replay`
    (None when none is given). Raises :class:`RemoteProtocolError`
    ``invalid_field`` naming the bad parameter."""
    values: dict[str, int] = {}
    for name, maximum in (("limit", REPLAY_LIMIT_MAX), ("since", REPLAY_TIME_MAX), ("before", REPLAY_TIME_MAX)):
        text = query.get(name)
        if text is None:
            continue
        if not text.isdigit() or len(text) > 16 or int(text) > maximum:
            raise RemoteProtocolError(
                ErrorCode.INVALID_FIELD,
                f"query parameter {name!r} must be a whole number from 0 to {maximum}, not {text[:32]!r}",
                field=f"replay.{name}")
        values[name] = int(text)
    return Replay(**values) if values else None
