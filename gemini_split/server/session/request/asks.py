"""Ask a client and wait: one shape for every question a request puts to
a client — a client tool call (``tool_execution_request``), an approval or
``ask_user`` question (``tool_awaiting_approval``), a hook request
(``hook_request``).

One :class:`Asks` per kind of question and session. :meth:`Asks.ask` sends
the question (the caller says how: logged for every view, or to one view
only) and waits for its answer, bounded:

* the first answer settles it (:meth:`Asks.settle`), once: later answers
  find nothing waiting (:meth:`Asks.waiting` is None) and the caller
  refuses them with its own code;
* a question asked of one view (``asked``) is settled only from that view,
  and its wait ends at once when that view leaves (:meth:`Asks.view_left`);
* a question asked of whoever may answer remembers the views it was sent
  to (:attr:`Ask.offered`), so a question handed over to other clients
  reaches each of them once;
* ``timeout`` passing, or the waiter being cancelled, ends the wait with
  no answer (None): what that means is the caller's.

Nothing here knows a message type; the callers (the session's client tool
calls, :mod:`..features.approvals`, :mod:`..features.tool_hooks`) do.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import trio

from ..views import View

Q = TypeVar("Q")
A = TypeVar("A")


@dataclass(eq=False)
class Ask(Generic[Q, A]):
    """One question while it waits."""

    #: What was sent; replaced by its logged form (with its ``seq``) once
    #: the event log numbered it (:meth:`Asks.logged`).
    question: Q
    #: The one view that may answer (its leaving ends the wait); None:
    #: whoever the caller accepts an answer from.
    asked: View | None = None
    answer: A | None = None
    done: trio.Event = field(default_factory=trio.Event)
    #: The views it was sent to, for a question handed over.
    offered: set[View] = field(default_factory=set)


class Asks(Generic[Q, A]):
    """The questions of one kind a session waits for, by key (a call id, a
    hook id)."""

    def __init__(self) -> None:
        self._waiting: dict[str, Ask[Q, A]] = {}

    async def ask(self, key: str, question: Q, *, send: Callable[[Q], Awaitable[None] | None], timeout: float,
                  asked: View | None = None, offered: View | None = None) -> A | None:
        """Send ``question`` (``send(question)``, awaited when it returns an
        awaitable) and wait at most ``timeout`` seconds for its answer; None
        when none came (timeout, ``asked`` left, cancelled: the key is
        withdrawn however the wait ends). ``offered``: a view already sent
        it by ``send``."""
        if key in self._waiting:
            raise ValueError(f"{key!r} is asked already")
        ask: Ask[Q, A] = Ask(question, asked)
        if offered is not None:
            ask.offered.add(offered)
        self._waiting[key] = ask
        try:
            sent = send(question)
            if inspect.isawaitable(sent):
                await sent
            with trio.move_on_after(timeout):
                await ask.done.wait()
        finally:
            if self._waiting.get(key) is ask:
                del self._waiting[key]
        return ask.answer

    def waiting(self, key: str, view: View | None = None) -> Ask[Q, A] | None:
        """The question ``key`` if it still waits for an answer (from
        ``view``, when it was asked of one view only)."""
        ask = self._waiting.get(key)
        if ask is None or ask.done.is_set() or (ask.asked is not None and ask.asked is not view):
            return None
        return ask

    def settle(self, key: str, answer: A | None) -> Ask[Q, A]:
        """Answer the waiting question ``key`` (see :meth:`waiting`): the
        first answer wins, the waiter wakes with it."""
        ask = self._waiting.pop(key)
        ask.answer = answer
        ask.done.set()
        return ask

    def logged(self, key: str, question: Q) -> None:
        """The event log numbered ``question``: keep its first numbered form."""
        ask = self._waiting.get(key)
        if ask is not None and getattr(ask.question, "seq", None) is None:
            ask.question = question

    def view_left(self, view: View) -> None:
        """``view`` detached: the questions asked of it alone get no answer."""
        for ask in self._waiting.values():
            if ask.asked is view:
                ask.done.set()

    def pending(self) -> list[Ask[Q, A]]:
        """The questions still waiting, oldest first."""
        return [ask for ask in self._waiting.values() if not ask.done.is_set()]

    def keys(self) -> list[str]:
        """The keys of the questions not withdrawn yet."""
        return list(self._waiting)

    def __contains__(self, key: str) -> bool:
        return key in self._waiting
