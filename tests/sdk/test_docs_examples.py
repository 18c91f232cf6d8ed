"""Every Python example of docs/sdk.md runs, as a reader would run it: in
a workspace of its own, with the fake Gemini server behind the key in the
environment. The ``<!-- example: {...} -->`` comment above an example
says what the model answers (``script``, the fake server's turns; echo
without one), the files the workspace starts with (``files``), what must
be printed (``expect``) and created (``creates``), and whether it needs a
``serve`` (``serve``: its ``ws://127.0.0.1:8080`` is the real one's
address and ``GEMINI_SERVER_TOKEN`` its token)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini
from tests.cli.daemon.conftest import daemon_pids, wait_gone

from .conftest import API_KEY
from .test_remote import TOKEN, serving

DOC = Path(__file__).resolve().parents[2] / "docs" / "sdk.md"
EXAMPLE = re.compile(r"(?:<!-- example: (\{.*?\}) -->\n)?```python\n(.*?)\n```", re.DOTALL)


def examples() -> list[tuple[int, dict, str]]:
    text = DOC.read_text()
    found = []
    for match in EXAMPLE.finditer(text):
        line = text.count("\n", 0, match.start(2))
        found.append((line, json.loads(match.group(1) or "{}"), match.group(2)))
    return found


def test_the_page_has_examples_and_each_says_what_it_prints():
    found = examples()
    assert len(found) >= 8
    assert [line for line, meta, _ in found if not meta.get("expect")] == []


@pytest.fixture
def short_home():
    """GEMINI_SPLIT_HOME for the example (short: the local daemon's socket
    lives there), and no daemon left running for it."""
    path = tempfile.mkdtemp(prefix="gsx-")
    yield path
    for pid in daemon_pids(path):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        wait_gone(pid, 5)
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("line", "meta", "code"), examples(), ids=[f"sdk.md:{line}" for line, _, _ in examples()])
def test_the_example_runs_and_prints_what_it_says(line, meta, code, tmp_path, short_home, monkeypatch, capsys):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    for name, content in meta.get("files", {}).items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(content)
    for name in [n for n in os.environ if n.startswith(("GEMINI_", "GOOGLE_"))]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(workspace)
    with FakeGemini(meta.get("script"), api_key=API_KEY) as fake:
        monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.url)
        monkeypatch.setenv("GEMINI_SPLIT_HOME", short_home)
        if meta.get("serve"):
            with serving(tmp_path, fake) as address:
                monkeypatch.setenv("GEMINI_SERVER_TOKEN", TOKEN)
                monkeypatch.delenv("GEMINI_API_KEY")  # the server holds the key
                _run(code.replace("ws://127.0.0.1:8080", address), line)
        else:
            _run(code, line)
        left = fake.turns_remaining
    out = capsys.readouterr().out
    for expected in meta["expect"]:
        assert expected in out, f"docs/sdk.md:{line} printed:\n{out}"
    for name in meta.get("creates", []):
        assert (workspace / name).exists(), f"docs/sdk.md:{line} did not create {name}"
    assert left == 0, f"docs/sdk.md:{line}: the model's script was not played out"


def _run(code: str, line: int) -> None:
    """Run the example as a script (``__name__ == "__main__"``), its lines
    numbered as in docs/sdk.md."""
    exec(compile("\n" * line + code, str(DOC), "exec"), {"__name__": "__main__"})  # noqa: S102
