"""``@file.md`` imports in GEMINI.md reach the model (issue 31 item 2), as
gemini-cli's memory import processor resolves them: nested, relative to the
importing file, never outside the project, cycles and depth bombs stopped,
code left alone. Real ``gemini-split -p`` runs against the fake Gemini
server; the request's system instruction shows what the model received."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import daemon

pytestmark = pytest.mark.timeout(90)

KEY = "daemon-key"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    work = tmp_path / "repo"
    (work / ".git").mkdir(parents=True)
    (work / "docs").mkdir()
    return work


def ask(tmp_path: Path, project: Path, fake: FakeGemini, *args: str, server: str | None = None
        ) -> tuple[subprocess.CompletedProcess, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(HOME=str(tmp_path), GEMINI_SPLIT_HOME=str(tmp_path / "home"), GEMINI_CLI_TRUST_WORKSPACE="true")
    if server is None:
        env.update(GEMINI_API_KEY=KEY, GOOGLE_GEMINI_BASE_URL=fake.url)
    where = ["--server", server] if server else []
    done = subprocess.run([sys.executable, "-m", "gemini_split", *where, *args, "-p", "hi"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    system = fake.requests[-1]["body"]["systemInstruction"]["parts"][0]["text"] if fake.requests else ""
    return done, system


def test_imported_files_reach_the_model_nested_and_relative_to_the_importer(tmp_path, project):
    (project / "GEMINI.md").write_text("Main rules.\n@./docs/style.md\nAfter the import.\n")
    (project / "docs" / "style.md").write_text("STYLE-RULE: tabs.\n@../shared.md\n")
    (project / "shared.md").write_text("SHARED-RULE: be brief.\n")
    with FakeGemini(script=[{"text": "ok"}], api_key=KEY) as fake:
        done, system = ask(tmp_path, project, fake)
    assert done.returncode == 0, done.stderr
    assert "<!-- Imported from: ./docs/style.md -->\nSTYLE-RULE: tabs." in system
    assert "<!-- Imported from: ../shared.md -->\nSHARED-RULE: be brief." in system
    assert system.index("Main rules.") < system.index("STYLE-RULE") < system.index("After the import.")
    assert "@./docs/style.md" not in system


def test_imports_in_code_are_left_as_written(tmp_path, project):
    (project / "secret.md").write_text("NOT-IMPORTED\n")
    (project / "GEMINI.md").write_text("Use `@./secret.md` to cite.\n```\n@./secret.md\n```\n")
    with FakeGemini(script=[{"text": "ok"}], api_key=KEY) as fake:
        done, system = ask(tmp_path, project, fake)
    assert done.returncode == 0, done.stderr
    assert "NOT-IMPORTED" not in system
    assert system.count("@./secret.md") == 2


def test_a_cycle_an_import_outside_the_project_and_a_depth_bomb_are_stopped_and_named(tmp_path, project):
    (tmp_path / "outside.md").write_text("OUTSIDE-SECRET\n")
    (project / "GEMINI.md").write_text("@./a.md\n@../outside.md\n@/etc/passwd.md\n@./d1.md\n")
    (project / "a.md").write_text("A-TEXT\n@./b.md\n")
    (project / "b.md").write_text("B-TEXT\n@./a.md\n")
    for i in range(1, 9):
        (project / f"d{i}.md").write_text(f"DEPTH-{i}\n@./d{i + 1}.md\n")
    with FakeGemini(script=[{"text": "ok"}], api_key=KEY) as fake:
        done, system = ask(tmp_path, project, fake)
    assert done.returncode == 0, done.stderr
    assert "A-TEXT" in system and "B-TEXT" in system and system.count("A-TEXT") == 1
    assert "<!-- File already processed: ./a.md -->" in system
    assert "OUTSIDE-SECRET" not in system
    assert "<!-- Import failed: ../outside.md - outside the workspace -->" in system
    assert "DEPTH-5" in system and "DEPTH-6" not in system
    assert "nested more than 5 levels deep" in system
    assert "import ../outside.md not read: outside the workspace" in done.stderr


def test_a_symlink_out_of_the_project_is_outside_too(tmp_path, project):
    (tmp_path / "outside.md").write_text("OUTSIDE-SECRET\n")
    (project / "link.md").symlink_to(tmp_path / "outside.md")
    (project / "GEMINI.md").write_text("@./link.md\n")
    with FakeGemini(script=[{"text": "ok"}], api_key=KEY) as fake:
        done, system = ask(tmp_path, project, fake)
    assert "OUTSIDE-SECRET" not in system
    assert "<!-- Import failed: ./link.md - outside the workspace -->" in system


def test_imports_reach_the_model_through_serve(tmp_path, project):
    """The client resolves imports where the files are: a remote server's
    model gets the imported text."""
    (project / "GEMINI.md").write_text("@./docs/style.md\n")
    (project / "docs" / "style.md").write_text("STYLE-RULE: tabs.\n")
    with FakeGemini(script=[{"text": "ok"}], api_key=KEY) as fake:
        with daemon(tmp_path, fake) as (_, address):
            done, system = ask(tmp_path, project, fake, server=address)
    assert done.returncode == 0, done.stderr
    assert "STYLE-RULE: tabs." in system
