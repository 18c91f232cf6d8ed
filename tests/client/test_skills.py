"""Issue 29 §2: Agent Skills, as gemini-cli 0.61 discovers and offers them.

Real ``gemini-split`` processes against the fake Gemini server, which is
scripted to call ``activate_skill``; what the model received is read from
its recorded requests. The skill is gemini-cli's documented example
(cli/creating-skills.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gemini_split.userfiles.skills import MAX_SKILL_BYTES, discover, skill_roots
from gemini_split.testing.fake_gemini import FakeGemini

from tests.server.server_tools.helpers import unix_listener
from tests.e2e.test_serve_e2e import API_KEY, daemon

pytestmark = pytest.mark.timeout(90)

CODE_REVIEWER = """\
---
name: code-reviewer
description:
  Expertise in reviewing code changes for correctness, security, and style. Use
  when the user asks to "review" their code or a PR.
---

# Code Reviewer Instructions

You act as a senior software engineer specialized in code quality. When this
skill is active, you MUST:

1.  **Analyze**: Review the provided code for logical errors, security
    vulnerabilities, and style violations.
2.  **Review**: Use the bundled `scripts/review.js` utility to perform an
    automated check.
"""

ACTIVATE = [{"function_calls": [{"name": "activate_skill", "args": {"name": "code-reviewer"}}]},
            {"text": "Reviewed."}]


def skill(root: Path, dirname: str, text: str) -> Path:
    (root / dirname).mkdir(parents=True, exist_ok=True)
    path = root / dirname / "SKILL.md"
    path.write_text(text)
    return path


@pytest.fixture
def setup(tmp_path: Path) -> dict:
    """A home (HOME, with ~/.gemini as GEMINI_SPLIT_HOME) and a trusted project
    holding gemini-cli's code-reviewer skill."""
    home = tmp_path / "home"
    work = tmp_path / "work"
    (home / ".gemini").mkdir(parents=True)
    work.mkdir()
    skill(work / ".gemini" / "skills", "code-reviewer", CODE_REVIEWER)
    (work / ".gemini" / "skills" / "code-reviewer" / "scripts").mkdir()
    (work / ".gemini" / "skills" / "code-reviewer" / "scripts" / "review.js").write_text("console.log(1)\n")
    (tmp_path / "trusted.json").write_text(json.dumps({str(work): "TRUST_FOLDER"}))
    return {"home": home, "config": home / ".gemini", "work": work, "tmp": tmp_path}


