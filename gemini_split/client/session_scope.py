"""Sessions as gemini-cli scopes them (issue 31 item 7): per project.

A session remembers the project directory it was started in: the client's
workspace as that client saw it (``SessionInfo.project``, protocol 1.4; the
server stores what the first request's ``SessionContext.workspace_dirs[0]``
said). ``--list-sessions`` lists, ``--resume N`` and ``--delete-session N``
count, and ``--resume latest`` (``-r``) and ``attach latest`` pick among the sessions of the
project the command runs in — numbered oldest first (by start), as
gemini-cli numbers them, so a new session never renumbers the old ones. A
session id (or the start of one, or a ``--session-id`` name) works from
anywhere, and wins over a number (gemini-cli's order): ``-r 42`` is the
session named ``42`` (``--session-id 42``) when there is one, else number 42.

Across machines the project is a path as each client sees it: a session
started in ``/home/me/app`` on one machine is in "another project" for a
client in ``/src/app`` on another (its id still resumes it). A server
older than 1.4 does not say where sessions were started: every session
counts then, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import msgspec

from gemini_split.errors import BadInput
from .connect import open_client
from .protocol_client import RequestFailed

if TYPE_CHECKING:
    from gemini_split.protocol import SessionInfo

    from .connect import ClientSettings
    from .protocol_client import ProtocolClient

LATEST = "latest"
#: gemini-cli's words when the project has no earlier session.
NO_SESSIONS = "No previous sessions found for this project."
#: ``attach latest`` where this project has no session to attach to.
NO_SESSION_TO_ATTACH = ("no earlier session in this project ({project}) to attach to; a session of another "
                        "project is attached to by its id: gemini-split attach SESSION_ID (--list-sessions, "
                        "run in that project's directory, lists them)")


def is_number(text: str) -> bool:
    """Whether ``text`` is a session number (not an id)."""
    return text.isdigit() and 0 < len(text) <= 6


def needs_scope(resume: str | None) -> bool:
    """Whether ``--resume`` names a session by its place in this project's
    list (``latest`` or a number) rather than by id."""
    return resume is not None and (resume == LATEST or is_number(resume))


def project_of(settings: ClientSettings) -> str:
    """This client's project directory, as sessions remember it."""
    return str(settings.tools.workspace)


def in_project(sessions: Sequence[SessionInfo], project: str) -> list[SessionInfo]:
    """The sessions started in ``project``, oldest first (gemini-cli's
    numbering); every session when the server says of none where it was
    started (a server older than 1.4)."""
    if any(s.project for s in sessions):
        sessions = [s for s in sessions if s.project == project]
    return sorted(sessions, key=lambda s: (s.created, s.id))


def pick(sessions: Sequence[SessionInfo], which: str) -> SessionInfo | None:
    """The session ``which`` (``latest`` or a number) names among
    ``sessions`` (:func:`in_project`'s order): latest is the one most
    recently updated that has an answer or is answering now (one stopped
    before its first answer is not the conversation the user was having,
    as the server's own ``latest``). None for ``latest`` when
    there is none; raises :class:`BadInput` for a number out of range, in
    gemini-cli's words."""
    if which == LATEST:
        answered = [s for s in sessions if s.turns > 0 or s.running]
        return max(answered, key=lambda s: (s.updated, s.created)) if answered else None
    index = int(which)
    if not 1 <= index <= len(sessions):
        raise BadInput(f'Invalid session identifier "{which}".\n'
                       "  Use --list-sessions to see available sessions, then use --resume {number}, "
                       "--resume {id}, or --resume latest.")
    return sessions[index - 1]


def _listing(settings: ClientSettings) -> ClientSettings:
    """``settings`` for a connection that only lists sessions: a new,
    never-prompted session (never stored; its own, so not an observer's),
    no MCP server started, no hook run."""
    tools = msgspec.structs.replace(settings.tools, mcp_servers={}, extensions=None)
    bare = msgspec.structs.replace(settings, tools=tools, loaded_settings=None)
    return bare.choosing(resume=None, new_session_id=None, attach=False, replay=None, role="driver")


@asynccontextmanager
async def listing_client(settings: ClientSettings) -> Any:
    """A connection to ``settings``' server for listing or deleting
    sessions (see :func:`_listing`)."""
    async with open_client(_listing(settings)) as client:
        yield client


async def project_sessions(client: ProtocolClient, settings: ClientSettings) -> list[SessionInfo]:
    """The caller's sessions in this project (:func:`in_project`)."""
    return in_project(await client.list_sessions(), project_of(settings))


async def resolve_resume(settings: ClientSettings, warn: Callable[[str], None]) -> ClientSettings:
    """``settings`` with ``--resume latest|N`` or ``attach latest`` turned
    into the id of that session of this project (asked of the server on a
    connection of its own); ``--resume latest`` with none: ``warn`` is told
    :data:`NO_SESSIONS` and a new session starts, as gemini-cli does. Ids
    are left as they are, and so is ``attach N`` (a ``--session-id``
    name). Raises :class:`BadInput` for a number with no session or
    ``attach latest`` with none (naming how to attach elsewhere: by id),
    and what :func:`open_client` raises."""
    resume = settings.session.resume
    attach = settings.session.attach
    if not needs_scope(resume) or (attach and resume != LATEST):
        return settings
    assert resume is not None
    from gemini_split.transport import ConnectFailed

    try:
        async with listing_client(settings) as client:
            every = await client.list_sessions()
    except RequestFailed as exc:
        raise ConnectFailed(f"cannot list the sessions to find --resume {resume}: {exc}") from exc
    if any(s.id == resume for s in every):
        return settings  # a session of that very id (a --session-id name): the id wins
    chosen = pick(in_project(every, project_of(settings)), resume)
    if chosen is None and attach:
        raise BadInput(NO_SESSION_TO_ATTACH.format(project=project_of(settings)))
    if chosen is None:
        warn(NO_SESSIONS)
        return settings.choosing(resume=None)
    return settings.choosing(resume=chosen.id)


@asynccontextmanager
async def open_resumed_client(settings: ClientSettings, warn: Callable[[str], None], **kwargs: Any) -> Any:
    """:func:`~gemini_split.client.connect.open_client` after
    :func:`resolve_resume`: the session ``--resume latest|N`` names in
    this project."""
    async with open_client(await resolve_resume(settings, warn), **kwargs) as client:
        yield client
