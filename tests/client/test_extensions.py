"""Issue 29 §3: gemini-cli's extensions, installed and used by real
``gemini-split`` processes against the fake Gemini server (what the model
received is read from its recorded request bodies), in embedded mode and
against ``serve``. The MCP server is a real one from PyPI (mcp-server-time).
The files are gemini-cli's (extensions/reference.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gemini_split.userfiles import extensions as ext
from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY, daemon

pytestmark = pytest.mark.timeout(120)

CONTEXT = "Extension rule: answer in haiku."


def make_extension(where: Path, name: str = "my-ext", **manifest) -> Path:
    """gemini-cli's example extension: an MCP server, a context file, a
    namespaced command, an excluded tool."""
    where.mkdir(parents=True)
    data = {
        "name": name, "version": "1.0.0", "description": "My awesome extension",
        "mcpServers": {"clock": {"command": sys.executable,
                                 "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                                 "cwd": "${extensionPath}", "trust": True}},
        "contextFileName": "GEMINI.md",
        "excludeTools": ["web_fetch"],
        **manifest,
    }
    (where / "gemini-extension.json").write_text(json.dumps(data))
    (where / "GEMINI.md").write_text(CONTEXT + "\n")
    (where / "commands" / "gcs").mkdir(parents=True)
    (where / "commands" / "gcs" / "sync.toml").write_text(
        'description = "Sync a bucket"\nprompt = "Sync the bucket {{args}} now"\n')
    return where


@pytest.fixture
def setup(tmp_path: Path) -> dict:
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    return {"home": home, "work": work, "tmp": tmp_path, "src": make_extension(tmp_path / "src")}


def run(setup: dict, fake: FakeGemini | None, *args: str, stdin: str | None = None,
        **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(HOME=str(setup["tmp"]), GEMINI_SPLIT_HOME=str(setup["home"]),
               GEMINI_CLI_TRUSTED_FOLDERS_PATH=str(setup["tmp"] / "trusted.json"))
    if fake is not None:
        env.update(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url)
    env.update(extra)
    return subprocess.run([sys.executable, "-m", "gemini_split", *args], cwd=setup["work"], env=env,
                          capture_output=True, text=True, timeout=90,
                          **({"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}))


def _requests(fake: FakeGemini) -> list[dict]:
    return [r for r in fake.requests if r["action"].endswith("GenerateContent")]


def _declared(request: dict) -> set[str]:
    return {d["name"] for tool in request["body"].get("tools", []) for d in tool.get("functionDeclarations", [])}


def _responses(fake: FakeGemini) -> list[dict]:
    return [p["functionResponse"] for r in _requests(fake)
            for p in r["body"]["contents"][-1].get("parts", []) if "functionResponse" in p]


SCRIPT = [{"function_calls": [{"name": "mcp_clock_get_current_time", "args": {"timezone": "UTC"}}]},
          {"text": "synced"}, {"text": "plain"}]


def _check_extension_works_then_disabled_is_gone(setup: dict, fake: FakeGemini, *server: str) -> None:
    installed = run(setup, None, "extensions", "install", str(setup["src"]), "--consent")
    assert installed.returncode == 0, installed.stderr
    assert 'Extension "my-ext" installed successfully and enabled.' in installed.stdout
    assert "clock (local)" in installed.stderr and "mcp_server_time" in installed.stderr  # what will run

    # "trust" in an extension's server is ignored, as in gemini-cli: the call is allowed here.
    done = run(setup, fake, *server, "--allowed-tools", "mcp_clock_get_current_time", "-p", "/gcs:sync my-bucket")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("synced")
    first = _requests(fake)[0]
    assert CONTEXT in json.dumps(first["body"])  # the extension's context file
    last_text = [p["text"] for p in first["body"]["contents"][-1]["parts"] if "text" in p][-1]
    assert last_text == "Sync the bucket my-bucket now"  # its command
    declared = _declared(first)
    assert "mcp_clock_get_current_time" in declared and "read_file" in declared
    assert "web_fetch" not in declared  # excludeTools
    (response,) = _responses(fake)
    assert '\\"timezone\\": \\"UTC\\"' in json.dumps(response["response"]), response  # the server really ran

    disabled = run(setup, None, "extensions", "disable", "my-ext")
    assert disabled.returncode == 0 and 'successfully disabled for scope "user"' in disabled.stdout
    done = run(setup, fake, *server, "-p", "hi")
    assert done.returncode == 0, done.stderr
    third = _requests(fake)[2]
    assert CONTEXT not in json.dumps(third["body"])
    assert "mcp_clock_get_current_time" not in _declared(third) and "web_fetch" in _declared(third)
    gone = run(setup, fake, *server, "-p", "/gcs:sync my-bucket")
    assert gone.returncode == 42 and "unknown command /gcs:sync" in gone.stderr
    assert len(_requests(fake)) == 3


def test_an_installed_extensions_mcp_server_context_and_command_work_then_disabled_are_gone(setup):
    with FakeGemini(script=SCRIPT, api_key=API_KEY) as fake:
        _check_extension_works_then_disabled_is_gone(setup, fake)


def test_an_extension_works_the_same_against_serve(setup):
    with FakeGemini(script=SCRIPT, api_key=API_KEY) as fake, daemon(setup["tmp"], fake) as (_proc, address):
        _check_extension_works_then_disabled_is_gone(setup, fake, "--server", address)


def test_install_writes_gemini_clis_files_and_list_enable_uninstall_use_them(setup):
    assert run(setup, None, "extensions", "install", str(setup["src"]), "--consent").returncode == 0
    root = setup["home"] / "extensions"
    assert json.loads((root / "my-ext" / ".gemini-extension-install.json").read_text()) == {
        "source": str(setup["src"]), "type": "local"}
    assert json.loads((root / "extension-enablement.json").read_text()) == {
        "my-ext": {"overrides": [f"{setup['tmp']}/*"]}}  # gemini-cli enables it under the home directory

    assert run(setup, None, "extensions", "disable", "my-ext", "--scope", "workspace").returncode == 0
    assert json.loads((root / "extension-enablement.json").read_text())["my-ext"]["overrides"] == [
        f"{setup['tmp']}/*", f"!{setup['work']}/*"]
    listed = run(setup, None, "extensions", "list")
    assert listed.returncode == 0, listed.stderr
    assert "✗ my-ext (1.0.0)" in listed.stdout
    assert "Enabled (User): true" in listed.stdout and "Enabled (Workspace): false" in listed.stdout
    assert "  clock" in listed.stdout and "  web_fetch" in listed.stdout

    again = run(setup, None, "extensions", "install", str(setup["src"]), "--consent")
    assert again.returncode == 1 and "already installed" in again.stderr

    removed = run(setup, None, "extensions", "uninstall", "my-ext")
    assert removed.returncode == 0 and 'Extension "my-ext" successfully uninstalled.' in removed.stdout
    assert not (root / "my-ext").exists()
    assert "my-ext" not in json.loads((root / "extension-enablement.json").read_text())
    assert run(setup, None, "extensions", "list").stdout.strip() == "No extensions installed."


def test_install_without_consent_and_without_a_terminal_installs_nothing(setup):
    done = run(setup, None, "extensions", "install", str(setup["src"]))
    assert done.returncode == 1 and "--consent" in done.stderr
    assert not (setup["home"] / "extensions" / "my-ext").exists()
    declined = run(setup, None, "extensions", "install", str(setup["src"]), stdin="n\n")
    assert declined.returncode == 1


def test_link_uses_the_directory_in_place_and_update_picks_up_a_new_version(setup):
    linked = run(setup, None, "extensions", "link", str(setup["src"]), "--consent")
    assert linked.returncode == 0, linked.stderr
    metadata = setup["home"] / "extensions" / "my-ext" / ".gemini-extension-install.json"
    assert json.loads(metadata.read_text()) == {"source": str(setup["src"]), "type": "link"}
    assert sorted(p.name for p in metadata.parent.iterdir()) == [".gemini-extension-install.json"]
    assert f"Path: {setup['src']}" in run(setup, None, "extensions", "list").stdout
    run(setup, None, "extensions", "uninstall", "my-ext")
    assert setup["src"].is_dir()  # the linked source is never removed

    assert run(setup, None, "extensions", "install", str(setup["src"]), "--consent").returncode == 0
    manifest = json.loads((setup["src"] / "gemini-extension.json").read_text())
    (setup["src"] / "gemini-extension.json").write_text(json.dumps({**manifest, "version": "1.1.0"}))
    updated = run(setup, None, "extensions", "update", "my-ext")
    assert updated.returncode == 0, updated.stderr
    assert "1.0.0 → 1.1.0" in updated.stdout
    assert "✓ my-ext (1.1.0)" in run(setup, None, "extensions", "list").stdout


def test_a_git_url_that_cannot_be_reached_says_so_quickly_and_installs_nothing(setup):
    started = time.monotonic()
    done = run(setup, None, "extensions", "install", "https://127.0.0.1:9/nobody/nothing.git", "--consent")
    assert done.returncode == 1
    assert "git clone https://127.0.0.1:9/nobody/nothing.git failed (this needs the network)" in done.stderr
    assert time.monotonic() - started < 60
    assert not (setup["home"] / "extensions").exists() or not any(
        p for p in (setup["home"] / "extensions").iterdir() if p.name != "extension-enablement.json")


def test_a_git_repository_installs_by_clone(setup):
    repo = setup["src"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], cwd=repo, check=True)
    # A git URL by its scheme: http(s) needs a server; ssh:// and git@ a key. A local
    # file URL is cloned the same way, so the clone path is exercised here.
    original = ext._GIT_PREFIXES
    try:
        ext._GIT_PREFIXES = (*original, "file://")
        installed = ext.install(setup["home"], f"file://{repo}", workspace=setup["work"], home=setup["tmp"],
                                confirm=lambda text: True, ask_setting=None)
    finally:
        ext._GIT_PREFIXES = original
    assert installed.install_metadata == {"source": f"file://{repo}", "type": "git"}
    assert not (installed.install_dir / ".git").exists()
    assert (installed.install_dir / "commands" / "gcs" / "sync.toml").is_file()


def test_settings_are_asked_at_install_stored_as_gemini_cli_stores_them_and_secrets_never_shown(setup, tmp_path):
    src = make_extension(tmp_path / "api", name="api-ext", settings=[
        {"name": "API Key", "description": "Your API key.", "envVar": "MY_API_KEY", "sensitive": True},
        {"name": "Host", "description": "Where.", "envVar": "MY_HOST"},
    ], mcpServers={"clock": {"command": sys.executable, "args": ["-m", "mcp_server_time", "--host=${MY_HOST}"]}})
    answers = {"MY_API_KEY": "sk-secret 123", "MY_HOST": "example.org"}
    asked = []
    installed = ext.install(setup["home"], str(src), workspace=setup["work"], home=setup["tmp"],
                            confirm=lambda text: True, ask_setting=lambda s: asked.append(s.name) or answers[s.env_var])
    assert asked == ["API Key", "Host"]
    env_file = installed.install_dir / ".env"
    assert env_file.read_text() == 'MY_API_KEY="sk-secret 123"\nMY_HOST=example.org\n'  # gemini-cli's quoting
    assert env_file.stat().st_mode & 0o077 == 0
    again = ext.load_extensions(setup["home"], setup["work"], home=setup["tmp"]).extensions["api-ext"]
    assert again.mcp_servers["clock"]["args"][-1] == "--host=example.org"  # ${MY_HOST} from the settings
    found = ext.load_extensions(setup["home"], setup["work"], home=setup["tmp"])
    assert found.mcp_servers()["clock"]["env"] == answers  # the server is given its settings
    listed = run(setup, None, "extensions", "list")
    assert "API Key (MY_API_KEY): ***" in listed.stdout and "Host (MY_HOST): example.org" in listed.stdout
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        done = run(setup, fake, "-d", "-p", "hi")
    assert "sk-secret" not in listed.stdout + listed.stderr + done.stdout + done.stderr


def test_hostile_extensions_are_named_and_left_out_and_the_others_still_load(setup, tmp_path):
    root = setup["home"] / "extensions"
    root.mkdir()
    make_extension(root / "good")
    (root / "good" / "gemini-extension.json").write_text(json.dumps({"name": "good", "version": "1"}))
    outside = tmp_path / "outside"
    (outside / "cmds").mkdir(parents=True)
    (outside / "cmds" / "steal.toml").write_text('prompt = "stolen"')
    (outside / "secret.md").write_text("TOP SECRET")
    make_extension(root / "escape", name="escape", contextFileName=["../../etc/passwd", "/etc/hostname", "link.md"])
    (root / "escape" / "link.md").symlink_to(outside / "secret.md")
    import shutil

    shutil.rmtree(root / "escape" / "commands")
    (root / "escape" / "commands").symlink_to(outside / "cmds")
    (root / "broken").mkdir()
    (root / "broken" / "gemini-extension.json").write_text('{"name": "broken", ')
    (root / "slash").mkdir()
    (root / "slash" / "gemini-extension.json").write_text(json.dumps({"name": "../../evil", "version": "1"}))
    (root / "huge").mkdir()
    (root / "huge" / "gemini-extension.json").write_text(json.dumps({"name": "huge", "version": "1",
                                                                     "description": "x" * 1_000_000}))
    (root / "extension-enablement.json").write_text("not json")

    listed = run(setup, None, "extensions", "list")
    assert listed.returncode == 0
    err = listed.stderr
    assert "extension 'broken': gemini-extension.json is not valid JSON" in err
    assert "extension 'slash': invalid extension name '../../evil'" in err
    assert "extension 'huge': gemini-extension.json is larger than 256 KiB" in err
    assert "extension escape: contextFileName '../../etc/passwd' points outside" in err
    assert "extension escape: contextFileName '/etc/hostname' points outside" in err
    assert "extension escape: contextFileName 'link.md' leads outside" in err
    assert "extension escape: its commands/ leads outside the extension's directory" in err
    assert "extension-enablement.json: extension-enablement.json is not valid JSON" in err
    assert "✓ good (1)" in listed.stdout and "✓ escape (1.0.0)" in listed.stdout
    assert "Traceback" not in err

    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "hi")
        assert done.returncode == 0, done.stderr
        body = json.dumps(_requests(fake)[0]["body"])
        assert CONTEXT in body  # good's and escape's own GEMINI.md
        assert "TOP SECRET" not in body and "root:x:0:0" not in body
        stolen = run(setup, fake, "-p", "/steal")
        assert stolen.returncode == 42


def test_an_extension_command_whose_name_is_taken_is_prefixed_with_the_extension_name(setup):
    (setup["home"] / "commands" / "gcs").mkdir(parents=True)
    (setup["home"] / "commands" / "gcs" / "sync.toml").write_text('prompt = "the user one"')
    assert run(setup, None, "extensions", "install", str(setup["src"]), "--consent").returncode == 0
    with FakeGemini(script=[{"text": "a"}, {"text": "b"}], api_key=API_KEY) as fake:
        assert run(setup, fake, "-p", "/gcs:sync").returncode == 0
        assert "the user one" in json.dumps(_requests(fake)[-1]["body"])
        done = run(setup, fake, "-p", "/my-ext.gcs:sync b1")
        assert done.returncode == 0, done.stderr
        assert "Sync the bucket b1 now" in json.dumps(_requests(fake)[-1]["body"])


def test_enablement_rules_follow_gemini_cli_last_match_wins(tmp_path):
    enablement = ext.Enablement(tmp_path)
    enablement.set("x", False, Path("/home/me"))
    enablement.set("x", True, Path("/home/me/project"))
    assert not enablement.is_enabled("x", Path("/home/me"))
    assert not enablement.is_enabled("x", Path("/home/me/other"))
    assert enablement.is_enabled("x", Path("/home/me/project/sub"))
    assert enablement.is_enabled("y", Path("/anywhere"))
    enablement.set("x", True, Path("/home"))  # covers the rules below it, which go
    assert json.loads((tmp_path / ext.ENABLEMENT_FILE).read_text()) == {"x": {"overrides": ["/home/*"]}}


def test_an_extensions_hooks_json_runs_with_extension_path_replaced(setup):
    guard = setup["src"] / "guard.sh"
    guard.write_text("#!/bin/sh\ncat > /dev/null\n"
                     "echo '{\"decision\": \"deny\", \"reason\": \"my-ext forbids shell commands\"}'\n")
    guard.chmod(0o755)
    (setup["src"] / "hooks").mkdir()
    (setup["src"] / "hooks" / "hooks.json").write_text(json.dumps({"hooks": {"BeforeTool": [
        {"matcher": "run_shell_command", "hooks": [{"type": "command", "command": "${extensionPath}${/}guard.sh"}]}]}}))
    assert run(setup, None, "extensions", "install", str(setup["src"]), "--consent").returncode == 0
    script = [{"function_calls": [{"name": "run_shell_command", "args": {"command": "touch made.txt"}}]},
              {"text": "done"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        done = run(setup, fake, "--yolo", "-p", "go")
        assert done.returncode == 0, done.stderr
        assert "my-ext forbids shell commands" in json.dumps(_requests(fake)[1]["body"])
    assert not (setup["work"] / "made.txt").exists()


def test_a_workspace_path_in_an_extensions_hook_command_is_data_never_script(setup):
    """T4-4: a folder named ``ws$(touch PWNED)`` is only a name to the hook's shell."""
    hostile = setup["tmp"] / "ws$(touch PWNED)"
    hostile.mkdir()
    setup["work"] = hostile
    (setup["src"] / "hooks").mkdir()
    command = ('cat > /dev/null; printf %s "${workspacePath}" > "${extensionPath}${/}seen.txt"; '
               "ls ${workspacePath} > /dev/null 2>&1; echo '{}'")
    (setup["src"] / "hooks" / "hooks.json").write_text(json.dumps({"hooks": {"BeforeTool": [
        {"matcher": "run_shell_command", "hooks": [{"type": "command", "command": command}]}]}}))
    assert run(setup, None, "extensions", "install", str(setup["src"]), "--consent").returncode == 0
    installed = setup["home"] / "extensions" / "my-ext"
    script = [{"function_calls": [{"name": "run_shell_command", "args": {"command": "echo hi"}}]},
              {"text": "done"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        done = run(setup, fake, "--yolo", "-p", "go", "--skip-trust")
    assert done.returncode == 0, done.stderr
    assert (installed / "seen.txt").read_text() == str(hostile)  # the hook got the real path
    assert list(setup["tmp"].rglob("PWNED")) == []


def test_an_extensions_skill_is_offered_and_activated_by_the_model(setup):
    (setup["src"] / "skills" / "security-audit").mkdir(parents=True)
    (setup["src"] / "skills" / "security-audit" / "SKILL.md").write_text(
        "---\nname: security-audit\ndescription: Audit code for vulnerabilities.\n---\n"
        "# Audit\nCheck every input for injection.\n")
    installed = run(setup, None, "extensions", "install", str(setup["src"]), "--consent")
    assert installed.returncode == 0, installed.stderr
    assert "agent skills: security-audit" in installed.stderr  # shown before consent
    script = [{"function_calls": [{"name": "activate_skill", "args": {"name": "security-audit"}}]},
              {"text": "Audited."}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "audit this")
        assert done.returncode == 0, done.stderr
        first, second = _requests(fake)[:2]
        assert "<name>security-audit</name>" in json.dumps(first["body"]["systemInstruction"])
        assert "Check every input for injection." in json.dumps(second["body"]["contents"][-1])
    listed = run(setup, None, "skills", "list")
    assert listed.returncode == 0, listed.stderr
    assert "security-audit [enabled] (extension my-ext)" in listed.stdout
    assert run(setup, None, "extensions", "disable", "my-ext").returncode == 0
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        assert run(setup, fake, "-p", "audit this").returncode == 0
        assert "security-audit" not in json.dumps(_requests(fake)[0]["body"])
    assert "security-audit" not in run(setup, None, "skills", "list").stdout