def _env(setup: dict, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(HOME=str(setup["home"]), GEMINI_SPLIT_HOME=str(setup["config"]),
               GEMINI_CLI_TRUSTED_FOLDERS_PATH=str(setup["tmp"] / "trusted.json"))
    env.update(extra)
    return env


def run(setup: dict, fake: FakeGemini | None, *args: str, input: str | None = None,
        **extra: str) -> subprocess.CompletedProcess:
    env = _env(setup, **extra)
    if fake is not None:
        env.setdefault("GEMINI_API_KEY", API_KEY)
        env.setdefault("GOOGLE_GEMINI_BASE_URL", fake.url)
    return subprocess.run([sys.executable, "-m", "gemini_split", *args], cwd=setup["work"], env=env,
                          capture_output=True, text=True, timeout=60,
                          **({"input": input} if input is not None else {"stdin": subprocess.DEVNULL}))


def model_requests(fake: FakeGemini) -> list[dict]:
    return [r["body"] for r in fake.requests if r["action"].endswith("GenerateContent")]


def offered(fake: FakeGemini) -> str:
    """The last request's system instruction and tools (the first turn's
    workspace listing names skill directories too, as files)."""
    body = model_requests(fake)[-1]
    return json.dumps([body.get("systemInstruction"), body.get("tools")])


def assert_activated(fake: FakeGemini) -> None:
    """The first request offered the skill; the one after the model's
    activate_skill call carries its instructions and files."""
    first, second = model_requests(fake)[-2:]
    system = json.dumps(first["systemInstruction"])
    assert "<available_skills>" in system and "<name>code-reviewer</name>" in system
    declared = [d["name"] for t in first["tools"] for d in t.get("functionDeclarations", [])]
    assert "activate_skill" in declared
    answer = json.dumps(second["contents"][-1])
    assert '<activated_skill name=\\"code-reviewer\\">' in answer
    assert "You act as a senior software engineer" in answer
    assert "scripts/review.js" in answer and "<available_resources>" in answer


def test_the_model_activates_a_project_skill_and_gets_its_instructions_embedded(setup):
    with FakeGemini(ACTIVATE, api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "review my change")
        assert done.returncode == 0, done.stderr
        assert "Reviewed." in done.stdout
        assert_activated(fake)


def test_activation_works_the_same_through_serve(setup):
    with FakeGemini(ACTIVATE, api_key=API_KEY) as fake, daemon(setup["tmp"], fake) as (_proc, address):
        done = run(setup, None, "--server", address, "-p", "review my change")
        assert done.returncode == 0, done.stderr
        assert_activated(fake)


def test_activation_works_the_same_with_tools_on_the_server(setup):
    """The skill is the client's file; the server's tools never see it, yet
    activate_skill answers from what the client sent."""
    sandbox = ("--sandbox", "auto" if shutil.which("bwrap") else "none")
    with FakeGemini(ACTIVATE, api_key=API_KEY) as fake, unix_listener() as listen, \
            daemon(setup["tmp"], fake, "--server-tools", "--workspace-root", str(setup["tmp"] / "ws"),
                   *sandbox, *listen) as (_proc, address):
        done = run(setup, None, "--server", address, "--tools", "server",
                   "-p", "review my change")
        assert done.returncode == 0, done.stderr
        assert_activated(fake)


def test_an_unknown_skill_name_is_an_error_naming_the_skills_there_are(setup):
    script = [{"function_calls": [{"name": "activate_skill", "args": {"name": "nope"}}]}, {"text": "ok"}]
    with FakeGemini(script, api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "hi")
        assert done.returncode == 0, done.stderr
        answer = json.dumps(model_requests(fake)[-1]["contents"][-1])
        assert 'Skill \\"nope\\" not found. Available skills are: code-reviewer' in answer


def test_project_skills_need_a_trusted_folder(setup):
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "hi", GEMINI_CLI_TRUSTED_FOLDERS_PATH=str(setup["tmp"] / "none.json"))
        assert done.returncode == 0, done.stderr
        assert "code-reviewer" not in offered(fake)
        assert ".gemini/skills" in done.stderr and "not trusted" in done.stderr


def test_a_disabled_skill_is_not_offered_and_skills_list_says_so(setup):
    (setup["config"] / "settings.json").write_text(json.dumps({"skills": {"disabled": ["code-reviewer"]}}))
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "hi")
        assert done.returncode == 0, done.stderr
        assert "code-reviewer" not in offered(fake) and "activate_skill" not in offered(fake)
    listed = run(setup, None, "skills", "list")
    assert listed.returncode == 0 and "code-reviewer [disabled] (workspace)" in listed.stdout


@pytest.mark.parametrize("settings", [{"skills": {"enabled": False}}, {"tools": {"exclude": ["activate_skill"]}}])
def test_skills_switched_off_in_settings_are_not_offered(setup, settings):
    (setup["config"] / "settings.json").write_text(json.dumps(settings))
    with FakeGemini(api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "hi")
        assert done.returncode == 0, done.stderr
        assert "code-reviewer" not in offered(fake) and "activate_skill" not in offered(fake)


# --- discovery: precedence and bad input -------------------------------------


