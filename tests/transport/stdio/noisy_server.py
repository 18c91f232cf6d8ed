"""A stdio server whose handler makes every kind of stray output a real
server might: ``print``, a logger set up on sys.stdout, a raw write to fd 1,
a child process writing to its stdout, a read of stdin. None of it may reach
the protocol on stdout.

Run as ``python -m tests.transport.stdio.noisy_server``; it echoes each message, and
reports on stderr the address ``serve`` started with and that ``serve``
returned.
"""

from __future__ import annotations

import logging
import os
import sys

import trio

from gemini_split.transport import ConnectionBroken, MessageStream, ServeOptions, get_transport

log = logging.getLogger("noisy")


async def noisy_echo(stream: MessageStream) -> None:
    while True:
        try:
            message = await stream.receive()
        except ConnectionBroken:
            return
        print(f"stray print {message}", flush=True)
        log.warning("stray log %s", message)
        os.write(1, b"stray write to fd 1\n")
        await trio.run_process(["sh", "-c", "echo stray child output"])
        assert sys.stdin.read() == ""  # stdin is not ours to read any more
        await stream.send(message)


async def main() -> None:
    logging.basicConfig(stream=sys.stdout, format="%(message)s")
    async with trio.open_nursery() as nursery:
        address = await nursery.start(
            get_transport("stdio:-").serve, "stdio:", noisy_echo, ServeOptions()
        )
        print(f"started at {address}", file=sys.stderr, flush=True)
    print("serve returned", file=sys.stderr, flush=True)


if __name__ == "__main__":
    trio.run(main)
