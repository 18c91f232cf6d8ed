"""The client's Connection against a server that breaks the rules.

A raw server on the real loopback transport sends what a real server never
would; the real ProtocolClient must refuse it (an ``error`` back, naming the
message), keep it from the UI, and go on."""

from __future__ import annotations

import trio

from gemini_split.protocol import (
    Connected,
    Error,
    Finished,
    GenerateContentRequest,
    RequestStarted,
    TextDelta,
    decode,
    encode,
)
from gemini_split.stamping import stamp
from gemini_split.transport import ServeOptions, get_transport

from .helpers import connected_client


async def _misbehaving_server(stream, script, received):
    """Handshake, then answer the first request with ``script(request_id)``
    and record everything the client sends."""
    hello = decode(await stream.receive())
    received.append(hello)
    await stream.send(encode(stamp(Connected(session_id="s-raw"))))
    while True:
        message = decode(await stream.receive())
        received.append(message)
        if isinstance(message, GenerateContentRequest):
            # 1.2: a request is announced to the client before its events.
            await stream.send(encode(stamp(RequestStarted(request_id=message.id, prompt=message.prompt))))
            for event in script(message.id):
                await stream.send(encode(stamp(event)))


async def _run(tmp_path, script):
    received: list = []
    events: list = []
    transport = get_transport("loopback:")
    async with trio.open_nursery() as nursery:
        address = await nursery.start(
            transport.serve, "loopback:", lambda s: _misbehaving_server(s, script, received), ServeOptions()
        )
        async with connected_client(address, tmp_path, events=events) as client:
            outcome = await client.run_turn("hi")
            with trio.fail_after(5):
                while not any(isinstance(m, Error) for m in received):
                    await trio.sleep(0.01)
            await trio.sleep(0.05)  # let any further refusal arrive
        nursery.cancel_scope.cancel()
    return outcome, events, received


async def test_events_of_a_request_the_client_never_made_are_refused_not_shown(tmp_path):
    stray = stamp(TextDelta(request_id="not-mine", content="spoofed", seq=1))

    def script(rid):
        return [stray, TextDelta(request_id=rid, content="real", seq=2), Finished(request_id=rid, seq=3)]

    outcome, events, received = await _run(tmp_path, script)
    assert outcome.finished is not None
    assert [e.content for e in events if isinstance(e, TextDelta)] == ["real"]
    (refusal,) = [m for m in received if isinstance(m, Error)]
    assert refusal.code == "unexpected_message" and refusal.in_reply_to == stray.id
    assert "not-mine" in refusal.message


async def test_a_second_finished_is_refused_and_the_first_one_counts(tmp_path):
    def script(rid):
        return [Finished(request_id=rid, seq=1, turns=1), Finished(request_id=rid, seq=2, turns=99)]

    outcome, events, received = await _run(tmp_path, script)
    assert outcome.finished.turns == 1
    assert [e.turns for e in events if isinstance(e, Finished)] == [1]
    (refusal,) = [m for m in received if isinstance(m, Error)]
    assert "no request is running" in refusal.message
