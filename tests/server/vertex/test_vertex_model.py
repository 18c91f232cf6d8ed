"""Vertex AI through the real google-auth and google-genai, against local
fakes only: the fake Gemini server (Vertex paths, ``Authorization: Bearer``
checked) and a fake OAuth token endpoint issuing short-lived tokens."""

from __future__ import annotations

import time

import pytest
import trio

from gemini_split.server.model.gemini import GeminiModel
from gemini_split.server.model.base import ModelAuthError, ModelError, ModelRequest, TextChunk
from gemini_split.server.model.credentials import AccessTokens, resolve_model_auth
from gemini_split.testing.fake_gemini import FakeGemini
from gemini_split.testing.fake_google_auth import FakeGoogleAuth


def request(text: str = "hi") -> ModelRequest:
    return ModelRequest(model="gemini-2.5-flash", contents=[{"role": "user", "parts": [{"text": text}]}])


async def answer(model: GeminiModel, text: str = "hi") -> str:
    return "".join([c.text async for c in model.stream(request(text)) if isinstance(c, TextChunk)])


def vertex_model(tmp_path, auth, fake, *, kind: str = "service_account", **env) -> GeminiModel:
    path = (auth.service_account_file(tmp_path / "sa.json") if kind == "service_account"
            else auth.authorized_user_file(tmp_path / "adc.json"))
    environ = dict(fake.vertex_env(), GOOGLE_APPLICATION_CREDENTIALS=str(path), HOME=str(tmp_path), **env)
    return GeminiModel(auth=resolve_model_auth(environ))


@pytest.mark.parametrize("kind", ["service_account", "authorized_user"])
async def test_a_turn_goes_to_the_vertex_path_with_a_bearer_token_from_the_credentials(tmp_path, kind):
    with FakeGoogleAuth() as auth, FakeGemini([{"text": "hello from vertex", "chunks": 3}],
                                              access_token=auth.valid) as fake:
        model = vertex_model(tmp_path, auth, fake, kind=kind)
        assert await answer(model) == "hello from vertex"
        [sent] = fake.requests
    assert sent["path"] == ("/v1beta1/projects/fake-project/locations/us-central1/publishers/google/models/"
                            "gemini-2.5-flash:streamGenerateContent")
    assert sent["auth"] == "ok" and sent["headers"]["authorization"].startswith("Bearer ya29.fake-")
    assert "x-goog-api-key" not in sent["headers"] and auth.token_requests == 1


async def test_location_global_and_the_project_from_the_environment(tmp_path):
    with FakeGoogleAuth() as auth, FakeGemini(access_token=auth.valid) as fake:
        model = vertex_model(tmp_path, auth, fake, GOOGLE_CLOUD_LOCATION="global")
        model2 = vertex_model(tmp_path, auth, fake, GOOGLE_CLOUD_PROJECT="other-project")
        assert await answer(model, "a") == "Echo: a"
        assert await answer(model2, "b") == "Echo: b"
        first, second = fake.requests
    assert (first["project"], first["location"]) == ("fake-project", "global")
    assert (second["project"], second["location"]) == ("other-project", "us-central1")


async def test_express_mode_sends_the_api_key_to_the_publisher_path(tmp_path):
    with FakeGemini(api_key="express-key") as fake:
        environ = {"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_API_KEY": "express-key",
                   "GOOGLE_VERTEX_BASE_URL": fake.url, "HOME": str(tmp_path)}
        auth = resolve_model_auth(environ)
        assert auth.describe() == "Vertex AI express mode, API key from $GOOGLE_API_KEY"
        assert await answer(GeminiModel(auth=auth)) == "Echo: hi"
        [sent] = fake.requests
    assert sent["path"] == "/v1beta1/publishers/google/models/gemini-2.5-flash:streamGenerateContent"
    assert sent["auth"] == "ok"


async def test_the_token_is_refreshed_before_it_expires_across_a_long_session(tmp_path):
    # Tokens live 2 s; a quarter of that before expiry a new one is fetched.
    with FakeGoogleAuth(lifetime=2) as auth, FakeGemini(access_token=auth.valid) as fake:
        model = vertex_model(tmp_path, auth, fake)
        for i in range(8):
            assert await answer(model, f"turn {i}") == f"Echo: turn {i}"
            await trio.sleep(0.5)
        statuses = [r["status"] for r in fake.requests]
    assert statuses == [200] * 8  # never an expired token
    assert 2 <= auth.token_requests <= 4  # refreshed, but not per request


@pytest.mark.timeout(60)
async def test_a_hundred_concurrent_sessions_share_one_refresh(tmp_path):
    # Tokens live 8 s (refreshed after 6 s): long enough for a burst on a loaded machine.
    with FakeGoogleAuth(lifetime=8) as auth, FakeGemini(access_token=auth.valid) as fake:
        model = vertex_model(tmp_path, auth, fake)
        auth.delay = 0.3  # every session arrives while the first refresh runs

        async def burst(tag: str) -> None:
            async with trio.open_nursery() as nursery:
                for i in range(100):
                    nursery.start_soon(answer, model, f"{tag}{i}")

        await burst("a")
        assert auth.token_requests == 1
        await trio.sleep(6.1)  # past the refresh point (8 s - 2 s)
        await burst("b")
        assert auth.token_requests == 2
        assert len(fake.requests) == 200 and all(r["status"] == 200 for r in fake.requests)


