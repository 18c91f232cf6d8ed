"""Rewinding a session: where each prompt and each tool call sits in its
conversation, across compressions (protocol 1.4, ``rewind``).

A session's history is what the model is sent; a compression replaces its
older part with a summary, so positions in it move and what it dropped is
gone from it. A :class:`Timeline` keeps what rewinding needs beside it:

* the **archive**: the messages compressions dropped, in order, so that
  ``archive + history[prefix:]`` is always the whole conversation as it
  was said (``prefix`` is the summary and its acknowledgement at the head
  of a compressed history, 0 before any compression). gemini-cli's
  ``/rewind`` does the same from its recorded session file ("rewind works
  across chat compression points by reconstructing the history from stored
  session data");
* a **mark** per prompt: its request, the ``seq`` of its
  ``request_started`` (what ``rewind.before_seq`` names) and where its user
  turn sits in the whole conversation;
* a **call site** per tool call (``/restore`` re-proposes one): the model
  turn that proposed it and which of its function calls it is;
* the ``seq`` ranges a rewind took back, which a late joiner's replay
  leaves out (``protocol/replay.py``).

Rewinding to a prompt that a compression summarised gives back the
conversation before that prompt as it was said, uncompressed (the next
request compresses it again if it is still over the threshold); rewinding
to a later prompt keeps the summary. Either way the history stays one the
API accepts: a prompt's user turn is only ever preceded by whole turns.

Plain data, no I/O: the session saves it with each turn
(``SessionStore.save_turn(timeline=, archive=)``), so a rewind works after
a restart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gemini_split.protocol import RequestStarted, ToolAwaitingApproval, ToolExecutionRequest, ToolStarted

#: Tool calls whose place is kept (for ``/restore``), the latest: the
#: timeline is saved with every turn, so it must not grow with the session.
CALLS_KEPT = 1000
#: Texts of a first user turn that are the session's context, not the prompt.
_CONTEXT_OPENING = "<session_context>"


class RewindRefused(Exception):
    """The rewind cannot be done (the message says why, for the client);
    nothing changed."""


@dataclass
class Mark:
    """A prompt: its request, the ``seq`` of its ``request_started`` (None
    until it is logged) and the index of its user turn in the whole
    conversation."""

    request_id: str
    index: int
    seq: int | None = None


@dataclass
class CallSite:
    """A tool call: the request it belongs to and the ``seq`` of that
    request's ``request_started``, the index of the model turn that
    proposed it in the whole conversation, which of that turn's function
    calls it is, and the ``seq`` of its first logged event."""

    request_id: str
    index: int
    part: int
    seq: int | None = None
    request_seq: int | None = None


@dataclass
class Rewinding:
    """What a rewind gives: the new history, the prompt rewound to (its
    mark and text) and, for a re-proposal, the call site and its
    ``function_call`` part."""

    history: list[dict[str, Any]]
    mark: Mark
    prompt: str
    site: CallSite | None = None
    call: dict[str, Any] | None = None


@dataclass
class Timeline:
    archive: list[dict[str, Any]] = field(default_factory=list)
    prefix: int = 0
    marks: list[Mark] = field(default_factory=list)
    calls: dict[str, CallSite] = field(default_factory=dict)
    #: ``(first, last)`` seq ranges taken back by rewinds (``last`` None:
    #: up to the next ``request_started``): a late joiner's replay leaves
    #: them out.
    hidden: list[tuple[int, int | None]] = field(default_factory=list)
    #: Whether ``archive`` changed since it was last saved.
    archive_changed: bool = False
    #: Every request's ``request_started`` seq, by request id (which
    #: requests came after a point: the files they changed are put back).
    requests: dict[str, int] = field(default_factory=dict)

    # --- positions -------------------------------------------------------------

    def full_index(self, history: list[dict[str, Any]], index: int) -> int:
        """The index in the whole conversation of ``history[index]`` (or of
        the next message, for ``len(history)``)."""
        return len(self.archive) + index - self.prefix

    def message(self, history: list[dict[str, Any]], index: int) -> dict[str, Any] | None:
        """The whole conversation's message ``index``, None past its end."""
        if index < len(self.archive):
            return self.archive[index]
        at = self.prefix + index - len(self.archive)
        return history[at] if 0 <= at < len(history) and at >= self.prefix else None

    # --- what the session tells it ----------------------------------------------

    def begin(self, request_id: str, history: list[dict[str, Any]]) -> Mark:
        """A prompt is about to be added to ``history`` for ``request_id``."""
        mark = Mark(request_id, self.full_index(history, len(history)), self.requests.get(request_id))
        self.marks.append(mark)
        return mark

    def started(self, request_id: str, seq: int) -> None:
        """The ``request_started`` of ``request_id`` was logged as ``seq``:
        what a rewind hid up to a new request ends before it."""
        self.hidden = [(first, seq - 1 if last is None else last) for first, last in self.hidden]
        self.requests[request_id] = seq
        for mark in reversed(self.marks):
            if mark.request_id == request_id:
                if mark.seq is None:
                    mark.seq = seq
                return

    def note_call(self, call_id: str, request_id: str, name: str, args: Any,
                  history: list[dict[str, Any]]) -> None:
        """A tool call is about to run: it was proposed by the model turn at
        the end of ``history`` (calls run before their answers are added).
        A call not found there (a sub-agent's) is not noted."""
        if not history or history[-1].get("role") != "model":
            return
        index = self.full_index(history, len(history) - 1)
        taken = {site.part for site in self.calls.values() if site.index == index}
        for part_no, part in enumerate(history[-1].get("parts") or ()):
            call = part.get("function_call") if isinstance(part, dict) else None
            if isinstance(call, dict) and part_no not in taken and call.get("name") == name \
                    and _same(call.get("args") or {}, args or {}):
                self.calls[call_id] = CallSite(request_id, index, part_no)
                while len(self.calls) > CALLS_KEPT:  # saved with every turn: the oldest go
                    del self.calls[next(iter(self.calls))]
                return

    def logged(self, event: Any) -> None:
        """The session's event log numbered ``event``: a request's start, or
        a call's first event, sits at its ``seq``."""
        if isinstance(event, RequestStarted):
            self.started(event.request_id or "", event.seq or 0)
        elif isinstance(event, ToolExecutionRequest):
            self.call_logged(event.id, event.seq or 0)
        elif isinstance(event, ToolStarted | ToolAwaitingApproval):
            self.call_logged(event.call_id, event.seq or 0)

    def call_logged(self, call_id: str, seq: int) -> None:
        site = self.calls.get(call_id)
        if site is not None and site.seq is None:
            site.seq = seq
            site.request_seq = self.requests.get(site.request_id)

    def compressed(self, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
        """The history ``old`` was replaced by ``new``, a compression of it:
        a summary and its acknowledgement, then a tail of ``old`` kept whole
        (``server/session/features/compression.py``). What it dropped joins the archive."""
        kept = len(new) - 2
        if kept >= 0 and kept <= len(old) - self.prefix and new[2:] == old[len(old) - kept:]:
            self.archive.extend(old[self.prefix:len(old) - kept])
            self.prefix = 2
        else:  # not that shape: the whole of old is archived, all of new is summary
            self.archive.extend(old[self.prefix:])
            self.prefix = len(new)
        self.archive_changed = True

    # --- rewinding -----------------------------------------------------------------

    def points(self, history: list[dict[str, Any]]) -> list[tuple[Mark, str]]:
        """The prompts that can be rewound to, oldest first, with their text."""
        out = []
        for mark in self.marks:
            message = self.message(history, mark.index)
            if mark.seq is not None and message is not None and message.get("role") == "user":
                out.append((mark, prompt_text(message)))
        return out

    def find(self, history: list[dict[str, Any]], before_seq: int) -> tuple[Mark, str]:
        for mark, text in self.points(history):
            if mark.seq == before_seq:
                return mark, text
        raise RewindRefused(f"seq {before_seq} is not the start of a prompt of this session "
                            "(get_history lists them in 'points')")

    def rewind(self, history: list[dict[str, Any]], before_seq: int) -> Rewinding:
        """The session before the prompt whose ``request_started`` is
        ``before_seq``. Raises :class:`RewindRefused`. Changes nothing:
        :meth:`apply` does."""
        mark, text = self.find(history, before_seq)
        return Rewinding(self._cut(history, mark.index), mark, text)

    def repropose(self, history: list[dict[str, Any]], before_seq: int, call_id: str) -> Rewinding:
        """The session just after the model turn that proposed ``call_id``
        (made by the request whose ``request_started`` is ``before_seq``),
        without its answers: the request re-proposing it adds them. Raises
        :class:`RewindRefused`."""
        site = self.calls.get(call_id)
        if site is None or site.request_seq != before_seq:
            raise RewindRefused(f"tool call {call_id[:64]!r} was not made by the request at seq {before_seq} "
                                "of this session (or is no longer part of its conversation)")
        owners = [(m, t) for m, t in self.points(history) if m.index <= site.index]
        if not owners:
            raise RewindRefused(f"tool call {call_id[:64]!r} is no longer part of this session's conversation")
        mark, text = owners[-1]
        proposing = self.message(history, site.index)
        parts = (proposing or {}).get("parts") or []
        if proposing is None or site.part >= len(parts) or "function_call" not in parts[site.part]:
            raise RewindRefused(f"tool call {call_id!r} is no longer part of this session's conversation")
        return Rewinding(self._cut(history, site.index + 1), mark, text, site, parts[site.part]["function_call"])

    def _cut(self, history: list[dict[str, Any]], index: int) -> list[dict[str, Any]]:
        """The whole conversation's first ``index`` messages as a history:
        the current one cut, or — before what a compression summarised —
        rebuilt from the archive."""
        if index >= len(self.archive):
            return history[:self.prefix + index - len(self.archive)]
        return [*self.archive[:index]]

    def apply(self, history: list[dict[str, Any]], done: Rewinding, *, hide_from: int) -> None:
        """Make ``done`` (from :meth:`rewind` / :meth:`repropose` on this
        ``history``) the session's: the history in place, marks and call
        sites after the cut dropped, the events from seq ``hide_from`` up to
        the next request hidden from replay."""
        index = done.site.index + 1 if done.site is not None else done.mark.index
        if index < len(self.archive):  # rebuilt from the archive: nothing is summarised any more
            self.archive, self.prefix, self.archive_changed = [], 0, True
        history[:] = done.history
        self.marks = [m for m in self.marks if m.index < index]
        self.calls = {cid: s for cid, s in self.calls.items() if s.index < index}
        self.hidden.append((hide_from, None))

    # --- the store ---------------------------------------------------------------------

    def to_record(self) -> dict[str, Any]:
        """The small part, saved with every turn (the archive is saved apart,
        when it changed)."""
        return {
            "prefix": self.prefix,
            "marks": [[m.request_id, m.index, m.seq] for m in self.marks],
            "calls": {cid: [s.request_id, s.index, s.part, s.seq, s.request_seq] for cid, s in self.calls.items()},
            "hidden": [list(r) for r in self.hidden],
            "requests": self.requests,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any] | None, archive: list[dict[str, Any]] | None) -> Timeline:
        """Read back what :meth:`to_record` wrote (an empty or unreadable
        record: a session from before rewinding existed, whose prompts
        cannot be rewound to)."""
        timeline = cls(archive=list(archive or []))
        try:
            record = record or {}
            timeline.prefix = int(record.get("prefix", 0))
            timeline.marks = [Mark(str(r), int(i), None if s is None else int(s)) for r, i, s in record.get("marks", ())]
            timeline.calls = {str(cid): CallSite(str(r), int(i), int(p), _int(s), _int(q))
                              for cid, (r, i, p, s, q) in (record.get("calls") or {}).items()}
            timeline.hidden = [(int(a), _int(b)) for a, b in record.get("hidden", ())]
            timeline.requests = {str(r): int(q) for r, q in (record.get("requests") or {}).items()}
        except (TypeError, ValueError, AttributeError):
            return cls(archive=list(archive or []))
        return timeline

    def requests_since(self, seq: int) -> list[str]:
        """The requests started at ``seq`` or later, in order."""
        return [rid for rid, started in sorted(self.requests.items(), key=lambda item: item[1]) if started >= seq]

    def is_hidden(self, seq: int) -> bool:
        return is_hidden(self.hidden, seq)


def is_hidden(hidden: Any, seq: int) -> bool:
    """Whether ``seq`` lies in one of the ``(first, last)`` ranges
    (``last`` None: open) a rewind hid."""
    return any(first <= seq and (last is None or seq <= last) for first, last in hidden)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def prompt_text(message: dict[str, Any]) -> str:
    """The prompt a user turn carries: its texts but the session context."""
    texts = [p["text"] for p in message.get("parts") or ()
             if isinstance(p, dict) and isinstance(p.get("text"), str) and not p["text"].startswith(_CONTEXT_OPENING)]
    return "\n".join(texts)


def _same(a: Any, b: Any) -> bool:
    if a == b:
        return True
    try:  # arguments the model sent may have been normalised on the way
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    except (TypeError, ValueError):
        return False
