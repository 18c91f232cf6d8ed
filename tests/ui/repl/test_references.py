"""Issue 14 §8: ``@path`` references and ``!command`` passthrough in the REPL.

The scripted model answers ``Echo: <prompt>`` once its script is used up,
so what it echoes is exactly what the model received.
"""

from __future__ import annotations

import pytest

from gemini_split.ui.references import complete_reference, find_references

from .pty_driver import ENTER, ESC, TAB
from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401  (fixtures)

pytestmark = pytest.mark.timeout(60)


def test_references_are_found_as_gemini_cli_finds_them_but_not_in_addresses():
    assert find_references("explain @src/app.py and @docs/, then @a\\ b.txt.") == ["src/app.py", "docs/", "a b.txt"]
    assert find_references("mail me at me@example.com") == []
    assert find_references("@notes.txt") == ["notes.txt"]
    assert find_references("see(@x.py)") == []
    assert find_references("see @x.py;") == ["x.py"]


def test_completion_lists_the_workspace_without_git_ignored_entries(tmp_path):
    (tmp_path / ".gitignore").write_text("secret*\nbuild/\n")
    (tmp_path / "notes.txt").write_text("n")
    (tmp_path / "secret.txt").write_text("s")
    (tmp_path / "build").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "one.md").write_text("1")
    (tmp_path / "my file.txt").write_text("m")
    assert complete_reference("", tmp_path) == ["docs/", "my\\ file.txt", "notes.txt"]
    assert complete_reference("docs/o", tmp_path) == ["docs/one.md"]
    assert complete_reference("../", tmp_path) == []


def test_at_paths_attach_files_and_directories_and_refuse_what_they_must(start_repl, workdir):  # noqa: F811
    (workdir / ".gitignore").write_text("secret.txt\n")
    (workdir / "secret.txt").write_text("TOP SECRET\n")
    (workdir / "docs").mkdir()
    (workdir / "docs" / "intro.md").write_text("intro text\n")
    (workdir / "docs" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (workdir.parent / "outside.txt").write_text("OUTSIDE\n")
    repl = start_repl([])
    repl.type("summarise @no")
    repl.send(TAB)  # completes @notes.txt: attached below
    repl.drain(0.3)
    ask(repl, " and @docs/ and @secret.txt and @../outside.txt")
    repl.expect(r"\+ attached @notes\.txt")
    repl.expect(r"\+ attached @docs/intro\.md")
    repl.expect(r"@secret\.txt not attached: ignored by \.gitignore")
    repl.expect(r"@\.\./outside\.txt not attached: .*outside the workspace")
    repl.expect(r"--- Content from referenced files\s+---")
    repl.expect(r"Content from @notes\.txt:\s+the notes")
    repl.expect(r"Content from @docs/intro\.md:\s+intro text")
    repl.expect(r"--- End of content ---")
    repl.expect(PROMPT)
    assert "TOP SECRET" not in repl.text and "OUTSIDE" not in repl.text


def test_bang_runs_a_command_here_and_the_model_gets_its_output(start_repl, workdir):  # noqa: F811
    repl = start_repl([])
    repl.type("!printf 'marker-%d \\033[2K\\n' $((40+2)); exit 3")
    repl.send(ENTER)
    repl.expect(r"marker-42 ␛\[2K")
    repl.expect(r"exit status 3")
    repl.expect(r"! ")  # shell mode stays on, as in gemini-cli
    ask(repl, "pwd")
    repl.expect(str(workdir.name))
    repl.send(ESC)  # leaves shell mode
    ask(repl, "what happened?")
    repl.expect(r"Echo: I ran the following shell command:\s+(```sh\s+)?printf")
    repl.expect(r"This produced the following result:")
    repl.expect(r"marker-42")
    repl.expect(r"what happened\?")
    repl.expect(PROMPT)


def test_one_shot_attaches_at_paths_too(tmp_path, workdir):  # noqa: F811
    import json

    from tests.inprocess import cli
    from .test_repl import _environ

    (workdir / ".gitignore").write_text("secret.txt\n")
    (workdir / "secret.txt").write_text("TOP SECRET\n")
    script = tmp_path / "s.json"
    script.write_text(json.dumps([]))
    done = cli(["-m", f"scripted:{script}", "-p", "read @notes.txt and @secret.txt"],
               environ=_environ(tmp_path), cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert "Content from @notes.txt:\nthe notes" in done.stdout
    assert "TOP SECRET" not in done.stdout
    assert "@secret.txt not attached: ignored by .gitignore" in done.stderr


def test_an_image_is_sent_as_inline_data_to_the_gemini_api(tmp_path, workdir):  # noqa: F811
    """Through the real google-genai client, against the fake Gemini server:
    the request body it receives carries the image as inlineData."""
    import base64

    from gemini_split.testing.fake_gemini import FakeGemini

    from tests.inprocess import cli
    from .test_repl import _environ

    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    (workdir / "logo.png").write_bytes(png)
    with FakeGemini([{"text": "a logo"}], api_key="k") as fake:
        done = cli(["-p", "what is @logo.png?"], environ=_environ(tmp_path, **fake.env), cwd=workdir)
        body = fake.requests[-1]["body"]
    assert done.returncode == 0, done.stderr
    assert "a logo" in done.stdout
    # The first turn opens with the session context (gemini-cli's <session_context> part).
    parts = [p for p in body["contents"][-1]["parts"] if not p.get("text", "").startswith("<session_context>")]
    assert parts[0]["text"].startswith("what is @logo.png?\n--- Content from referenced files ---")
    assert "Content from @logo.png: (image/png, 264 bytes, attached as inline data)" in parts[0]["text"]
    inline = parts[1]["inlineData"]  # as google-genai puts it on the wire
    assert inline.get("mimeType", inline.get("mime_type")) == "image/png"
    assert base64.urlsafe_b64decode(inline["data"]) == png
