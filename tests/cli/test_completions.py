"""Shell completions: generated from the parser, committed in sync, and they
complete what the parser accepts (bash run for real; zsh and fish when
installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gemini_split.cli import build_parser
from gemini_split.client.profiles import ServerProfile, profile_store
from gemini_split.commands.run_completions import FILE_NAMES, SHELLS, generate

ROOT = Path(__file__).resolve().parents[2]
COMPLETIONS = ROOT / "completions"
BIN = Path(sys.executable).parent
SUBCOMMANDS = ["serve", "attach", "server", "completions", "protocol", "daemon", "extensions", "mcp", "hooks",
               "skills", "restore", "pair"]


@pytest.mark.parametrize("shell", SHELLS)
def test_committed_script_is_what_the_parser_generates(shell):
    committed = (COMPLETIONS / FILE_NAMES[shell]).read_text(encoding="utf-8")
    assert committed == generate(shell, build_parser()), (
        f"completions/{FILE_NAMES[shell]} is out of date with the parser; regenerate it with: "
        f"gemini-split completions {shell} > completions/{FILE_NAMES[shell]}"
    )


def test_every_subcommand_and_option_is_in_each_script():
    parser = build_parser()
    scripts = {shell: generate(shell, parser) for shell in SHELLS}
    flags = [f for a in parser._actions for f in a.option_strings]
    assert "--server" in flags and "--approval-mode" in flags
    for shell, text in scripts.items():
        for word in ["serve", "server", "completions", "list", "add", "remove", "test", "--listen", "--token-env",
                     "stream-json", "auto_edit"]:
            assert word in text, (shell, word)
        for flag in flags:
            if shell == "fish":
                assert (f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}") in text, flag
            else:
                assert flag in text, (shell, flag)


@pytest.fixture
def completion_env(tmp_path):
    """A config dir with two profiles; PATH finds this gemini-split."""
    home = tmp_path / "home"
    store = profile_store(home)
    store.add(ServerProfile.from_address("prod", "wss://gemini.example.com:8443", token_env="PROD_TOKEN"))
    store.add(ServerProfile.from_address("devbox", "stdio:ssh devbox gemini-split serve --stdio"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEMINI")}
    env["GEMINI_SPLIT_HOME"] = str(home)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    if not (BIN / "gemini-split").exists():
        pytest.skip("the gemini-split console script is not installed next to this Python")
    return env


def _bash_complete(words: list[str], env: dict[str, str]) -> list[str]:
    """Run the bash completion function for ``words`` (the last one being
    completed) and return COMPREPLY."""
    array = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    script = (
        f"source {COMPLETIONS / FILE_NAMES['bash']}\n"
        f"COMP_WORDS=({array}); COMP_CWORD={len(words) - 1}\n"
        "_shtab_gemini_split\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], env=env, capture_output=True,
                         text=True, timeout=30, check=True)
    return [line for line in out.stdout.splitlines() if line]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_subcommands_options_choices_and_profiles(completion_env, tmp_path):
    env = completion_env
    assert _bash_complete(["gemini-split", ""], env) == SUBCOMMANDS
    assert _bash_complete(["gemini-split", "se"], env) == ["serve", "server"]
    assert _bash_complete(["gemini-split", "server", ""], env) == ["list", "add", "remove", "status", "connect", "test"]
    assert _bash_complete(["gemini-split", "--server", ""], env) == ["prod", "devbox"]
    assert _bash_complete(["gemini-split", "--server", "p"], env) == ["prod"]
    assert _bash_complete(["gemini-split", "server", "remove", ""], env) == ["prod", "devbox"]
    assert _bash_complete(["gemini-split", "server", "test", "d"], env) == ["devbox"]
    assert _bash_complete(["gemini-split", "-o", ""], env) == ["text", "json", "stream-json"]
    assert _bash_complete(["gemini-split", "--approval-mode", "a"], env) == ["auto_edit", "auto_approve"]
    assert _bash_complete(["gemini-split", "completions", ""], env) == ["bash", "zsh", "fish"]
    assert "--token-env" in _bash_complete(["gemini-split", "server", "add", "--t"], env)
    assert "--stdio" in _bash_complete(["gemini-split", "serve", "--"], env)
    # An option's value is not a subcommand: `-m server` then a subcommand.
    assert _bash_complete(["gemini-split", "-m", "server", ""], env) == SUBCOMMANDS
    # `--server=NAME` (bash splits at '=').
    assert _bash_complete(["gemini-split", "--server", "=", "pr"], env) == ["prod"]


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_subcommands_and_profiles(completion_env):
    script = (
        f"source {COMPLETIONS / FILE_NAMES['fish']}\n"
        "complete -C 'gemini-split '; echo ---; complete -C 'gemini-split --server '; echo ---;"
        "complete -C 'gemini-split server '"
    )
    out = subprocess.run(["fish", "--no-config", "-c", script], env=completion_env, capture_output=True,
                         text=True, timeout=30, check=True).stdout
    top, profiles, server = [[line.split("\t")[0] for line in part.strip().splitlines()] for part in out.split("---")]
    assert sorted(top) == sorted(SUBCOMMANDS)
    assert sorted(profiles) == ["devbox", "prod"]
    assert sorted(server) == ["add", "connect", "list", "remove", "status", "test"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_script_parses():
    subprocess.run(["zsh", "-n", str(COMPLETIONS / FILE_NAMES["zsh"])], check=True, timeout=30)


def test_completions_command_prints_the_script(capsys):
    from io import StringIO

    from gemini_split.cli import main
    from gemini_split.environment import Environment

    out = StringIO()
    assert main(["completions", "bash"], Environment(stdout=out, stderr=StringIO(), environ={})) == 0
    assert out.getvalue() == generate("bash", build_parser())
    err = StringIO()
    assert main(["completions", "tcsh"], Environment(stdout=StringIO(), stderr=err, environ={})) == 2
    assert "invalid choice" in err.getvalue()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_the_extension_and_skill_commands_gemini_cli_has(completion_env):
    env = completion_env
    assert _bash_complete(["gemini-split", "skills", ""], env) == ["list", "enable", "disable", "install", "link",
                                                                  "uninstall"]
    assert _bash_complete(["gemini-split", "skills", "disable", "x", "--scope", ""], env) == ["user", "workspace"]
    extensions = _bash_complete(["gemini-split", "extensions", ""], env)
    assert {"new", "validate", "config"} <= set(extensions)
    assert _bash_complete(["gemini-split", "extensions", "new", "dir", "m"], env) == ["mcp-server"]
    assert "--scope" in _bash_complete(["gemini-split", "extensions", "config", "--"], env)
