"""Hostile messages against a real server over a real WebSocket (issue 13 §4,
§12): each gets a short ``error`` reply and the connection goes on."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager

import pytest
import trio

from gemini_split.protocol import Error, Finished, GenerateContentRequest
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.testing.service import open_test_service

from tests.server.helpers import raw_client

DEADLINE = 20


@asynccontextmanager
async def serving_websocket():
    async with open_test_service(ScriptedModel([{"text": "still here"}]), address="ws://127.0.0.1:0") as (_, address):
        yield address


async def _answered_then_usable(text: str) -> Error:
    """Send ``text`` after the handshake; return the error reply, after
    checking that the same connection still runs a request."""
    with trio.fail_after(DEADLINE):
        async with serving_websocket() as address, raw_client(address) as raw:
            await raw.stream.send(text)
            reply = await raw.receive()
            await raw.send(GenerateContentRequest(prompt="are you there?"))
            await raw.receive_until(lambda m: isinstance(m, Finished))
    assert isinstance(reply, Error) and not reply.fatal
    return reply


async def test_an_unknown_type_of_a_megabyte_gets_a_short_reply():
    reply = await _answered_then_usable(json.dumps({"type": "t" * 1_000_000, "id": "x", "timestamp": 1}))
    assert reply.code == "unknown_type"
    assert len(reply.message) < 200 and reply.message.startswith("unknown message type 'ttt")


async def test_an_unanswerable_id_of_a_megabyte_is_not_echoed_back():
    text = json.dumps({"type": "tool_decision", "id": "x", "timestamp": 1, "call_id": "c" * 1_000_000, "approved": True})
    reply = await _answered_then_usable(text)
    assert reply.code == "unknown_call" and len(reply.message) < 200


@pytest.mark.parametrize("depth", [5_000, 50_000])
async def test_json_nested_thousands_deep_gets_invalid_json(depth):
    text = '{"type": "cancel", "id": "x", "timestamp": 1, "extra": ' + "[" * depth + "]" * depth + "}"
    reply = await _answered_then_usable(text)
    assert reply.code == "invalid_json"


async def test_a_lone_surrogate_in_a_message_id_gets_an_error_reply():
    reply = await _answered_then_usable('{"type": "get_state", "id": "\\ud800", "timestamp": 1}')
    assert reply.code == "invalid_json" and "surrogate" in reply.message
