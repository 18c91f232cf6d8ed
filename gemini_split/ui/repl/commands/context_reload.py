"""Reading the settings and the session's context again, for the REPL's
``/skills reload``, ``/agents reload`` (and their ``enable`` /
``disable``) and ``/memory refresh``: what the next prompt carries is
rebuilt (context files, skills, sub-agents).

A remote agent's card is read over the network then (bounded by
``remote_agents.CARD_TIMEOUT`` a card), so all of it is read in a worker
thread, on copies of the settings and with its warnings kept for the end:
the REPL's loop goes on meanwhile (server events, Ctrl-C), and a reload
abandoned half-way changes nothing, even when its thread still finishes
later.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import msgspec
import trio
from rich.text import Text

from gemini_split.app import attach_context
from gemini_split.errors import ConfigurationError
from gemini_split.userfiles.settings import load_settings

from ..command_context import CommandContext

if TYPE_CHECKING:
    from gemini_split.client.connect import ClientSettings
    from gemini_split.environment import Environment


#: Seconds a reload runs before the REPL says what it waits for.
SLOW_NOTE = 0.5


def reload_context(settings: ClientSettings, env: Environment, *, settings_too: bool = True) -> None:
    """Read the settings files (``settings_too``; the folder's trust kept)
    and the context again into ``settings``. Raises
    :class:`ConfigurationError` (a settings file or ``GEMINI_SYSTEM_MD``
    that cannot be read); ``settings`` may then be half changed."""
    old = settings.loaded_settings
    if settings_too and old is not None:
        settings.loaded_settings = load_settings(env, trust=old.trusted)
    attach_context(settings, env, interactive=True)


async def reload_in_worker(repl: CommandContext, *, settings_too: bool = True) -> bool:
    """:func:`reload_context` for the REPL's settings, in a worker thread
    (see the module docstring); the new settings and context are taken
    only once all of it was read. False: Ctrl-C abandoned it, and nothing
    changed. Raises :class:`ConfigurationError` (nothing changed)."""

    async def slow_note() -> None:
        await trio.sleep(SLOW_NOTE)
        repl.console.print(Text("Reading the settings and definitions again (a remote agent's card)… "
                                "Ctrl-C abandons", style="dim"))

    async def read() -> tuple[ClientSettings, list[str]] | ConfigurationError:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow_note)
            try:
                return await trio.to_thread.run_sync(_read_again, repl.settings, repl.env, settings_too,
                                                     abandon_on_cancel=True)
            except ConfigurationError as exc:  # said by the caller, as before (not a connection's panel)
                return exc
            finally:
                nursery.cancel_scope.cancel()

    outcome = await repl.interruptible(read())
    if outcome is None:
        return False
    if isinstance(outcome, ConfigurationError):
        raise outcome
    fresh, warnings = outcome
    repl.settings.loaded_settings, repl.settings.tools, repl.settings.context = (
        fresh.loaded_settings, fresh.tools, fresh.context)
    for line in warnings:
        repl.env.warn(line)
    return True


def _read_again(settings: ClientSettings, env: Environment,
                settings_too: bool) -> tuple[ClientSettings, list[str]]:
    """:func:`reload_context` on a copy of ``settings`` (the copy is
    returned) with ``env``'s warnings collected (returned) instead of
    printed: safe in a worker thread."""
    fresh = msgspec.structs.replace(settings)
    quiet = copy.copy(env)
    warnings: list[str] = []
    quiet.warn = warnings.append  # type: ignore[method-assign]
    reload_context(fresh, quiet, settings_too=settings_too)
    return fresh, warnings
