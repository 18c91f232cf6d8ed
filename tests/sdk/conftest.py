"""The SDK's tests: the real client against the fake Gemini server, in a
workspace of the test's own (HOME is the test's too: tests/conftest.py)."""

from __future__ import annotations

import os

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

API_KEY = "sdk-test-key"


def clean_environ(**extra: str) -> dict[str, str]:
    """This process's environment without any Gemini or Google setting,
    plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GEMINI_", "GOOGLE_")) and k not in ("XDG_RUNTIME_DIR", "CI")}
    env.update(extra)
    return env


@pytest.fixture
def fake():
    with FakeGemini(api_key=API_KEY) as server:
        yield server


@pytest.fixture
def environ(fake) -> dict[str, str]:
    """A program's environment: a key for the fake Gemini server."""
    return clean_environ(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url)


def last_user_text(request: dict) -> str:
    """The text of the last user turn the model was sent."""
    for content in reversed(request["body"]["contents"]):
        texts = [p["text"] for p in content.get("parts", []) if "text" in p and not p.get("thought")
                 and not p["text"].startswith("<session_context>")]
        if content.get("role", "user") == "user" and texts:
            return "\n".join(texts)
    return ""


def function_responses(request: dict) -> list[dict]:
    """The functionResponse parts of the last turn the model was sent."""
    parts = request["body"]["contents"][-1].get("parts", [])
    return [p["functionResponse"] for p in parts if "functionResponse" in p]


def declarations(request: dict) -> dict[str, dict]:
    """The function declarations the model was sent, by name."""
    return {d["name"]: d for tool in request["body"].get("tools", []) for d in tool.get("functionDeclarations", [])}
