"""Approvals promoted over the wire: a server-side tool call asks every
attached client, and the first valid ``tool_decision`` settles it.

One :class:`Approvals` per session. :meth:`Approvals.ask` emits the
question (``tool_awaiting_approval``, as an ordinary session event, so every
attached view and every later replay sees it) and waits for
:meth:`Approvals.decide`, for at most ``timeout`` seconds. The rules, each
refusal with its stable code (:class:`~gemini_split.protocol.ErrorCode`):

* a decision settles one call id, once: the first one wins; a second one, a
  replayed one (after a reconnect) and one after the request ended get
  ``already_decided``; one after the timeout ``approval_expired``; one for
  a call id this session never asked about (another session's too — a
  session cannot probe another's) ``unknown_call``;
* an approval binds the exact arguments asked about: it must carry the
  question's ``parameters_hash`` (a deny needs none), or it is refused
  with ``arguments_changed`` and the call still waits;
* whoever decided is named to everyone in ``tool_decided`` (their client
  label, never a token); an expiry (the model is told the call was not
  approved) and a cancelled request are said the same way;
* (1.6) an edit's question carries its whole proposed text
  (``edit.content``) only up to ``edit_limit`` UTF-8 bytes (the operator's
  budget: a bigger one is asked from its description alone); an approval
  may carry the text the user changed it to (``tool_decision.edit``) only
  for the question's own path, within that limit, with ``approve``, and
  only when the question offered the text — anything else is refused with
  ``edit_refused`` and the call still waits. ``tool_decided.modified`` tells
  everyone the user's text, not the model's, is what runs.

Nothing here knows the connections: the caller says who decided.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import msgspec

from gemini_split.protocol import (
    DEFAULT_MAX_MESSAGE_SIZE,
    ErrorCode,
    ServerEvent,
    ToolAwaitingApproval,
    ToolDecided,
    ToolDecision,
    quote,
)

from ..request.asks import Asks

#: Settled call ids remembered for their refusal codes.
SETTLED_KEPT = 1024
#: Seconds a question waits by default (``serve --approval-timeout``).
DEFAULT_APPROVAL_TIMEOUT = 600.0
#: Why an ``ask_user`` question was not asked (1.4): nobody attached can answer.
NO_ONE_TO_ASK = "no attached client can answer questions (no user is present)"
#: (1.6) The share of the largest message a server takes that an edit's
#: proposed text may fill in its question: the question also carries the
#: call's arguments and the diff, and the answer the user's text.
EDIT_SHARE = 4


def parameters_hash(tool: str, parameters: dict[str, Any]) -> str:
    """The digest an approval must carry: SHA-256 of the tool name and its
    arguments as canonical JSON (sorted keys), in hex."""
    canonical = msgspec.json.encode({"tool": tool, "parameters": parameters}, order="sorted")
    return hashlib.sha256(canonical).hexdigest()


class DecisionRefused(Exception):
    """A ``tool_decision`` that decides nothing; ``code`` says why."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code


