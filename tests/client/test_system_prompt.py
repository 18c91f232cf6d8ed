"""Issue 31 §11: ``GEMINI_SYSTEM_MD`` replaces the built-in system prompt
with the user's own file, and ``GEMINI_WRITE_SYSTEM_MD`` writes the
system prompt to a file, as gemini-cli 0.61 does (cli/system-prompt.md).

Real ``gemini-split`` processes against the fake Gemini server: what the
model received is its request's ``systemInstruction``. The file is the
client's, so it reaches the model the same embedded, through ``serve`` and
with the tools on the server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY, daemon
from tests.server.server_tools.helpers import unix_listener

pytestmark = pytest.mark.timeout(90)

CUSTOM = """\
# Custom System Prompt

You are PIRATE-7, a helpful assistant. ${AgentSkills}
${SubAgents}

## Tooling

The following tools are available to you: ${AvailableTools}

You can use ${write_file_ToolName} to save logs.
"""


@pytest.fixture
def setup(tmp_path: Path) -> dict:
    home = tmp_path / "home"
    work = tmp_path / "work"
    (home / ".gemini").mkdir(parents=True)
    (work / ".gemini").mkdir(parents=True)
    (work / ".gemini" / "system.md").write_text(CUSTOM)
    (work / "GEMINI.md").write_text("Project rule: answer in haiku.\n")
    (tmp_path / "trusted.json").write_text(json.dumps({str(work): "TRUST_FOLDER"}))
    return {"home": home, "config": home / ".gemini", "work": work, "tmp": tmp_path}


def run(setup: dict, fake: FakeGemini | None, *args: str, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(HOME=str(setup["home"]), GEMINI_SPLIT_HOME=str(setup["config"]),
               GEMINI_CLI_TRUSTED_FOLDERS_PATH=str(setup["tmp"] / "trusted.json"))
    if fake is not None:
        env.update(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url)
    env.update(extra)
    return subprocess.run([sys.executable, "-m", "gemini_split", *args], cwd=setup["work"], env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def instructions(fake: FakeGemini) -> list[str]:
    """Each model request's system instruction, as text."""
    out = []
    for request in fake.requests:
        if request["action"].endswith("GenerateContent"):
            parts = (request["body"].get("systemInstruction") or {}).get("parts", [])
            out.append("".join(p.get("text", "") for p in parts))
    return out


def assert_custom(text: str, *, tools: list[str]) -> None:
    """The user's prompt in place of the built-in one, its variables
    filled in, the context file still appended."""
    assert text.startswith("# Custom System Prompt\n\nYou are PIRATE-7, a helpful assistant.")
    assert "You are gemini-split" not in text  # a replacement, not a merge
    listed = "The following tools are available to you: " + "\n".join(f"- {t}" for t in tools)
    assert listed in text
    assert "You can use write_file to save logs." in text
    assert "${" not in text
    assert "\n\n\n" not in text
    assert text.endswith("Project rule: answer in haiku.\n--- End of Context from: "
                         f"{os.path.realpath(text.split('--- Context from: ')[1].split(' ---')[0])} ---\n"
                         "</project_context>\n</loaded_context>")


def declared(fake: FakeGemini) -> list[str]:
    body = [r["body"] for r in fake.requests if r["action"].endswith("GenerateContent")][0]
    return [d["name"] for t in body.get("tools", []) for d in t.get("functionDeclarations", [])]


def test_gemini_system_md_true_replaces_the_system_prompt_with_the_projects_file(setup):
    with FakeGemini([{"text": "Arr."}], api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "hello", GEMINI_SYSTEM_MD="true")
        assert done.returncode == 0, done.stderr
        assert done.stdout == "Arr.\n"
        assert_custom(instructions(fake)[0], tools=declared(fake))


