"""Issue 30, rewind, end to end: three turns that each write files, then
``--rewind-to`` (the script path of ``/rewind``) with and without
``--revert-files``, embedded and against ``serve``; what the model is sent
next is read from the fake Gemini server's recorded request bodies.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY, _env
from tests.inprocess import cli

pytestmark = pytest.mark.timeout(120)


def _write(path: str, content: str) -> dict:
    return {"function_calls": [{"name": "write_file", "args": {"file_path": path, "content": content}}]}


#: Turn 1 creates a.txt; turn 2 rewrites it and creates b.txt; turn 3 creates c.txt.
SCRIPT = [
    _write("a.txt", "A1\n"), {"text": "wrote a"},
    {"function_calls": [{"name": "write_file", "args": {"file_path": "a.txt", "content": "A2\n"}},
                        {"name": "write_file", "args": {"file_path": "b.txt", "content": "B\n"}}]},
    {"text": "wrote a and b"},
    _write("c.txt", "C\n"), {"text": "wrote c"},
    {"text": "the answer after the rewind"},
]
PROMPTS = ("turn one: make a", "turn two: change a, make b", "turn three: make c")


def run(tmp_path, fake, *args: str) -> subprocess.CompletedProcess:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return cli(list(args), environ=_env(HOME=str(tmp_path), GEMINI_SPLIT_HOME=str(home), GEMINI_API_KEY=API_KEY,
                                        GOOGLE_GEMINI_BASE_URL=fake.url), cwd=work)


def three_turns(tmp_path, fake, *extra: str) -> None:
    for n, prompt in enumerate(PROMPTS):
        done = run(tmp_path, fake, *extra, *(("-r", "latest") if n else ()), "--yolo", "-p", prompt)
        assert done.returncode == 0, done.stderr
    work = tmp_path / "work"
    assert {p.name: p.read_text() for p in work.iterdir()} == {"a.txt": "A2\n", "b.txt": "B\n", "c.txt": "C\n"}


def _sent_prompts(body: dict) -> str:
    return json.dumps(body["contents"])


def test_rewind_to_the_second_prompt_with_files_puts_the_files_back_and_the_next_request_lacks_turns_two_and_three(
        tmp_path):
    with FakeGemini(script=SCRIPT, api_key=API_KEY) as fake:
        three_turns(tmp_path, fake)
        rewound = run(tmp_path, fake, "--resume", "latest", "--rewind-to", "2", "--revert-files")
        after = run(tmp_path, fake, "-r", "latest", "-p", "what now?")
        bodies = [r["body"] for r in fake.requests]
    assert rewound.returncode == 0, rewound.stderr
    assert 'to before prompt 2 ("turn two: change a, make b"); 1 prompt left' in rewound.stderr
    assert "a.txt: restored" in rewound.stderr and "b.txt: deleted" in rewound.stderr
    assert "c.txt: deleted" in rewound.stderr
    work = tmp_path / "work"
    assert {p.name: p.read_text() for p in work.iterdir()} == {"a.txt": "A1\n"}
    assert after.returncode == 0 and after.stdout == "the answer after the rewind\n", after.stderr
    sent = _sent_prompts(bodies[-1])
    assert PROMPTS[0] in sent and "wrote a" in sent
    assert PROMPTS[1] not in sent and PROMPTS[2] not in sent and "wrote c" not in sent


def test_rewind_without_revert_files_keeps_the_files_and_a_prompt_that_does_not_exist_is_refused(tmp_path):
    with FakeGemini(script=SCRIPT, api_key=API_KEY) as fake:
        three_turns(tmp_path, fake)
        missing = run(tmp_path, fake, "--resume", "latest", "--rewind-to", "4")
        rewound = run(tmp_path, fake, "--resume", "latest", "--rewind-to", "3")
        again = run(tmp_path, fake, "--resume", "latest", "--rewind-to", "3")
    assert missing.returncode == 42 and "has 3 prompts (1–3)" in missing.stderr
    assert rewound.returncode == 0, rewound.stderr
    work = tmp_path / "work"
    assert sorted(p.name for p in work.iterdir()) == ["a.txt", "b.txt", "c.txt"]
    assert again.returncode == 42 and "has 2 prompts (1–2)" in again.stderr


def test_revert_files_in_another_clone_of_the_workspace_is_refused_naming_both_and_touches_nothing(tmp_path):
    """T4-3: the same files (a second clone of the repository) in another
    directory: their contents match what the agent wrote, and still only
    the workspace the edits were made in may have them put back."""
    import shutil

    with FakeGemini(script=SCRIPT, api_key=API_KEY) as fake:
        three_turns(tmp_path, fake)
        listed = run(tmp_path, fake, "--list-sessions")
        session = listed.stdout.split("[")[-1].split("]")[0]
        clone = tmp_path / "clone"
        shutil.copytree(tmp_path / "work", clone)
        elsewhere = cli(["--resume", session, "--rewind-to", "2", "--revert-files"],
                        environ=_env(HOME=str(tmp_path), GEMINI_SPLIT_HOME=str(tmp_path / "home"),
                                     GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url), cwd=clone)
        still = run(tmp_path, fake, "--resume", "latest", "--rewind-to", "3", "--revert-files")
    assert elsewhere.returncode == 42, elsewhere.stderr
    assert str(tmp_path / "work") in elsewhere.stderr and str(clone) in elsewhere.stderr
    assert "nothing was rewound" in elsewhere.stderr
    assert {p.name: p.read_text() for p in clone.iterdir()} == {"a.txt": "A2\n", "b.txt": "B\n", "c.txt": "C\n"}
    # In its own workspace the session still had all three prompts, and its files go back.
    assert still.returncode == 0, still.stderr
    assert "c.txt: deleted" in still.stderr and not (tmp_path / "work" / "c.txt").exists()


def test_a_file_changed_by_hand_since_the_agent_wrote_it_is_named_and_left_alone(tmp_path):
    with FakeGemini(script=SCRIPT, api_key=API_KEY) as fake:
        three_turns(tmp_path, fake)
        (tmp_path / "work" / "b.txt").write_text("mine now\n")
        rewound = run(tmp_path, fake, "--resume", "latest", "--rewind-to", "2", "--revert-files")
    assert rewound.returncode == 0, rewound.stderr
    assert "b.txt: skipped — changed since the agent's edit" in rewound.stderr
    work = tmp_path / "work"
    assert {p.name: p.read_text() for p in work.iterdir()} == {"a.txt": "A1\n", "b.txt": "mine now\n"}


def test_a_workspace_that_is_a_git_repository_with_uncommitted_changes_is_never_touched_beyond_the_agents_edits(
        tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@e"]
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    (work / "tracked.txt").write_text("committed\n")
    subprocess.run([*git, "add", "tracked.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    (work / "tracked.txt").write_text("committed\nuncommitted change\n")
    (work / "untracked.txt").write_text("not added\n")
    before = subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True, check=True).stdout
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
    with FakeGemini(script=SCRIPT, api_key=API_KEY) as fake:
        for n, prompt in enumerate(PROMPTS):
            assert run(tmp_path, fake, *(("-r", "latest") if n else ()), "--yolo", "-p", prompt).returncode == 0
        rewound = run(tmp_path, fake, "--resume", "latest", "--rewind-to", "1", "--revert-files")
    assert rewound.returncode == 0, rewound.stderr
    assert (work / "tracked.txt").read_text() == "committed\nuncommitted change\n"
    assert (work / "untracked.txt").read_text() == "not added\n"
    assert subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True).stdout == before
    assert subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout == head
    assert not (work / "a.txt").exists() and not (work / "c.txt").exists()
