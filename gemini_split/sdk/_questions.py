"""Approval questions, answered from Python.

A tool call that needs approval (the policy says ``ask``: an edit or a
shell command in ``default`` mode, a call of a server-run tool promoted to
the attached clients…) becomes an :class:`Approval` in the events of the
prompt that made it (and of every open :meth:`Session.events` stream).
The caller answers it with :meth:`Approval.approve` or
:meth:`Approval.deny`, from any thread; the first answer counts.

Answer it before asking the prompt for its next event: moving on with a
question unanswered denies it (a program that does not look at questions
never holds a turn up). A session's event stream does not deny what it
passes over: a question there may be another attached client's to answer.
A question whose call was decided elsewhere, or whose request ended, is
withdrawn: answering it then does nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import trio

from gemini_split.errors import ToolFailed
from gemini_split.tools.approval import Answer, ApprovalRequest
from gemini_split.tools.base import Tool

__all__ = ["Approval", "Questions"]


class Approval:
    """A tool call waiting for your decision (see the module's docstring).

    ``tool`` is the tool's name and ``kind`` its kind (``read``, ``edit``,
    ``execute``, ``network``); ``args`` the model's arguments;
    ``description`` exactly what will happen (the command, the path, a
    diff); ``reason`` why the policy asks; ``executes_later`` set when the
    call edits a file that runs code later (a git hook, ``.envrc``…);
    ``agent`` the sub-agent that asks ("" for the main agent)."""

    __match_args__ = ("tool", "args")

    def __init__(self, request: ApprovalRequest, token: trio.lowlevel.TrioToken):
        self.call_id = request.call_id
        self.tool: str = request.tool.name
        self.kind: str = request.tool.kind.value
        self.args: dict[str, Any] = dict(request.args)
        self.description = request.description
        self.reason = request.reason
        self.executes_later = request.executes_later
        self.agent = request.agent
        #: Whether "always" can be offered (what it would allow, in
        #: ``--allowed-tools`` syntax), else None.
        self.always_scope = request.always_scope
        self._token = token
        self._lock = threading.Lock()
        self._answer: Answer | None = None
        self._message: str | None = None
        self._over = False
        self._answered = trio.Event()

    def __repr__(self) -> str:
        return f"Approval({self.tool!r}, {self.args!r}, decision={self.decision!r})"

    def approve(self, *, always: bool = False) -> None:
        """Let the call run; ``always``: and calls like it for the rest of
        the session (what :attr:`always_scope` says; a plain yes where it is
        None)."""
        self._settle(Answer.ALWAYS if always and self.always_scope else Answer.YES, None)

    def deny(self, message: str | None = None) -> None:
        """Refuse the call; ``message`` goes to the model with the refusal
        (say what to do instead)."""
        self._settle(Answer.NO, message.strip() if message and message.strip() else None)

    @property
    def decision(self) -> str | None:
        """``"approve"``, ``"approve_always"``, ``"deny"``, or None while
        unanswered."""
        answer = self._answer
        return None if answer is None else {Answer.YES: "approve", Answer.ALWAYS: "approve_always"}.get(
            answer, "deny")

    @property
    def answered(self) -> bool:
        return self._answer is not None

    def _settle(self, answer: Answer, message: str | None) -> None:
        with self._lock:
            if self._answer is not None or self._over:
                return
            self._answer, self._message = answer, message
        try:
            self._token.run_sync_soon(self._answered.set)
        except trio.RunFinishedError:
            pass  # the client is closed: nobody waits

    async def wait(self) -> Answer:
        """(On the session's loop) the answer, once given. Raises
        :class:`ToolFailed` for a denial with a message (the executor sends
        its words to the model)."""
        await self._answered.wait()
        if self._answer is Answer.NO and self._message:
            raise ToolFailed("refused", f"the user declined to run {self.tool} and said: {self._message[:2000]}",
                             "do what the user said instead")
        assert self._answer is not None
        return self._answer

    def withdraw(self) -> None:
        """The question is over (answered, decided elsewhere, its request
        ended): later answers do nothing."""
        with self._lock:
            self._over = True


class Questions:
    """A session's :class:`~gemini_split.tools.approval.Asker`: each
    question becomes an :class:`Approval` handed to ``deliver`` (which
    returns how many listeners took it) and waits for its answer. A
    question about a call of this client's own tools that nobody is
    listening for is denied; one about a server-run call waits (another
    attached client may answer it)."""

    def __init__(self, deliver: Callable[[Approval], int]):
        self._deliver = deliver

    async def ask(self, request: ApprovalRequest) -> Answer:
        approval = Approval(request, trio.lowlevel.current_trio_token())
        try:
            if not self._deliver(approval) and isinstance(request.tool, Tool):
                return Answer.NO
            return await approval.wait()
        finally:
            approval.withdraw()
