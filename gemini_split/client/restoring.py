"""Going back to a checkpoint, wherever the files are: the one flow of
``/restore`` and ``gemini-split restore`` (list, plan, ask, restore,
re-propose), over the checkpoints this client took
(:mod:`.checkpoints`) or, for a ``--tools server`` session, the server's
(the ``restore`` op, 1.4).

A front end asks :func:`source_for` for a source, lists its
:class:`Entry`s, gets a :class:`Plan` for one, shows :func:`plan_lines`
and :func:`hand_edited_sentence`, asks, then :meth:`apply`\\ s it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from gemini_split.tools.checkpoints import Checkpoint, CheckpointError, Checkpoints, for_settings, shown_path
from .failures import RequestFailed


class Entry(msgspec.Struct, frozen=True, kw_only=True):
    """One checkpoint, as a list shows it."""

    id: str
    tool: str
    call_id: str
    file: str = ""
    request_id: str | None = None
    #: The ``seq`` of its prompt's ``request_started`` (None: not known here).
    request_seq: int | None = None
    session_id: str | None = None

    def line(self) -> str:
        return f"{self.id}  {self.tool}{' ' + self.file if self.file else ''}"


class Change(msgspec.Struct, frozen=True):
    #: Relative to the workspace root when inside it.
    path: str
    #: ``restore``, ``recreate`` or ``delete``.
    action: str
    by_hand: bool = False


class Plan(msgspec.Struct, frozen=True):
    entry: Entry
    changes: tuple[Change, ...]
    #: What the source needs to apply it.
    token: Any = None


class LocalSource:
    """The checkpoints this client's own tools took."""

    def __init__(self, checkpoints: Checkpoints, root: Path):
        self.checkpoints = checkpoints
        self.root = root

    async def entries(self) -> list[Entry]:
        return [_entry(c) for c in self.checkpoints.list()]

    async def plan(self, checkpoint_id: str) -> Plan:
        plan = await self.checkpoints.plan(checkpoint_id)
        return Plan(_entry(plan.checkpoint), tuple(Change(shown_path(c.path, self.root), c.action, c.by_hand)
                                                   for c in plan.changes), plan)

    async def apply(self, plan: Plan) -> None:
        await self.checkpoints.restore(plan.token)


class ServerSource:
    """The checkpoints a server took of a ``--tools server`` session (the
    ``restore`` op); ``client`` is the session's ``ProtocolClient``."""

    def __init__(self, client: Any):
        self.client = client

    async def entries(self) -> list[Entry]:
        reply = await self._restore(None, apply=False)
        session = self.client.connected.session_id
        return [_info_entry(i, session) for i in reply.checkpoints]

    async def plan(self, checkpoint_id: str) -> Plan:
        reply = await self._restore(checkpoint_id, apply=False)
        (info,) = reply.checkpoints
        return Plan(_info_entry(info, self.client.connected.session_id),
                    tuple(Change(c.path, c.action, c.by_hand) for c in reply.changes), checkpoint_id)

    async def apply(self, plan: Plan) -> None:
        await self._restore(plan.token, apply=True)

    async def _restore(self, checkpoint_id: str | None, *, apply: bool) -> Any:
        try:
            return await self.client.restore_checkpoint(checkpoint_id, apply=apply)
        except RequestFailed as exc:
            raise CheckpointError(str(exc)) from None


def source_for(tools: Any, client: Any = None) -> LocalSource | ServerSource:
    """Where the checkpoints of a session with these ``ToolSettings`` are:
    the server's (``run_on == "server"``, through ``client``) or ours.
    Raises :class:`CheckpointError` (checkpointing off here)."""
    if tools.run_on == "server":
        if client is None:
            raise CheckpointError("the checkpoints of a --tools server session are on the server: connect to it")
        return ServerSource(client)
    return LocalSource(for_settings(tools), tools.workspace)


def plan_lines(plan: Plan) -> list[str]:
    """What a restore will change, one line per file, for a question."""
    words = {"restore": "put back", "recreate": "recreated (deleted since)", "delete": "deleted (created since)"}
    hand = "  ← changed by hand since the checkpoint"
    return [f"  {c.path}: {words.get(c.action, c.action)}{hand if c.by_hand else ''}" for c in plan.changes]


def hand_edited_sentence(plan: Plan) -> str:
    """The sentence naming the files changed by hand since ("" if none)."""
    names = [c.path for c in plan.changes if c.by_hand]
    if not names:
        return ""
    listed = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    return (f"{listed} {'was' if len(names) == 1 else 'were'} changed since the checkpoint by something other "
            "than the agent's edit tools (by hand, a shell command or an MCP tool); restoring overwrites that.")


def _entry(checkpoint: Checkpoint) -> Entry:
    args = checkpoint.tool_call.args
    target = args.get("file_path") if isinstance(args, dict) else None
    return Entry(id=checkpoint.id, tool=checkpoint.tool_call.name, call_id=checkpoint.tool_call.call_id,
                 file=target if isinstance(target, str) else "", request_id=checkpoint.request_id,
                 request_seq=checkpoint.request_seq, session_id=checkpoint.session_id)


def _info_entry(info: Any, session_id: str) -> Entry:
    return Entry(id=info.id, tool=info.tool, call_id=info.call_id, file=info.file, request_id=info.request_id,
                 session_id=session_id)


async def request_seq(client: Any, entry: Entry) -> int:
    """The ``seq`` of the ``request_started`` of the prompt that made the
    checkpoint's call: from the record (this client's checkpoints), else
    from the session's rewind points (``history.points``, 1.4). Raises
    :class:`CheckpointError` when the conversation no longer has it."""
    connected = client.connected
    if connected is None or entry.session_id != connected.session_id:
        raise CheckpointError(f"the checkpoint is of session {entry.session_id}, not of this one")
    if entry.request_seq is not None:
        return entry.request_seq
    try:
        history = await client.get_history()
    except RequestFailed as exc:
        raise CheckpointError(str(exc)) from None
    for point in getattr(history, "points", ()):
        if point.request_id == entry.request_id:
            return point.seq
    raise CheckpointError("the conversation no longer has the prompt that made that call (rewound since?)")


def proposing_again(client: Any, entry: Entry, seq: int) -> Any:
    """The coroutine function that rewinds the session to the checkpoint's
    call and runs the request proposing it again (its outcome); it goes
    through whatever approval the session's tools have. Raises
    :class:`CheckpointError` when this client or server cannot."""
    restore_call = getattr(client, "restore_call", None)
    if restore_call is None:
        raise CheckpointError("this client cannot rewind a conversation yet")

    async def start() -> Any:
        return await restore_call(seq, entry.call_id)

    return start
