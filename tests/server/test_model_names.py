"""A client-chosen model name is a path at the Gemini API: only real model
names reach it, and the operator may narrow them (issue 13 §7).

End to end: the real AgentService with the real google-genai client, pointed
at the fake Gemini server, which records every request path it gets."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest
import trio

from gemini_split.protocol import Error, Finished, GenerateContentRequest, TextDelta
from gemini_split.server.config import ServerConfig
from gemini_split.server.model.gemini import GeminiModel
from gemini_split.server.model.names import (
    check_model_name,
    is_valid_model_name,
    parse_allowed_models,
)
from gemini_split.server.service import AgentService
from gemini_split.testing.fake_gemini import FakeGemini
from gemini_split.transport import ServeOptions, get_transport

from .helpers import raw_client

DEADLINE = 20
API_KEY = "test-key-model-names"

HOSTILE_NAMES = [
    "%2e%2e/%2e%2e/x",
    "../../v1/files",
    "models/../../v1/files",
    "gemini-2.5-flash/../../v1/files",
    "gemini-2.5-flash:generateContent?key=x",
    "gemini-2.5-flash#",
    "tunedModels/a/b",
    "Gemini-2.5-Flash",
    "gemini 2.5",
    "gemini-2.5-flash\n",
    "a" * 200,
    ".",
    "a..b",
    "-flash",
]


@asynccontextmanager
async def gemini_server(fake: FakeGemini, **config):
    model = GeminiModel(API_KEY, base_url=fake.url)
    service = AgentService(model, ServerConfig(model="gemini-2.5-flash", max_attempts=1, **config))
    transport = get_transport("loopback:")
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(service.run)
            address = await nursery.start(transport.serve, "loopback:", service.handle_connection, ServeOptions())
            yield address
            nursery.cancel_scope.cancel()
    finally:
        await model.aclose()


def _api_paths(fake: FakeGemini) -> list[str]:
    return [r["path"] for r in fake.requests]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_names_are_not_model_names(name):
    assert not is_valid_model_name(name)


@pytest.mark.parametrize(
    "name",
    ["gemini-2.5-flash", "gemini-1.5-flash-8b-001", "gemma-3-27b-it", "models/gemini-2.5-pro",
     "tunedModels/my-model-7", "gemini-2.0-flash-exp", "learnlm-1.5-pro-experimental"],
)
def test_real_model_names_are_accepted(name):
    assert check_model_name(name) == name


def test_the_allow_list_takes_patterns_and_ignores_the_models_prefix():
    allowed = parse_allowed_models("gemini-2.5-*, models/gemma-3-27b-it")
    assert check_model_name("models/gemini-2.5-pro", allowed) == "models/gemini-2.5-pro"
    assert check_model_name("gemma-3-27b-it", allowed) == "gemma-3-27b-it"
    with pytest.raises(ValueError) as info:
        check_model_name("gemini-1.5-pro", allowed)
    assert info.value.code == "model_not_allowed"
    # The operator's default model always passes, whatever the list says.
    assert check_model_name("scripted:x.json", allowed, default="scripted:x.json")
    with pytest.raises(ValueError):
        parse_allowed_models("gemini-2.5-flash,../x")


async def test_a_path_as_model_name_never_reaches_the_api_and_the_session_goes_on():
    with FakeGemini(api_key=API_KEY) as fake, trio.fail_after(DEADLINE):
        async with gemini_server(fake) as address, raw_client(address) as raw:
            for name in ("%2e%2e/%2e%2e/x", "../../v1/files"):
                await raw.send(GenerateContentRequest(prompt="hi", model=name))
                *_, error = await raw.receive_until(lambda m: isinstance(m, Error))  # after request_started
                assert error.code == "invalid_field" and not error.fatal
                assert "is not a model name" in error.message
            assert await trio.to_thread.run_sync(_api_paths, fake) == []
            # The session is unharmed and keeps its model.
            await raw.send(GenerateContentRequest(prompt="still here?"))
            seen = await raw.receive_until(lambda m: isinstance(m, (Finished, Error)))
            assert isinstance(seen[-1], Finished), seen[-1]
            assert "still here?" in "".join(m.content for m in seen if isinstance(m, TextDelta))
            assert await trio.to_thread.run_sync(_api_paths, fake) == [
                "/v1/models/gemini-2.5-flash:streamGenerateContent"
            ]


async def test_the_operator_restricts_models_with_a_clear_code():
    with FakeGemini(api_key=API_KEY) as fake, trio.fail_after(DEADLINE):
        async with gemini_server(fake, allowed_models=("gemini-2.5-pro",)) as address, raw_client(address) as raw:
            await raw.send(GenerateContentRequest(prompt="hi", model="gemini-1.5-pro"))
            *_, error = await raw.receive_until(lambda m: isinstance(m, Error))  # after request_started
            assert error.code == "model_not_allowed" and "gemini-2.5-pro" in error.message
            await raw.send(GenerateContentRequest(prompt="hi", model="models/gemini-2.5-pro"))
            seen = await raw.receive_until(lambda m: isinstance(m, (Finished, Error)))
            assert isinstance(seen[-1], Finished), seen[-1]
            assert await trio.to_thread.run_sync(_api_paths, fake) == [
                "/v1/models/gemini-2.5-pro:streamGenerateContent"
            ]
