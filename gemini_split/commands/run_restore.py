"""``gemini-split restore [ID]``: the checkpoints of this workspace (or,
with ``--tools server --resume ID``, of that session's workspace on the
server), or going back to one (see :mod:`gemini_split.client.restoring`).

Restoring files is offline (no model, no credentials), as gemini-cli's
``/restore`` is; ``--propose-again`` adds what the REPL's ``/restore ID``
does next, the conversation rewound to the call and the call proposed
again, which is a model request.

Exit statuses: 0 done (or nothing to do), 1 the files could not be
restored or the conversation not rewound, 2 it would have to ask at no
terminal (``--yes`` answers), 42 no such checkpoint, 130 the user said no.
"""

from __future__ import annotations

import argparse
from typing import Any

import trio

from gemini_split.app import embedded_service_for, hold_embedded, resolve_client_settings
from gemini_split.tools.checkpoints import CheckpointError
from gemini_split.client.connect import ClientSettings, open_client
from gemini_split.client.protocol_client import RequestFailed
from gemini_split.client.restoring import (
    Entry,
    hand_edited_sentence,
    plan_lines,
    proposing_again,
    request_seq,
    source_for,
)
from gemini_split.commands.options_from_args import client_options
from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus
from gemini_split.transport import ConnectFailed
from gemini_split.ui.oneshot import make_renderer
from gemini_split.ui.safe_text import visible


class _Stop(Exception):
    def __init__(self, status: ExitStatus, line: str = ""):
        super().__init__(line)
        self.status = status


def run_restore_command(args: argparse.Namespace, env: Environment) -> ExitStatus:
    options = client_options(args)
    settings = resolve_client_settings(options, env)
    on_server = settings.tools.run_on == "server"
    if on_server and settings.session.resume is None:
        env.warn("gemini-split: restore --tools server: say whose checkpoints with --resume ID (the session)")
        return ExitStatus.USAGE
    connects = on_server or (args.checkpoint is not None and args.propose_again)
    embedded = embedded_service_for(options, env, settings) if connects else None
    try:
        return trio.run(_restore, args, env, settings, embedded)
    except _Stop as stop:
        if str(stop):
            env.warn(f"gemini-split: restore: {stop}")
        return stop.status
    except ConnectFailed as exc:
        env.warn(f"gemini-split: restore: {exc}")
        return ExitStatus.ERROR


async def _restore(args: argparse.Namespace, env: Environment, settings: ClientSettings, embedded: Any) -> ExitStatus:
    shown = _OwnRequest(make_renderer("text", env.stdout, env.stderr))
    if settings.tools.run_on == "server":
        async with hold_embedded(settings, embedded) as held, open_client(held, on_event=shown.on_event) as client:
            shown.client = client
            entry = await _files(args, env, source_for(settings.tools, client))
            if entry is not None and args.propose_again:
                return await _repropose(env, client, entry, shown)
        _say_how_to_propose_again(env, entry, args)
        return ExitStatus.SUCCESS
    entry = await _files(args, env, _source(settings))
    if entry is None or not args.propose_again:
        _say_how_to_propose_again(env, entry, args)
        return ExitStatus.SUCCESS
    if entry.session_id is None:
        raise _Stop(ExitStatus.ERROR, "the conversation was not rewound: the checkpoint names no session")
    settings = settings.choosing(resume=entry.session_id)
    async with hold_embedded(settings, embedded) as held, open_client(held, on_event=shown.on_event) as client:
        shown.client = client
        return await _repropose(env, client, entry, shown)


def _say_how_to_propose_again(env: Environment, entry: Entry | None, args: argparse.Namespace) -> None:
    """After the files alone (and not when asked for them alone): the
    conversation was left as it is, and how to have the edit proposed again."""
    if entry is None or args.files_only or entry.session_id is None:
        return
    env.warn(visible(f"gemini-split: the conversation was left as it is; to rewind it to that edit and have "
                     f"the edit proposed again, add --propose-again (or run /restore {entry.id} in session "
                     f"{entry.session_id})", newlines=False))


class _OwnRequest:
    """The one-shot renderer, shown this client's own request only (the
    re-proposal), as ``-p`` shows its answer."""

    def __init__(self, renderer: Any):
        self.renderer = renderer
        self.client: Any = None

    async def on_event(self, event: Any) -> None:
        if self.client is not None and event.request_id is not None \
                and event.request_id == self.client.turn_request_id:
            await self.renderer.on_event(event)


def _source(settings: ClientSettings) -> Any:
    try:
        return source_for(settings.tools)
    except CheckpointError as exc:
        raise _Stop(ExitStatus.ERROR, str(exc)) from None


async def _files(args: argparse.Namespace, env: Environment, source: Any) -> Entry | None:
    """List (None), or put the files of ``args.checkpoint`` back and return its entry."""
    try:
        if args.checkpoint is None:
            for entry in await source.entries():
                print(visible(entry.line(), newlines=False), file=env.stdout)
            return None
        plan = await source.plan(args.checkpoint)
    except CheckpointError as exc:
        unknown = str(exc).startswith("no checkpoint")
        raise _Stop(ExitStatus.BAD_INPUT if unknown else ExitStatus.ERROR, str(exc)) from None
    if not plan.changes:
        env.warn(f"gemini-split: the files are as they were at {plan.entry.id}")
        return plan.entry
    env.warn(visible("\n".join([f"Restoring {plan.entry.id} changes:", *plan_lines(plan)])))
    warning = hand_edited_sentence(plan)
    if warning:
        env.warn(visible(warning))
    if not args.yes:
        await _ask(env)
    try:
        await source.apply(plan)
    except CheckpointError as exc:
        raise _Stop(ExitStatus.ERROR, f"the files were not restored: {exc}") from None
    env.warn(f"gemini-split: restored {len(plan.changes)} file{'s' if len(plan.changes) != 1 else ''}")
    return plan.entry


async def _ask(env: Environment) -> None:
    if not env.stdin_isatty:
        raise _Stop(ExitStatus.USAGE, "not restoring without asking: add --yes (a script), or run it at a terminal")
    env.stderr.write("Restore these files? [y/N] ")
    env.stderr.flush()
    answer = (await trio.to_thread.run_sync(env.stdin.readline, abandon_on_cancel=True)).strip().lower()
    if answer not in ("y", "yes"):
        raise _Stop(ExitStatus.INTERRUPTED, "nothing was restored")


async def _repropose(env: Environment, client: Any, entry: Entry, shown: _OwnRequest) -> ExitStatus:
    """Rewind the session to the checkpoint's tool call and have it proposed
    again (approved as in a one-shot run), shown as ``-p`` shows a turn."""
    try:
        start = proposing_again(client, entry, await request_seq(client, entry))
        shown.renderer.start(session_id=client.connected.session_id, model=client.connected.model, prompt="")
        outcome = await start()
    except (CheckpointError, RequestFailed) as exc:
        raise _Stop(ExitStatus.ERROR, f"the files were restored, the conversation was not rewound: {exc} "
                                      "(--files-only restores the files alone)") from None
    if outcome.error is not None:
        return shown.renderer.finish(error_code=outcome.error.code, error_message=outcome.error.message)
    return shown.renderer.finish()