async def test_a_slow_token_endpoint_does_not_delay_another_sessions_stream(tmp_path):
    long = [{"text": "x" * 300, "chunks": 300, "chunk_delay": 0.01}]
    with FakeGoogleAuth(lifetime=2) as auth, FakeGemini(long, access_token=auth.valid) as fake:
        model = vertex_model(tmp_path, auth, fake)
        arrivals: list[float] = []
        waited: list[float] = []
        streaming_started = trio.Event()

        async def streaming() -> None:
            async for chunk in model.stream(request("long")):
                if isinstance(chunk, TextChunk):
                    arrivals.append(trio.current_time())
                    streaming_started.set()

        async def needs_a_new_token() -> None:
            await streaming_started.wait()  # its token was fetched before: due for refresh 1.5 s later
            await trio.sleep(1.6)
            auth.delay = 1.0
            start = trio.current_time()
            assert await answer(model, "late") == "Echo: late"
            waited.append((start, trio.current_time()))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(streaming)
            nursery.start_soon(needs_a_new_token)
    (start, end), = waited
    assert end - start >= 0.9  # it did wait for the slow endpoint
    during = [b - a for a, b in zip(arrivals, arrivals[1:]) if b >= start and a <= end]  # gaps touching the wait
    assert during, "the long stream should still be streaming while the token was fetched"
    # chunks come every 10 ms; the refresh (a worker thread) stalls none of them by more than 50 ms more
    assert max(during) < 0.06, max(during)


@pytest.mark.parametrize("mode, words", [
    ("down", "temporarily_unavailable: the fake is down"),
    ("garbage", "unusable"),
])
async def test_a_failing_token_endpoint_is_a_clear_error_naming_the_credential_source(tmp_path, mode, words):
    with FakeGoogleAuth() as auth, FakeGemini(access_token=auth.valid) as fake:
        model = vertex_model(tmp_path, auth, fake)
        auth.mode = mode
        with pytest.raises(ModelError) as caught:
            await answer(model)
        assert fake.requests == []  # nothing was sent without a token
    message = str(caught.value)
    assert "cannot get an access token for service account runner@fake-project.iam.gserviceaccount.com" in message
    assert str(tmp_path / "sa.json") in message and words in message
    assert caught.value.retryable  # the agent's backoff tries again


async def test_an_unreachable_token_endpoint_is_a_retryable_error(tmp_path):
    with FakeGoogleAuth() as auth, FakeGemini(access_token=auth.valid) as fake:
        model = vertex_model(tmp_path, auth, fake)
    # both fakes are gone now: nothing listens at the token_uri
    with pytest.raises(ModelError) as caught:
        await answer(model)
    assert "unreachable" in str(caught.value) and caught.value.retryable


async def test_a_token_endpoint_that_never_answers_times_out(tmp_path):
    with FakeGoogleAuth() as auth:
        credentials = resolve_model_auth({"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": "p",
                                          "GOOGLE_APPLICATION_CREDENTIALS": str(
                                              auth.service_account_file(tmp_path / "sa.json"))}).credentials
        tokens = AccessTokens(credentials, "service account key sa.json", timeout=0.5)
        auth.delay = 3
        start = time.monotonic()
        with pytest.raises(ModelError, match="did not answer within 0.5 s"):
            await tokens.header()
        assert time.monotonic() - start < 1.5


async def test_a_refused_token_names_the_principal_and_the_project(tmp_path):
    with FakeGoogleAuth() as auth, FakeGemini(access_token=lambda token: False) as fake:
        model = vertex_model(tmp_path, auth, fake)
        with pytest.raises(ModelAuthError) as caught:
            await answer(model)
    message = str(caught.value)
    assert message.startswith("Vertex AI refused service account runner@fake-project.iam.gserviceaccount.com")
    assert "for project fake-project (401)" in message and "roles/aiplatform.user" in message


async def test_a_403_from_vertex_names_the_principal_and_the_project(tmp_path):
    denied = [{"error": {"code": 403, "message": "Permission 'aiplatform.endpoints.predict' denied"}}]
    with FakeGoogleAuth() as auth, FakeGemini(denied, access_token=auth.valid) as fake:
        model = vertex_model(tmp_path, auth, fake, kind="authorized_user")
        with pytest.raises(ModelAuthError) as caught:
            await answer(model)
    message = str(caught.value)
    assert f"Vertex AI refused the account (user credentials from {tmp_path / 'adc.json'}) for project fake-project" \
        in message
    assert "aiplatform.endpoints.predict" in message


async def test_a_refresh_token_the_endpoint_refuses_is_an_auth_error(tmp_path):
    with FakeGoogleAuth() as auth, FakeGemini(access_token=auth.valid) as fake:
        model = vertex_model(tmp_path, auth, fake, kind="authorized_user")
        auth.refresh_token = "revoked"
        with pytest.raises(ModelAuthError, match="the token endpoint refused .*invalid_grant"):
            await answer(model)
