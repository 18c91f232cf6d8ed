"""A request sent again: never run twice.

A client that reconnected before it saw its prompt's request start, and
whose ``state`` said nothing of it runs, sends the prompt again with the
same id (``client/reconnect.py``). The session may have run it meanwhile:
it runs still, it is ending (its body is over, its state being saved, its
``finished`` not yet logged: ``state`` already says nothing runs), or it
has ended. In every case that id *is* that request, never a new one
(issue 44):

* its end is still to come to the asker (running, ending, or ended after
  the asker attached): nothing is sent, the asker sees the end live;
* its end was logged before the asker attached (so it is not in its live
  part): the asker is answered from the log — the request's events, from
  its ``request_started`` to its end, to it alone and unnumbered: its start
  and its end as they were (they begin and end the request on the asker's
  connection, as for any request it sent), what came between marked
  ``replayed`` (a replayed tool call is never run) — or, when the log no
  longer keeps them, an ``error`` (``replay_unavailable``) for it.

An id is that request only with the same prompt: a client that numbers
its messages afresh on each connection, or another client whose ids happen
to match, sending a *different* prompt under an id the session has run gets
an ``error`` (``invalid_field``) saying so, never another request's answer.

The ids of the last :data:`KEPT` requests a session started are kept (in
memory: a session restored on another replica knows only its own).
"""

from __future__ import annotations

from msgspec.structs import replace

from gemini_split.protocol import Error, ErrorCode, EventLog, Finished, RequestStarted, ServerEvent, quote

from ..views import View

#: Requests whose ids a session keeps.
KEPT = 1000


class Resends:
    """The requests one session started: the prompt each showed (None until
    its ``request_started`` is logged) and the seq each ended at (None
    while its end is not logged)."""

    def __init__(self, log: EventLog):
        self._log = log
        self._prompts: dict[str, str | None] = {}
        self._ended_at: dict[str, int | None] = {}

    def started(self, request_id: str) -> None:
        """``request_id`` runs now (its ``request_started`` emitted)."""
        self._prompts[request_id] = self._ended_at[request_id] = None
        while len(self._ended_at) > KEPT:
            oldest = next(iter(self._ended_at))
            del self._ended_at[oldest], self._prompts[oldest]

    def logged(self, event: ServerEvent) -> None:
        """A logged event: a request's prompt and its end are noted."""
        rid = event.request_id
        if rid is None or rid not in self._ended_at:
            return
        if isinstance(event, RequestStarted):
            self._prompts[rid] = event.prompt
        elif (isinstance(event, Finished) or isinstance(event, Error) and event.in_reply_to == rid) \
                and self._ended_at[rid] is None:
            self._ended_at[rid] = event.seq

    def answer(self, request_id: str, prompt: str, view: View) -> bool:
        """Whether ``request_id`` is an id this session has run (then
        ``view``, which sent it again with ``prompt`` as shown, is answered
        as the module says)."""
        if request_id not in self._ended_at:
            return False
        known = self._prompts[request_id]
        if known is not None and known != prompt:
            view.send_direct(Error(
                request_id=request_id, in_reply_to=request_id, code=ErrorCode.INVALID_FIELD.value,
                message=f"id {quote(request_id)} already names another request of this session; "
                        "give each request an id of its own"))
            return True
        end = self._ended_at[request_id]
        if end is None or end > view.live_after:
            return True  # its end reaches the asker live
        events = [e for e in self._log.kept() if e.request_id == request_id and (e.seq or 0) <= end]
        if not events or events[0].TYPE != "request_started" or events[-1].seq != end:
            view.send_direct(Error(
                request_id=request_id, in_reply_to=request_id, code=ErrorCode.REPLAY_UNAVAILABLE.value,
                message=f"request {quote(request_id)} has already run here, and its events are no longer kept; "
                        "the session's history has its answer"))
            return True
        for i, event in enumerate(events):
            view.send_direct(replace(event, seq=None, replayed=0 < i < len(events) - 1))
        return True
