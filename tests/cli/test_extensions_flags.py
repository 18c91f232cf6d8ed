"""gemini-cli's ``-e/--extensions NAME…`` (only these extensions for the
run, whatever the enablement file says; ``none``: none) and
``-l/--list-extensions`` (the installed ones, and exit), on gemini-cli's
extension files. What the model was told is read from the fake Gemini
server's recorded requests; embedded, and against a real ``serve``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY as SERVE_KEY
from tests.e2e.test_serve_e2e import daemon
from tests.inprocess import cli

pytestmark = pytest.mark.timeout(60)

API_KEY = "test-key-123"
RULES = {"alpha": "ALPHA-RULE", "beta": "BETA-RULE", "gamma": "GAMMA-RULE"}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """alpha and beta enabled; gamma disabled everywhere by the enablement file."""
    home = tmp_path / "home"
    for name, rule in RULES.items():
        ext = home / "extensions" / name
        ext.mkdir(parents=True)
        (ext / "gemini-extension.json").write_text(json.dumps({"name": name, "version": "1.0.0",
                                                               "contextFileName": "RULES.md"}))
        (ext / "RULES.md").write_text(rule + "\n")
    (home / "extensions" / "extension-enablement.json").write_text(json.dumps({"gamma": {"overrides": ["!/*"]}}))
    return home


def run(args: list[str], home: Path, fake: FakeGemini | None = None, key: str = API_KEY):
    work = home.parent / "work"
    work.mkdir(exist_ok=True)
    environ = {"HOME": str(home.parent), "GEMINI_SPLIT_HOME": str(home), "PATH": os.environ["PATH"]}
    if fake is not None:
        environ.update(GEMINI_API_KEY=key, GOOGLE_GEMINI_BASE_URL=fake.url)
    return cli(args, environ=environ, cwd=work)


def rules_sent(fake: FakeGemini) -> list[str]:
    """The extensions whose context file the last model request carried."""
    body = json.dumps(fake.requests[-1]["body"])
    return [name for name, rule in RULES.items() if rule in body]


def test_without_e_the_enabled_extensions_are_used(home):
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        done = run(["-p", "hi"], home, fake)
    assert done.returncode == 0, done.stderr
    assert rules_sent(fake) == ["alpha", "beta"]


@pytest.mark.parametrize("flags, used", [
    (["-e", "beta"], ["beta"]),
    (["-e", "GAMMA"], ["gamma"]),  # any case; a disabled one too, as gemini-cli's override does
    (["-e", "alpha,gamma"], ["alpha", "gamma"]),
    (["--extensions", "alpha", "-e", "beta"], ["alpha", "beta"]),
    (["-e", "none"], []),
    (["-e", ""], []),
])
def test_e_uses_exactly_the_extensions_named(home, flags, used):
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        done = run([*flags, "-p", "hi"], home, fake)
    assert done.returncode == 0, done.stderr
    assert rules_sent(fake) == used


def test_an_extension_that_is_not_installed_is_refused_before_any_request(home, tmp_path):
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        done = run(["-e", "beta,nosuch", "-p", "hi"], home, fake)
        bare = tmp_path / "bare"
        bare.mkdir()
        nothing = run(["-e", "nosuch", "-p", "hi"], bare, fake)  # no extensions folder at all
    assert done.returncode == 2
    assert done.stderr.strip() == ("gemini-split: Extension not found: nosuch (-e/--extensions; installed: alpha, "
                                   "beta, gamma; gemini-split -l lists them)")
    assert nothing.returncode == 2 and "Extension not found: nosuch" in nothing.stderr and "installed: none" in nothing.stderr
    assert fake.requests == []


def test_l_lists_every_installed_extension_as_gemini_cli_and_exits_without_a_key(home, tmp_path):
    done = run(["-l"], home)
    assert (done.returncode, done.stdout, done.stderr) == (0, "Installed extensions:\n- alpha\n- beta\n- gamma\n", "")
    assert run(["--list-extensions", "-e", "beta"], home).stdout.count("\n- ") == 3  # all, as gemini-cli
    bare = tmp_path / "bare"
    bare.mkdir()
    assert run(["-l"], bare).stdout == "Installed extensions:\n"


def test_e_works_the_same_against_serve(home, tmp_path):
    with FakeGemini(script=[{"text": "ok"}], api_key=SERVE_KEY) as fake, \
            daemon(tmp_path, fake) as (_proc, address):
        done = run(["--server", address, "-e", "gamma", "-p", "hi"], home, fake, key=SERVE_KEY)
    assert done.returncode == 0, done.stderr
    assert rules_sent(fake) == ["gamma"]
