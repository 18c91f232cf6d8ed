"""``read_many_files`` (issue 31 item 6) through the whole program: the
fake Gemini server asks for it, and what the model got back is asserted —
in embedded mode and against ``gemini-split serve`` (the tool runs on the
client, on the client's files)."""

from __future__ import annotations

import json
import os

import pytest

from gemini_split.tools.builtin.read_many import MAX_FILES
from gemini_split.testing.fake_gemini import FakeGemini

from tests.cli.test_oneshot_cli import API_KEY, run_cli
from tests.e2e.test_serve_e2e import API_KEY as DAEMON_KEY, client, daemon


def _answers(fake) -> list[str]:
    """What each read_many_files call returned to the model, as text."""
    return [json.dumps(p["functionResponse"]["response"]) for r in fake.requests
            for p in r["body"]["contents"][-1].get("parts", []) if "functionResponse" in p]


def _call(**args) -> list[dict]:
    return [{"function_calls": [{"name": "read_many_files", "args": args}]}, {"text": "read them"}]


def _project(root):
    (root / "src" / "sub").mkdir(parents=True)
    (root / "src" / "a.py").write_text("print('alpha')\n")
    (root / "src" / "sub" / "c.py").write_text("print('charlie')\n")
    (root / "src" / "skip.py").write_text("print('ignored by git')\n")
    (root / "src" / "data.bin").write_bytes(b"\x00\x01\x02binary")
    (root / "node_modules" / "dep").mkdir(parents=True)
    (root / "node_modules" / "dep" / "index.py").write_text("print('a dependency')\n")
    (root / ".gitignore").write_text("src/skip.py\n")
    (root.parent / "secret.py").write_text("print('CANARY outside')\n")
    os.symlink(root.parent / "secret.py", root / "src" / "link.py")


def test_read_many_files_concatenates_the_matching_text_files_within_the_rules(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    _project(project)
    with FakeGemini(script=_call(include=["**/*.py", "src/data.bin"]), api_key=API_KEY) as fake:
        result = run_cli(["-p", "read the python files"], cwd=project, fake=fake)
    assert result.returncode == 0, result.stderr
    (answer,) = _answers(fake)
    assert "--- src/a.py ---" in answer and "alpha" in answer
    assert "--- src/sub/c.py ---" in answer and "charlie" in answer
    assert "--- End of content ---" in answer
    assert "ignored by git" not in answer  # .gitignore
    assert "a dependency" not in answer  # default excludes
    assert "CANARY" not in answer  # a symlink out of the workspace
    assert "binary" in answer and "--- src/data.bin ---" not in answer  # skipped, and said


def test_read_many_files_honours_exclude_recursive_and_the_ignore_switches(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    _project(project)
    script = (_call(include=["src/"], exclude=["**/sub/**"])[:1]
              + _call(include=["src/*.py"], recursive=False,
                      file_filtering_options={"respect_git_ignore": False})[:1]
              + _call(include=["../secret.py"])[:1] + [{"text": "done"}])
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = run_cli(["-p", "read"], cwd=project, fake=fake)
    assert result.returncode == 0, result.stderr
    excluded, not_ignored, outside = _answers(fake)
    assert "alpha" in excluded and "charlie" not in excluded
    assert "ignored by git" in not_ignored and "charlie" not in not_ignored
    assert "outside_workspace" in outside and "CANARY" not in outside


def test_read_many_files_output_is_bounded_and_says_what_it_left_out(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for i in range(MAX_FILES + 20):
        (project / f"f{i:03}.txt").write_text(f"file number {i}\n")
    with FakeGemini(script=_call(include=["*.txt"]), api_key=API_KEY) as fake:
        result = run_cli(["-p", "read all"], cwd=project, fake=fake)
    assert result.returncode == 0, result.stderr
    (answer,) = _answers(fake)
    assert answer.count("--- f") == MAX_FILES
    assert "20 more matching files not read" in answer


@pytest.mark.slow
def test_read_many_files_against_serve_reads_the_clients_files(tmp_path):
    project = tmp_path / "client"
    project.mkdir()
    _project(project)
    with FakeGemini(script=_call(include=["src/**/*.py"]), api_key=DAEMON_KEY) as fake, \
            daemon(tmp_path, fake) as (_, address):
        result = client(["--server", address, "-p", "read the python files"], cwd=project)
    assert result.returncode == 0, result.stderr
    (answer,) = _answers(fake)
    assert "alpha" in answer and "charlie" in answer and "CANARY" not in answer