class Approvals:
    """The questions of one session. ``emit`` puts an event in the
    session's outbox without waiting (the caller's ``emit_nowait``)."""

    def __init__(self, emit: Callable[[ServerEvent], None], *, timeout: float = DEFAULT_APPROVAL_TIMEOUT,
                 can_answer: Callable[[], bool] = lambda: True,
                 can_answer_questions: Callable[[], bool] = lambda: False,
                 edit_limit: int = DEFAULT_MAX_MESSAGE_SIZE // EDIT_SHARE):
        self.emit = emit
        #: (1.6) The most UTF-8 bytes of an edit's text a question carries
        #: and an approval may bring back.
        self.edit_limit = edit_limit
        self.timeout = timeout
        #: Whether an attached client can answer a question now (one that
        #: lists the ``tool_approvals`` capability): with none, a question
        #: is not asked at all, it is refused at once (nothing hangs).
        self.can_answer = can_answer
        #: (1.4) Whether an attached client can answer ``ask_user``
        #: questions now (capability ``ask_user``): with none, a question
        #: that carries ``questions`` is not asked either.
        self.can_answer_questions = can_answer_questions
        self._asks: Asks[ToolAwaitingApproval, ToolDecision] = Asks()
        #: call id → ``decided`` / ``expired`` / ``ended``, the latest last.
        self.settled: OrderedDict[str, str] = OrderedDict()

    # --- the server's side ------------------------------------------------------

    async def ask(self, question: ToolAwaitingApproval) -> ToolDecision | str:
        """Emit ``question`` (its ``parameters_hash`` and ``expires_at`` are
        filled in here) and wait for its decision: the first valid
        ``tool_decision``, or — when nobody decided — a sentence saying why
        (``timeout`` passed: everyone is told it expired; or no attached
        client can answer: nothing is asked). When cancelled (the request
        ended), everyone is told it was cancelled."""
        if question.call_id in self._asks or question.call_id in self.settled:
            raise ValueError(f"call id {question.call_id!r} was asked about already")
        if question.questions and not self.can_answer_questions():
            return NO_ONE_TO_ASK
        if not self.can_answer():
            return ("no attached client can answer approval questions (a one-shot or program client: "
                    "its approval mode is reject_dangerous)")
        event = msgspec.structs.replace(
            question,
            parameters_hash=parameters_hash(question.tool, question.parameters),
            expires_at=int((time.time() + self.timeout) * 1000),
            edit=self._bounded(question),
        )
        expired = False
        try:
            decision = await self._asks.ask(event.call_id, event, send=self.emit, timeout=self.timeout)
            if decision is not None:
                return decision
            expired = True
            return f"nobody approved it within {self.timeout:g} seconds"
        finally:
            if self.settled.get(event.call_id) != "decided":  # expired, or cancelled: decide() said nothing
                self._settle(event.call_id, "expired" if expired else "ended")
                self.emit(ToolDecided(request_id=event.request_id, call_id=event.call_id,
                                      decision="expired" if expired else "cancelled", agent_id=event.agent_id))

    def pending(self) -> list[ToolAwaitingApproval]:
        """The questions still waiting, oldest first, as they were logged
        (with their first ``seq``, once logged)."""
        return [ask.question for ask in self._asks.pending()]

    def logged(self, event: ToolAwaitingApproval) -> None:
        """The session's event log numbered ``event``: keep the first
        numbered form of a waiting question (what ``state`` shows)."""
        self._asks.logged(event.call_id, event)

    # --- the clients' side ------------------------------------------------------

    def decide(self, decision: ToolDecision, *, by: str) -> None:
        """Settle a waiting question with ``decision`` (from the client
        labelled ``by``). Raises :class:`DecisionRefused` (nothing settled,
        nothing runs) for the cases the module docstring lists."""
        waiting = self._asks.waiting(decision.call_id)
        if waiting is None:
            raise self._refusal(decision.call_id)
        verdict = decision.verdict
        if verdict != "deny" and decision.parameters_hash != waiting.question.parameters_hash:
            raise DecisionRefused(
                ErrorCode.ARGUMENTS_CHANGED,
                f"this approval of {quote(decision.call_id)} does not carry the parameters_hash of the "
                "arguments asked about: an approval binds exactly those arguments (the call still waits)",
            )
        modified = self._check_edit(decision, waiting.question)
        self._settle(decision.call_id, "decided")
        self._asks.settle(decision.call_id, decision)
        self.emit(ToolDecided(request_id=waiting.question.request_id, call_id=decision.call_id, decision=verdict,
                              by=by, agent_id=waiting.question.agent_id, modified=modified))

    def _bounded(self, question: ToolAwaitingApproval) -> Any:
        """The question's ``edit`` within :attr:`edit_limit`: its size and
        the limit said, its text left out when over."""
        edit = question.edit
        if edit is None or edit.content is None:
            return edit
        size = len(edit.content.encode("utf-8", "surrogatepass"))
        content = edit.content if size <= self.edit_limit else None
        return msgspec.structs.replace(edit, content=content, size=size, limit=self.edit_limit)

    def _check_edit(self, decision: ToolDecision, question: ToolAwaitingApproval) -> bool:
        """Whether ``decision`` approves text the user changed (its
        ``edit`` differs from the proposal). Raises :class:`DecisionRefused`
        (``edit_refused``) for an ``edit`` the question did not offer."""
        edited = decision.edit
        if edited is None:
            return False
        offered = question.edit

        def refused(why: str) -> DecisionRefused:
            return DecisionRefused(ErrorCode.EDIT_REFUSED, f"the edited content for {quote(decision.call_id)} is "
                                   f"refused: {why}; nothing was written (the call still waits)")

        if offered is None or offered.content is None:
            raise refused("its question offered no content to edit")
        if decision.verdict != "approve":
            raise refused("edited content goes with decision approve only")
        if edited.path != offered.path:
            raise refused(f"it is for {quote(edited.path)}, and the question is about {quote(offered.path)}")
        size = len(edited.content.encode("utf-8", "surrogatepass"))
        if size > self.edit_limit:
            raise refused(f"it is {size} bytes, over this server's limit of {self.edit_limit} bytes")
        return edited.content != offered.content

    def _refusal(self, call_id: str) -> DecisionRefused:
        how = self.settled.get(call_id)
        if how == "expired":
            return DecisionRefused(ErrorCode.APPROVAL_EXPIRED,
                                   f"tool call {quote(call_id)} is no longer awaiting approval: it expired and "
                                   "the model was told it was not approved")
        if how is not None:
            return DecisionRefused(ErrorCode.ALREADY_DECIDED,
                                   f"tool call {quote(call_id)} is no longer awaiting approval: it was decided "
                                   "already (the first decision counts, once)")
        return DecisionRefused(ErrorCode.UNKNOWN_CALL, f"no tool call {quote(call_id)} is awaiting approval "
                                                       "in this session")

    def _settle(self, call_id: str, how: str) -> None:
        self.settled.pop(call_id, None)
        self.settled[call_id] = how
        while len(self.settled) > SETTLED_KEPT:
            self.settled.popitem(last=False)
