"""``/rewind`` and ``--rewind-to``, the part that is no UI: the steps a
session can go back to, and going back — the conversation on the server
(protocol 1.4 ``rewind``), the files where the agent's edit tools ran.

gemini-cli's ``/rewind`` offers, for an earlier prompt: rewind the
conversation and revert the code changes, the conversation only, the code
changes only, or nothing. Code changes are only what the AI's edit tools
did (``tools/edit_journal.py``): on this client for its own tools, on the
server for a ``--tools server`` session (which ``rewind.revert_files`` asks
it to put back). The REPL (``ui/repl/commands/rewind.py``) and the script path
(``commands/run_rewind.py``) both go through here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gemini_split.protocol import FileRevert, RewindPoint, Rewound

from .protocol_client import ProtocolClient


@dataclass
class Step:
    """An earlier prompt: its number (1: the session's first), its rewind
    point, and how many files the agent's edit tools changed in its step
    (from it to the next prompt)."""

    number: int
    point: RewindPoint
    files: int


@dataclass
class Rewinding:
    """What a rewind did: the server's ``rewound`` (None when only files
    were put back) and what happened to each file."""

    rewound: Rewound | None = None
    files: list[FileRevert] = field(default_factory=list)


def runs_on_server(client: ProtocolClient) -> bool:
    """Whether the session's tools run on the server (its edits are put
    back there)."""
    return client.tool_choice is not None


async def steps(client: ProtocolClient) -> list[Step]:
    """The session's prompts, oldest first, with the files each step
    changed. Raises :class:`~gemini_split.client.failures.RequestFailed`."""
    points = list((await client.get_history()).points)
    journal = _journal(client)
    out = []
    for i, point in enumerate(points):
        if runs_on_server(client) or journal is None:
            files = point.files
        else:
            from gemini_split.tools.edit_journal import between  # lazy_imports.EDGES

            upto = points[i + 1].seq if i + 1 < len(points) else None
            files = journal.count(between(point.seq, upto, _ids(points[i:i + 1])))
        out.append(Step(i + 1, point, files))
    return out


def files_since(client: ProtocolClient, chosen: list[Step], step: Step) -> list[Any]:
    """What putting back the files changed from ``step`` on would do here
    (this client's own edits: ``PlannedFile`` each, conflicts marked);
    empty for a session whose tools run on the server. Raises
    :class:`~gemini_split.tools.edit_journal.RevertElsewhere` when those
    edits were made in another workspace."""
    journal = _journal(client)
    if journal is None or runs_on_server(client):
        return []
    from gemini_split.tools.edit_journal import since_seq  # lazy_imports.EDGES

    later = _ids([s.point for s in chosen if s.number >= step.number])
    return journal.plan(since_seq(step.point.seq, later), client.executor.workspace)


async def rewind(client: ProtocolClient, step: Step, *, conversation: bool, files: bool,
                 planned: list[Any] | None = None, overwrite: frozenset[str] = frozenset()) -> Rewinding:
    """Go back to before ``step``: the conversation (on the server), the
    files (``planned``, from :func:`files_since`, on this client — a file in
    conflict only when in ``overwrite``; or on the server), or both. The
    conversation goes first, so that a refused rewind (``busy``…) puts no
    file back. Raises :class:`~gemini_split.client.failures.RequestFailed`."""
    done = Rewinding()
    server_files = files and runs_on_server(client)
    if conversation or server_files:
        if not conversation:
            raise ValueError("the files of a session whose tools run on the server go back with its conversation")
        done.rewound = await client.rewind(step.point.seq, revert_files=server_files)
        done.files = list(done.rewound.files)
    if files and not server_files and planned:
        journal = _journal(client)
        assert journal is not None
        import trio

        outcomes = await trio.to_thread.run_sync(
            lambda: journal.revert(planned, client.executor.workspace, overwrite=overwrite))
        done.files = [FileRevert(path=o.path, action=o.action, reason=o.reason) for o in outcomes]
    return done


def _journal(client: ProtocolClient) -> Any:
    directory = client.executor.edits_dir
    if directory is None:
        return None
    from gemini_split.tools.edit_journal import EditJournal  # lazy_imports.EDGES

    return EditJournal(directory)


def _ids(points: list[RewindPoint]) -> frozenset[str]:
    return frozenset(p.request_id for p in points)
