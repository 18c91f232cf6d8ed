"""The server side of the transport conformance suite.

An echo handler with a few commands, so every transport is checked against
the same behaviour whether its server runs in this process (loopback,
WebSocket) or in a subprocess (stdio: ``python -m tests.conformance.echo``).

Commands (a message that is exactly one of these):

* ``close`` – the server closes the connection.
* ``burst:N`` – the server sends ``0`` … ``N-1``, one message each.
* ``big:N`` – the server sends one message of ``N`` characters.
* anything else is sent back unchanged.

A message over the server's size limit is answered ``error:too_large`` if the
connection survives it.
"""

from __future__ import annotations

from gemini_split.transport import ConnectionBroken, MessageStream, MessageTooLarge


async def echo_handler(stream: MessageStream) -> None:
    while True:
        try:
            message = await stream.receive()
        except MessageTooLarge:
            try:
                await stream.send("error:too_large")
            except ConnectionBroken:
                return
            continue
        except ConnectionBroken:
            return
        if message == "close":
            await stream.aclose("asked to close")
            return
        if message.startswith("burst:"):
            for i in range(int(message[6:])):
                await stream.send(str(i))
        elif message.startswith("big:"):
            await stream.send("x" * int(message[4:]))
        else:
            await stream.send(message)


if __name__ == "__main__":
    # The stdio case's server: ``python -m tests.conformance.echo
    # [--max-message-size N]`` serves echo_handler on this process's own
    # stdin/stdout through the stdio transport, and exits when stdin closes.
    import argparse
    import functools

    import trio

    from gemini_split.protocol import DEFAULT_MAX_MESSAGE_SIZE
    from gemini_split.transport import ServeOptions, get_transport

    parser = argparse.ArgumentParser(prog="python -m tests.conformance.echo")
    parser.add_argument("--max-message-size", type=int, default=DEFAULT_MAX_MESSAGE_SIZE)
    args = parser.parse_args()
    options = ServeOptions(max_message_size=args.max_message_size)
    trio.run(functools.partial(get_transport("stdio:-").serve, "stdio:-", echo_handler, options))
