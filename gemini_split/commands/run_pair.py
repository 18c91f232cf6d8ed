"""``gemini-split pair``: a one-time link that signs a browser in to a
``serve --web`` server as the caller's user (protocol ``pair``), and the
management of paired browsers (``--list``, ``--revoke``)."""

from __future__ import annotations

import argparse
import time

import trio

from gemini_split.app import embedded_service_for, hold_embedded, resolve_client_settings
from gemini_split.client.connect import open_client
from gemini_split.client.protocol_client import RequestFailed
from gemini_split.commands.options_from_args import client_options
from gemini_split.commands.run_sessions import printable
from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus
from gemini_split.protocol import PairedBrowsers, PairedLink
from gemini_split.transport import ConnectFailed, TransportError
from gemini_split.web.link import link_for, loopback_note, qr_text


def run_pair_command(args: argparse.Namespace, env: Environment) -> ExitStatus:
    options = client_options(args)
    settings = resolve_client_settings(options, env)
    if settings.endpoint.server is None:
        env.warn("gemini-split pair: pairing is for a server: give --server ADDR|PROFILE "
                 "(one started with serve --web)")
        return ExitStatus.USAGE
    embedded = embedded_service_for(options, env, settings)
    action = "list" if args.pair_list else "revoke" if args.pair_revoke else "link"

    async def main() -> PairedLink | PairedBrowsers | None:
        try:
            async with hold_embedded(settings, embedded) as held, open_client(held) as client:
                return await client.pair(action, args.pair_revoke)
        except RequestFailed as exc:
            env.warn(f"gemini-split pair: {exc} ({exc.code})")
        except (ConnectFailed, TransportError) as exc:
            env.warn(f"gemini-split pair: {exc}")
        return None

    reply = trio.run(main)
    if reply is None:
        return ExitStatus.ERROR
    out = env.stdout
    if isinstance(reply, PairedLink):
        url = link_for(settings.endpoint.server, reply)
        minutes = max(1, round((reply.expires / 1000 - time.time()) / 60))
        if not args.no_qr:
            out.write(qr_text(url))
        out.write(f"Open this link in the browser to sign in (once, within {minutes} minutes):\n{url}\n")
        out.flush()
        note = loopback_note(url)
        if note is not None:
            env.warn(note)
        return ExitStatus.SUCCESS
    if action == "revoke":
        env.warn(f"Signed out {'every paired browser' if args.pair_revoke == 'all' else args.pair_revoke}.")
    if not reply.browsers:
        env.warn("No paired browsers.")
        return ExitStatus.SUCCESS
    out.write(f"{'ID':<10} {'PAIRED':<16} {'LAST USED':<16} BROWSER\n")
    for b in reply.browsers:
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(b.created / 1000))
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(b.last_used / 1000)) if b.last_used else "-"
        out.write(f"{printable(b.id):<10} {created:<16} {used:<16} {printable(b.user_agent)}\n")
    out.flush()
    return ExitStatus.SUCCESS