def test_a_path_relative_or_under_home_is_read_and_0_means_the_built_in_prompt(setup):
    (setup["home"] / "prompts").mkdir()
    (setup["home"] / "prompts" / "mine.md").write_text("You are TILDE-PROMPT.")
    (setup["work"] / "rel.md").write_text("You are RELATIVE-PROMPT.")
    with FakeGemini([{"text": "a"}, {"text": "b"}, {"text": "c"}], api_key=API_KEY) as fake:
        for value in ("~/prompts/mine.md", "rel.md", "0"):
            done = run(setup, fake, "-p", "hello", GEMINI_SYSTEM_MD=value)
            assert done.returncode == 0, done.stderr
        tilde, relative, builtin = instructions(fake)
    assert tilde.startswith("You are TILDE-PROMPT.")
    assert relative.startswith("You are RELATIVE-PROMPT.")
    assert builtin.startswith("You are gemini-split")


def test_the_custom_prompt_reaches_the_model_the_same_through_serve(setup):
    with FakeGemini([{"text": "Arr."}], api_key=API_KEY) as fake, daemon(setup["tmp"], fake) as (_proc, address):
        done = run(setup, None, "--server", address, "-p", "hello", GEMINI_SYSTEM_MD="1")
        assert done.returncode == 0, done.stderr
        assert_custom(instructions(fake)[0], tools=declared(fake))


def test_with_the_tools_on_the_server_the_variables_name_the_servers_tools(setup):
    sandbox = ("--sandbox", "auto" if shutil.which("bwrap") else "none")
    with FakeGemini([{"text": "Arr."}], api_key=API_KEY) as fake, unix_listener() as listen, \
            daemon(setup["tmp"], fake, "--server-tools", "--workspace-root", str(setup["tmp"] / "ws"),
                   *sandbox, *listen) as (_proc, address):
        done = run(setup, None, "--server", address, "--tools", "server", "-p", "hello", GEMINI_SYSTEM_MD="1")
        assert done.returncode == 0, done.stderr
        tools = declared(fake)
        assert "save_memory" not in tools  # the server's own tool set, not the client's
        assert_custom(instructions(fake)[0], tools=tools)


def test_a_missing_file_is_gemini_clis_error_and_nothing_is_sent(setup):
    with FakeGemini([{"text": "never"}], api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "hello", GEMINI_SYSTEM_MD=str(setup["tmp"] / "nope.md"))
        assert done.returncode != 0
        assert f"missing system prompt file '{setup['tmp'] / 'nope.md'}'" in done.stderr
        assert "Traceback" not in done.stderr
        assert instructions(fake) == []


def test_an_over_long_file_is_refused_with_a_clear_error_not_cut(setup):
    (setup["work"] / "big.md").write_text("x" * (300 * 1024))
    done = run(setup, None, "-p", "hello", GEMINI_SYSTEM_MD="big.md", GEMINI_API_KEY="k")
    assert done.returncode != 0
    assert "is over 256 KiB" in done.stderr and "big.md" in done.stderr
    assert "Traceback" not in done.stderr


def test_gemini_write_system_md_writes_the_system_prompt_the_model_gets(setup):
    (setup["work"] / ".gemini" / "system.md").unlink()
    with FakeGemini([{"text": "one"}, {"text": "two"}], api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "hello", GEMINI_WRITE_SYSTEM_MD="1")
        assert done.returncode == 0, done.stderr
        written = (setup["work"] / ".gemini" / "system.md").read_text()
        assert written == instructions(fake)[0]
        assert written.startswith("You are gemini-split") and "Project rule: answer in haiku." in written
        # Edited and read back: the exported prompt is the starting point gemini-cli describes.
        (setup["work"] / ".gemini" / "system.md").write_text(written.replace("You are gemini-split", "You are EDITED"))
        done = run(setup, fake, "-p", "hello", GEMINI_SYSTEM_MD="1",
                   GEMINI_WRITE_SYSTEM_MD=str(setup["tmp"] / "out" / "copy.md"))
        assert done.returncode == 0, done.stderr
        assert instructions(fake)[1].startswith("You are EDITED")
        assert (setup["tmp"] / "out" / "copy.md").read_text() == instructions(fake)[1]


def test_gemini_write_system_md_works_through_serve(setup):
    with FakeGemini([{"text": "one"}], api_key=API_KEY) as fake, daemon(setup["tmp"], fake) as (_proc, address):
        done = run(setup, None, "--server", address, "-p", "hello", GEMINI_WRITE_SYSTEM_MD="exported.md")
        assert done.returncode == 0, done.stderr
        assert (setup["work"] / "exported.md").read_text() == instructions(fake)[0]