def test_precedence_is_gemini_clis_workspace_over_user_and_agents_alias_over_gemini(tmp_path):
    home, project = tmp_path / "home", tmp_path / "proj"
    skill(home / ".gemini" / "skills", "a", "---\nname: s\ndescription: user gemini\n---\n")
    skill(home / ".agents" / "skills", "a", "---\nname: s\ndescription: user agents\n---\n")
    skill(home / ".agents" / "skills", "b", "---\nname: t\ndescription: user agents t\n---\n")
    skill(project / ".gemini" / "skills", "a", "---\nname: t\ndescription: project gemini t\n---\n")
    skill(project / ".agents" / "skills", "a", "---\nname: u\ndescription: project agents u\n---\n")
    skill(tmp_path / "ext", "x", "---\nname: u\ndescription: extension u\n---\n")
    skill(tmp_path / "ext", "y", "---\nname: v\ndescription: extension v\n---\n")
    found = discover(skill_roots(home / ".gemini", home, project, trusted=True,
                                 extensions=[("my-ext", tmp_path / "ext")]))
    assert {s.name: (s.description, s.scope) for s in found.skills} == {
        "s": ("user agents", "user"), "t": ("project gemini t", "workspace"),
        "u": ("project agents u", "workspace"), "v": ("extension v", "extension my-ext")}
    untrusted = discover(skill_roots(home / ".gemini", home, project, trusted=False))
    assert {s.name for s in untrusted.skills} == {"s", "t"}


def test_bad_skill_files_are_reported_by_path_and_the_others_still_load(tmp_path):
    root = tmp_path / "skills"
    skill(root, "good", "---\nname: good\ndescription: fine\n---\nbody\n")
    bad_yaml = skill(root, "yaml", "---\nname: [unclosed\ndescription: x\n---\n")
    no_front = skill(root, "plain", "just text\n")
    no_desc = skill(root, "nodesc", "---\nname: nodesc\n---\n")
    huge = skill(root, "huge", "---\nname: huge\ndescription: big\n---\n" + "x" * MAX_SKILL_BYTES)
    (root / "fifo").mkdir()
    os.mkfifo(root / "fifo" / "SKILL.md")
    (tmp_path / "secret.md").write_text("---\nname: leak\ndescription: outside\n---\nSECRET\n")
    (root / "link").mkdir()
    os.symlink(tmp_path / "secret.md", root / "link" / "SKILL.md")
    skill(root, "twin", "---\nname: good\ndescription: second of the name\n---\n")
    found = discover([("user", root)])  # returns: the FIFO is never waited on
    assert [s.name for s in found.skills] == ["good"]
    assert found.skills[0].description == "fine"
    text = "\n".join(found.warnings)
    assert f"{bad_yaml}: malformed YAML frontmatter" in text
    assert f"{no_front}: no YAML frontmatter" in text
    assert f"{no_desc}: the frontmatter needs a text 'description:'" in text
    assert f"{huge}:" in text and "more than the" in text
    assert f"{root / 'fifo' / 'SKILL.md'}: not a regular file" in text
    assert f"{root / 'link' / 'SKILL.md'}: a symlink to" in text and "outside the skill's directory" in text
    assert "skill 'good' is also defined by" in text


def test_a_malformed_skill_is_reported_on_stderr_and_the_run_goes_on(setup):
    bad = skill(setup["config"] / "skills", "broken", "---\nname: broken\ndescription: [\n---\n")
    with FakeGemini(ACTIVATE, api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "review")
        assert done.returncode == 0, done.stderr
        assert f"{bad}: malformed YAML frontmatter" in done.stderr
        assert_activated(fake)


# --- gemini-split skills install / uninstall ---------------------------------


