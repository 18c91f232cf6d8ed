"""What a one-shot run imports, through the local daemon
and embedded: never the REPL (prompt-toolkit), rich's markdown, or a
transport the run does not use; through the daemon, nothing of the server
side either. Not timed: bench/oneshot.py measures the speed; this checks
the cause."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gemini_split.lazy_imports import ONESHOT_NEVER, THIN_ONESHOT_NEVER
from gemini_split.testing.typical_setup import write_typical_setup

from .conftest import info

NEVER = ONESHOT_NEVER
THIN_NEVER = THIN_ONESHOT_NEVER
EMBEDDED_NEVER = NEVER + ("gemini_split_unix",)


#: Runs the command line as ``python -m gemini_split`` does and writes every
#: module loaded by the end (``sys.modules`` at exit) to a file.
#: (``-X importtime`` cannot be used for this: it does not report modules
#: loaded through ``importlib.import_module``, as entry-point plugins are.)
RUN_AND_LIST = """
import atexit, runpy, sys
listing = sys.argv.pop(1)
atexit.register(lambda: open(listing, "w").write("\\n".join(sorted(sys.modules))))
sys.argv[0] = "gemini-split"
runpy.run_module("gemini_split", run_name="__main__", alter_sys=True)
"""


def imported(argv: list[str], environ: dict[str, str], cwd) -> set[str]:
    listing = cwd / "modules.txt"
    out = subprocess.run([sys.executable, "-c", RUN_AND_LIST, str(listing), *argv], env=environ, cwd=cwd,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    return set(listing.read_text().split())


def offending(modules: set[str], never: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in never))


@pytest.mark.timeout(90)
def test_a_prompt_through_the_local_daemon_imports_no_server_repl_or_other_transport(environ, home, tmp_path):
    subprocess.run([sys.executable, "-m", "gemini_split", "daemon", "start"], env=environ, check=True,
                   capture_output=True, timeout=60)
    assert info(home)["pid"]
    modules = imported(["-p", "hi"], environ, tmp_path)
    assert "gemini_split_unix" in modules and "trio" in modules  # the measurement saw the run
    assert offending(modules, THIN_NEVER) == []


@pytest.mark.timeout(120)
def test_a_typical_setup_is_read_through_the_local_daemon_without_yaml_json_or_dotenv(environ, home, tmp_path):
    """A settings.json (with comments, a hook, an MCP server), a custom
    command, an extension without a .env and a skill: read on every run,
    and none of them costs the thin path PyYAML, json or python-dotenv."""
    write_typical_setup(Path(home))
    user = dict(environ, HOME=str(tmp_path / "user"))
    for argv in (["mcp", "list"], ["daemon", "start"]):  # mcp list puts the server's tools in the cache
        subprocess.run([sys.executable, "-m", "gemini_split", *argv], env=user, cwd=tmp_path, check=True,
                       capture_output=True, timeout=60)
    modules = imported(["-p", "hi"], user, tmp_path)
    assert {"gemini_split.userfiles.extensions", "gemini_split.userfiles.hooks", "gemini_split.userfiles.skills"} <= modules
    assert offending(modules, THIN_NEVER) == []


@pytest.mark.timeout(90)
def test_an_embedded_prompt_imports_no_repl_markdown_or_transport_it_does_not_use(environ, tmp_path):
    embedded = {k: v for k, v in environ.items() if k != "GEMINI_SERVER_MODE"}
    modules = imported(["-p", "hi"], embedded, tmp_path)
    assert "google.genai" in modules and "gemini_split_loopback" in modules
    assert offending(modules, EMBEDDED_NEVER) == []
