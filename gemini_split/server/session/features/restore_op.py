"""The ``restore`` op (1.4): the checkpoints a server took of a
``--tools server`` session's workspace, listed, planned or restored by its
tool host (which owns them: ``ToolHost.restore``). The conversation is the
``rewind`` op's: a client restores the files here, then rewinds."""

from __future__ import annotations

from typing import Any

import msgspec

from gemini_split.protocol import Error, ErrorCode, Restore


async def answer_restore(session: Any, view: Any, message: Restore) -> None:
    """Answer ``message`` on ``view`` (never logged: one client's reply)."""
    refusal = _refusal(session, view, message)
    if refusal is not None:
        code, text = refusal
        view.send_direct(Error(code=code.value, message=text, in_reply_to=message.id))
        return
    reply = await session.tool_host.restore(message.checkpoint_id, message.apply)
    view.send_direct(_in_reply(reply, message.id))


def _refusal(session: Any, view: Any, message: Restore) -> tuple[ErrorCode, str] | None:
    if not view.may_act:
        return ErrorCode.FORBIDDEN, "an observer cannot restore files"
    if message.session_id != session.id:
        return ErrorCode.UNKNOWN_SESSION, "restore names this connection's own session only"
    host = session.tool_host
    if host is None:
        return (ErrorCode.INVALID_REQUEST, "this session's tools run on its client: its checkpoints are there "
                "(/restore, gemini-split restore)")
    if not hasattr(host, "restore"):
        return ErrorCode.INVALID_REQUEST, "this server's tools keep no checkpoints"
    if message.apply and session.busy:
        return ErrorCode.BUSY, "a request is running (its tools may be writing): restore when it has finished"
    return None


def _in_reply(reply: Any, message_id: str) -> Any:
    return msgspec.structs.replace(reply, in_reply_to=message_id)
