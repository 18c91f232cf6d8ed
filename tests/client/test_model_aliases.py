"""gemini-cli's model aliases resolve to real model names (issue 31 item 3):
``-m flash`` requested ``models/flash`` before, which the API does not have.

Real ``gemini-split`` processes against the fake Gemini server; the request
path shows the model the API was asked for. The expected names are what
gemini-cli 0.61 requested on the same fake server with an API key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import daemon

pytestmark = pytest.mark.timeout(90)

KEY = "daemon-key"  # test_serve_e2e's daemon() gives serve this key


def run(tmp_path: Path, fake: FakeGemini, *args: str, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(HOME=str(tmp_path), GEMINI_SPLIT_HOME=str(tmp_path / "home"), GEMINI_API_KEY=KEY,
               GOOGLE_GEMINI_BASE_URL=fake.url, GEMINI_CLI_TRUST_WORKSPACE="true", **extra)
    return subprocess.run([sys.executable, "-m", "gemini_split", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def models_requested(fake: FakeGemini) -> list[str]:
    return [r["path"].split("/models/")[1].split(":")[0] for r in fake.requests]


@pytest.mark.parametrize("alias, model", [
    ("flash", "gemini-3.8-flash"),
    ("pro", "gemini-3.1-pro-preview"),
    ("flash-lite", "gemini-3.5-flash-lite"),
    ("auto", "gemini-3.1-pro-preview"),
    ("auto-gemini-2.5", "gemini-2.5-pro"),
    ("gemini-2.5-flash", "gemini-2.5-flash"),
])
def test_an_alias_given_with_dash_m_requests_the_model_it_stands_for(tmp_path, alias, model):
    with FakeGemini(script=[{"text": "ok"}], api_key=KEY) as fake:
        done = run(tmp_path, fake, "-m", alias, "-p", "hi")
    assert done.returncode == 0, done.stderr
    assert models_requested(fake) == [model]


def test_gemini_model_and_model_name_take_aliases_too(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "settings.json").write_text('{"model": {"name": "pro"}}')
    with FakeGemini(script=[{"text": "a"}, {"text": "b"}], api_key=KEY) as fake:
        assert run(tmp_path, fake, "-p", "hi").returncode == 0
        assert run(tmp_path, fake, "-p", "hi", GEMINI_MODEL="flash-lite").returncode == 0
    assert models_requested(fake) == ["gemini-3.1-pro-preview", "gemini-3.5-flash-lite"]


def test_model_configs_aliases_from_settings_name_their_model(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "settings.json").write_text(json.dumps({"modelConfigs": {"customAliases": {
        "cheap": {"modelConfig": {"model": "gemini-2.5-flash-lite"}},
        "cheap-cold": {"extends": "cheap", "modelConfig": {"generateContentConfig": {"temperature": 0}}},
        "loop-a": {"extends": "loop-b"}, "loop-b": {"extends": "loop-a"},
    }}}))
    with FakeGemini(script=[{"text": "ok"}], api_key=KEY) as fake:
        done = run(tmp_path, fake, "-m", "cheap-cold", "-p", "hi")
        assert done.returncode == 0, done.stderr
        looped = run(tmp_path, fake, "-m", "loop-a", "-p", "hi")
    assert models_requested(fake) == ["gemini-2.5-flash-lite"]
    assert looped.returncode == 42
    assert "model alias 'loop-a' (modelConfigs) names no model" in looped.stderr


def test_an_unknown_alias_is_refused_before_any_request(tmp_path):
    with FakeGemini(script=[{"text": "ok"}], api_key=KEY) as fake:
        done = run(tmp_path, fake, "-m", "flsh", "-p", "hi")
    assert done.returncode == 42
    assert "unknown model 'flsh'" in done.stderr
    assert "auto, pro, flash, flash-lite" in done.stderr
    assert not fake.requests


def test_a_name_far_from_every_alias_passes_unchanged(tmp_path):
    with FakeGemini(script=[{"text": "ok"}], api_key=KEY) as fake:
        done = run(tmp_path, fake, "-m", "learnlm-experimental", "-p", "hi")
    assert done.returncode == 0, done.stderr
    assert models_requested(fake) == ["learnlm-experimental"]


def test_aliases_resolve_for_serve_and_for_its_clients(tmp_path):
    client_dir = tmp_path / "client"
    client_dir.mkdir()
    with FakeGemini(script=[{"text": "default"}, {"text": "chosen"}], api_key=KEY) as fake:
        with daemon(tmp_path, fake, "--model", "flash-lite") as (_, address):
            env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
            env.update(HOME=str(tmp_path), GEMINI_SPLIT_HOME=str(tmp_path / "c"))
            for extra in ([], ["-m", "pro"]):
                done = subprocess.run([sys.executable, "-m", "gemini_split", "--server", address, *extra, "-p", "hi"],
                                      cwd=client_dir, env=env, capture_output=True, text=True, timeout=60,
                                      stdin=subprocess.DEVNULL)
                assert done.returncode == 0, done.stderr
    assert models_requested(fake) == ["gemini-3.5-flash-lite", "gemini-3.1-pro-preview"]