def test_install_shows_the_skill_and_without_a_terminal_refuses_unless_consent(setup):
    source = setup["tmp"] / "checkout"
    skill(source, "pdf", "---\nname: pdf-tools\ndescription: Extract PDF text.\n---\nRun extract.py\n")
    (source / "pdf" / "extract.py").write_text("print(1)\n")
    refused = run(setup, None, "skills", "install", str(source))
    assert refused.returncode == 2
    assert "pdf-tools: Extract PDF text." in refused.stderr and "extract.py" in refused.stderr
    assert "--consent" in refused.stderr
    installed_dir = setup["config"] / "skills" / "pdf-tools"
    assert not installed_dir.exists()
    done = run(setup, None, "skills", "install", str(source), "--consent")
    assert done.returncode == 0, done.stderr
    assert (installed_dir / "SKILL.md").is_file() and (installed_dir / "extract.py").is_file()
    listed = run(setup, None, "skills", "list")
    assert "pdf-tools [enabled] (user)" in listed.stdout
    gone = run(setup, None, "skills", "uninstall", "pdf-tools")
    assert gone.returncode == 0, gone.stderr
    assert not installed_dir.exists()
    again = run(setup, None, "skills", "uninstall", "pdf-tools")
    assert again.returncode == 1 and "is not installed" in again.stderr


def test_a_workspace_install_without_a_terminal_or_consent_leaves_nothing_behind(setup):
    source = setup["tmp"] / "one"
    skill(source, ".", "---\nname: one\ndescription: d\n---\n")
    done = run(setup, None, "skills", "install", str(source), "--scope", "workspace")
    assert done.returncode == 2 and not (setup["work"] / ".gemini" / "skills" / "one").exists()


def test_uninstall_never_leaves_the_skills_directory(setup):
    victim = setup["config"] / "keep"
    victim.mkdir()
    for name in ("../keep", "..", "/etc"):
        done = run(setup, None, "skills", "uninstall", name)
        assert done.returncode == 1
    assert victim.is_dir()


def test_install_of_a_directory_without_skills_says_so(setup):
    empty = setup["tmp"] / "empty"
    empty.mkdir()
    done = run(setup, None, "skills", "install", str(empty), "--consent")
    assert done.returncode == 1 and "no valid skills found" in done.stderr


def test_install_at_a_terminal_shows_the_skill_and_asks_and_no_installs_nothing(setup):
    from tests.ui.repl.pty_driver import PtyProcess

    source = setup["tmp"] / "asked"
    skill(source, "s", "---\nname: asked\ndescription: Asked first.\n---\n")
    for answer, installed in (("n", False), ("y", True)):
        proc = PtyProcess([sys.executable, "-m", "gemini_split", "skills", "install", str(source)],
                          env=_env(setup), cwd=str(setup["work"]))
        try:
            proc.expect(r"asked: Asked first\.", timeout=20)
            proc.expect(r"Do you want to continue\? \[Y/n\]:")
            proc.send(answer + "\r")
            status = proc.wait(20)
        finally:
            proc.close()
        assert (setup["config"] / "skills" / "asked" / "SKILL.md").is_file() is installed
        assert status == (0 if installed else 1)


def test_the_files_a_skill_lists_are_readable_with_the_confined_file_tools(setup):
    """A user skill lives outside the project: its directory is part of the
    tools' workspace, and nothing else outside the project is."""
    user_skill = setup["config"] / "skills" / "helper"
    skill(setup["config"] / "skills", "helper", "---\nname: helper\ndescription: Helps.\n---\nRead ref.md.\n")
    (user_skill / "ref.md").write_text("REFERENCE-CONTENT-7\n")
    (setup["config"] / "private.txt").write_text("NOT-FOR-THE-MODEL\n")
    script = [{"function_calls": [{"name": "read_file", "args": {"file_path": str(user_skill / "ref.md")}}]},
              {"function_calls": [{"name": "read_file", "args": {"file_path": str(setup["config"] / "private.txt")}}]},
              {"text": "ok"}]
    with FakeGemini(script, api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "help")
        assert done.returncode == 0, done.stderr
        bodies = model_requests(fake)
        assert "REFERENCE-CONTENT-7" in json.dumps(bodies[1]["contents"][-1])
        refused = json.dumps(bodies[2]["contents"][-1])
        assert "NOT-FOR-THE-MODEL" not in refused and "outside" in refused
