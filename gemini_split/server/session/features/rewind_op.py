"""The ``rewind`` op (1.4): a session's conversation taken back to before a
prompt (the rewind :class:`~.rewind.Timeline` says where each sits), its
server-side files with it when asked, saved and said to every view; with
``repropose_call_id`` (``/restore``), a request that proposes that call
again and goes on from its answer."""

from __future__ import annotations

import logging
from typing import Any

import trio
from msgspec.structs import replace

from gemini_split.protocol import Error, ErrorCode, RequestStarted, Rewind, RewindPoint, Rewound, quote

from ..chain import AgentRun, CallTool, answer_calls, function_response
from ...model.base import FunctionCallChunk
from ..views import View
from .assembly import ChainBody
from .compression import estimated_tokens
from .rewind import Rewinding, RewindRefused

log = logging.getLogger(__name__)


def points(session: Any) -> tuple[RewindPoint, ...]:
    """The prompts ``rewind`` can go back to in ``session``, oldest first."""
    journal = getattr(session.tool_host, "edits", None)
    timeline = session.timeline
    marks = timeline.points(session.history)
    out = []
    for i, (mark, text) in enumerate(marks):
        files = 0
        if journal is not None:  # the step: this prompt's request and those up to the next prompt
            upto = marks[i + 1][0].seq if i + 1 < len(marks) else None
            files = journal.count([rid for rid in timeline.requests_since(mark.seq or 0)
                                   if upto is None or timeline.requests[rid] < upto])
        out.append(RewindPoint(seq=mark.seq or 0, request_id=mark.request_id, prompt=text, files=files))
    return tuple(out)


async def rewind(session: Any, message: Rewind, view: View) -> None:
    """``rewind``: refused (a reply to the asker), or the history taken
    back, saved, and said to every view (``rewound``); with
    ``repropose_call_id``, the request that proposes that call again."""
    repropose = message.repropose_call_id is not None
    request_id = message.id if repropose else None

    def refuse(code: ErrorCode, text: str) -> None:
        view.send_direct(Error(code=code.value, message=text, in_reply_to=message.id, request_id=request_id))

    if message.session_id != session.id:
        # The same answer as for any session the caller cannot reach.
        refuse(ErrorCode.UNKNOWN_SESSION, f"no session {quote(message.session_id)} to rewind here (a "
               "connection rewinds the session it is attached to)")
        return
    if session.busy or session.rewinding:
        refuse(ErrorCode.BUSY, "a request is running: a session cannot be rewound until it ends "
               "(cancel it or wait)")
        return
    timeline = session.timeline
    try:
        if repropose:
            done = timeline.repropose(session.history, message.before_seq, message.repropose_call_id or "")
        else:
            done = timeline.rewind(session.history, message.before_seq)
    except RewindRefused as exc:
        refuse(ErrorCode.INVALID_REQUEST, str(exc))
        return
    if message.revert_files and session.tool_host is None:
        refuse(ErrorCode.INVALID_REQUEST, "revert_files: this session's tools run on the client, which "
               "puts its own files back")
        return
    session.rewinding = True
    try:
        files = await trio.to_thread.run_sync(_revert_files, session, done) if message.revert_files else ()
        if done.site is None:
            hide_from = done.mark.seq or message.before_seq
        else:  # the call's own events on; nothing of the turn before it
            hide_from = done.site.seq or session.log.last_seq + 1
        timeline.apply(session.history, done, hide_from=hide_from)
        session.turns = len(timeline.marks)
        session.last_prompt_tokens = estimated_tokens(session.history)
        log.info("session %s: rewound to before seq %d by %s%s", session.id, message.before_seq, view.label,
                 f" (re-proposing {message.repropose_call_id})" if repropose else "")
        await session.saving.save(request_id)
    finally:
        session.rewinding = False
    rewound = Rewound(before_seq=message.before_seq, prompt=done.prompt, points=len(timeline.marks),
                      by=view.label, files=tuple(files))
    if not repropose:
        session.emit_nowait(replace(rewound, in_reply_to=message.id))
        return
    session.emit_nowait(RequestStarted(request_id=message.id, prompt="/restore", client=view.label))
    assert done.site is not None
    told = replace(rewound, request_id=message.id, repropose_call_id=message.repropose_call_id)
    part_index = done.site.part

    async def begin(run: AgentRun, call_tool: CallTool) -> None:
        await session.emit(told)
        await _answer_proposed(run, part_index, call_tool)

    session.start(message.id, ChainBody(session, message.id, begin, counts_turn=False), view)


def _revert_files(session: Any, done: Rewinding) -> list[Any]:
    """Put back, newest first, what the server's edit tools changed from
    the prompt rewound to on (or from the re-proposed call on)."""
    journal = getattr(session.tool_host, "edits", None)
    if journal is None:
        return []
    timeline = session.timeline
    if done.site is None:
        return journal.revert(timeline.requests_since(done.mark.seq or 0))
    call_id = next(cid for cid, site in timeline.calls.items() if site is done.site)
    return journal.revert(timeline.requests_since(done.site.request_seq or 0), from_call=call_id)


async def _answer_proposed(run: AgentRun, part_index: int, call_tool: CallTool) -> None:
    """Answer the calls of the model turn that ends the history: the one at
    ``part_index`` of its parts runs again (through ``call_tool``, as any
    call), the others are answered as not run again."""
    parts = run.history[-1].get("parts") or []
    calls, target = [], None
    for index, part in enumerate(parts):
        call = part.get("function_call") if isinstance(part, dict) else None
        if isinstance(call, dict):
            if index == part_index:
                target = len(calls)
            calls.append(FunctionCallChunk(name=str(call.get("name", "")), args=dict(call.get("args") or {}),
                                           call_id=call.get("id")))
    not_run = {"error": {"code": "not_run", "message": "not run again: the session was restored to "
                         "a checkpoint of another call of this turn"}}
    await answer_calls(run, calls, call_tool,
                       answered=[None if i == target else function_response(c, not_run) for i, c in enumerate(calls)])
