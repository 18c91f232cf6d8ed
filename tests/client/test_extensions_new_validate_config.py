"""Issue 43 §5: ``gemini-split extensions new|validate|config`` — gemini-cli's
sub-commands, words and exit statuses, run as a user runs them; a new
extension from a template works when linked."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from gemini_split.userfiles import extensions as ext
from gemini_split.userfiles.extension_templates import TEMPLATES

from .test_extensions import run

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def setup(tmp_path: Path) -> dict:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    return {"home": home, "work": work, "tmp": tmp_path}


def test_new_writes_each_template_and_validate_passes_it(setup):
    for template in TEMPLATES:
        done = run(setup, None, "extensions", "new", f"exts/{template}", template)
        assert done.returncode == 0, done.stderr
        assert done.stdout == (f'Successfully created new extension from template "{template}" at exts/{template}.\n'
                               f'You can install this using "gemini-split extensions link exts/{template}" to test '
                               "it out.\n")
        checked = run(setup, None, "extensions", "validate", f"exts/{template}")
        assert checked.returncode == 0 and checked.stdout == \
            f"Extension exts/{template} has been successfully validated.\n", checked.stderr
    plain = run(setup, None, "extensions", "new", "my-tool")
    assert plain.stdout.startswith("Successfully created new extension at my-tool.\n")
    assert json.loads((setup["work"] / "my-tool" / "gemini-extension.json").read_text()) == \
        {"name": "my-tool", "version": "1.0.0"}
    again = run(setup, None, "extensions", "new", "my-tool")
    assert again.returncode == 1 and f"Path already exists: {setup['work'] / 'my-tool'}" in again.stderr
    unknown = run(setup, None, "extensions", "new", "x", "policies")
    assert unknown.returncode == 2 and "invalid choice: 'policies'" in unknown.stderr


def test_the_mcp_server_template_linked_answers_the_models_call(setup, tmp_path):
    assert run(setup, None, "extensions", "new", "srv", "mcp-server").returncode == 0
    linked = run(setup, None, "extensions", "link", "srv", "--consent")
    assert linked.returncode == 0, linked.stderr
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"function_calls": [{"name": "mcp_pythonServer_fetch_posts", "args": {}}]},
                                  {"text": "done"}]))
    answered = run(setup, None, "-m", f"scripted:{script}", "-p", "posts?", "-o", "stream-json", "--yolo")
    results = [json.loads(line) for line in answered.stdout.splitlines() if '"tool_result"' in line]
    assert results and "Hello from the mcp-server example" in results[0]["output"], answered.stderr
    hook = setup["work"] / "hooks-template"
    assert run(setup, None, "extensions", "new", str(hook), "hooks").returncode == 0
    assert os.access(hook / "scripts" / "on-start.sh", os.X_OK)


def test_validate_says_what_is_wrong_in_gemini_clis_words(setup):
    bad = setup["work"] / "bad"
    bad.mkdir()
    missing = run(setup, None, "extensions", "validate", "bad")
    assert missing.returncode == 1 and f"Configuration file not found at {bad / 'gemini-extension.json'}" \
        in missing.stderr
    (bad / "gemini-extension.json").write_text(json.dumps({"name": "bad_name", "version": "1"}))
    named = run(setup, None, "extensions", "validate", "bad")
    assert named.returncode == 1 and 'Invalid extension name: "bad_name". Only letters' in named.stderr
    (bad / "gemini-extension.json").write_text(json.dumps(
        {"name": "bad", "version": "one", "contextFileName": ["GEMINI.md", "../up.md", "ABSENT.md"]}))
    (bad / "GEMINI.md").write_text("x\n")
    both = run(setup, None, "extensions", "validate", "bad")
    assert both.returncode == 1 and both.stdout == ""
    assert both.stderr == (
        "Validation warnings:\n"
        "  - Warning: Version 'one' does not appear to be standard semver (e.g., 1.0.0).\n"
        "Validation failed with the following errors:\n"
        '  - Invalid context file path: "../up.md". Relative parent directory references ("..") are not allowed.\n'
        "  - The following context files referenced in gemini-extension.json are missing: ABSENT.md\n"
        "Extension validation failed.\n")


def _with_settings(setup: dict) -> Path:
    src = setup["tmp"] / "api"
    src.mkdir()
    (src / "gemini-extension.json").write_text(json.dumps({"name": "api-ext", "version": "1.0.0", "settings": [
        {"name": "API URL", "description": "Where the API is.", "envVar": "API_URL"},
        {"name": "API Key", "description": "Your key.", "envVar": "API_KEY", "sensitive": True}]}))
    assert run(setup, None, "extensions", "link", str(src), "--consent").returncode == 0
    return setup["home"] / "extensions" / "api-ext" / ".env"


def test_config_sets_one_setting_or_all_of_them_and_keeps_secrets_0600(setup):
    env_file = _with_settings(setup)
    one = run(setup, None, "extensions", "config", "api-ext", "API URL", stdin="https://one.example\n")
    assert one.returncode == 0 and one.stdout == 'Setting "API URL" updated.\n', one.stderr
    assert env_file.read_text() == "API_URL=https://one.example\n"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600

    every = run(setup, None, "extensions", "config", "api-ext", stdin="y\nhttps://two.example\ns3cret\n")
    assert every.returncode == 0, every.stderr
    assert every.stdout == 'Configuring settings for "api-ext"...\n'
    assert 'Setting "API URL" (API_URL) is already set. Overwrite? [y/N]: ' in every.stderr
    assert env_file.read_text() == "API_URL=https://two.example\nAPI_KEY=s3cret\n"
    listed = run(setup, None, "extensions", "list")
    assert "API URL (API_URL): https://two.example" in listed.stdout and "API Key (API_KEY): ***" in listed.stdout
    assert "s3cret" not in listed.stdout

    kept = run(setup, None, "extensions", "config", "api-ext", stdin="n\n")
    assert env_file.read_text() == "API_URL=https://two.example\nAPI_KEY=s3cret\n", kept.stderr

    secret_here = run(setup, None, "extensions", "config", "api-ext", "API_KEY", "--scope", "workspace", stdin="x\n")
    assert secret_here.returncode == 1 and "is sensitive" in secret_here.stderr
    assert not (setup["work"] / ".env").exists()


def test_config_workspace_scope_writes_this_folders_env_and_a_trusted_folder_reads_it(setup):
    _with_settings(setup)
    workspace_env = setup["work"] / ".env"
    workspace_env.write_text("# mine\nOTHER=1\nAPI_URL=old\n")
    done = run(setup, None, "extensions", "config", "api-ext", "API_URL", "--scope", "workspace",
               stdin="https://ws.example\n")
    assert done.returncode == 0, done.stderr
    assert workspace_env.read_text() == "# mine\nOTHER=1\nAPI_URL=https://ws.example\n"
    for trusted, url in ((True, "https://ws.example"), (False, None)):
        found = ext.load_extensions(setup["home"], setup["work"], home=setup["tmp"], workspace_settings=trusted)
        assert found.extensions["api-ext"].setting_values.get("API_URL") == url


def test_config_of_what_is_not_there_says_so(setup):
    nothing = run(setup, None, "extensions", "config")
    assert nothing.returncode == 0 and nothing.stdout == "No extensions installed.\n"
    absent = run(setup, None, "extensions", "config", "nope")
    assert absent.returncode == 1 and 'Extension "nope" is not installed.' in absent.stderr
    sneaky = run(setup, None, "extensions", "config", "../x")
    assert sneaky.returncode == 2 and "Names cannot contain path separators" in sneaky.stderr
    _with_settings(setup)
    unknown = run(setup, None, "extensions", "config", "api-ext", "NOPE")
    assert unknown.returncode == 1 and "Setting NOPE not found." in unknown.stderr
