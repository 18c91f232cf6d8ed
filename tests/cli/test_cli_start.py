"""The CLI shell stays light: ``--version``, ``--help`` and ``server list
--names`` (run by the shell completions on every Tab) import neither trio nor
the protocol nor any transport. Not timed: bench/cli_start.py measures the
speed; this checks the cause."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gemini_split.lazy_imports import SHELL_NEVER as HEAVY


#: Runs the command line as ``python -m gemini_split`` does and writes every
#: module loaded by the end (``sys.modules`` at exit) to a file: ``-X
#: importtime`` misses the modules loaded through ``importlib.import_module``,
#: as the subcommands' parsers and runners are.
RUN_AND_LIST = """
import atexit, runpy, sys
listing = sys.argv.pop(1)
atexit.register(lambda: open(listing, "w").write("\\n".join(sorted(sys.modules))))
sys.argv[0] = "gemini-split"
runpy.run_module("gemini_split", run_name="__main__", alter_sys=True)
"""


def _imported_modules(args: list[str], tmp_path) -> set[str]:
    env = {**os.environ, "GEMINI_SPLIT_HOME": str(tmp_path)}
    listing = tmp_path / "modules.txt"
    out = subprocess.run([sys.executable, "-c", RUN_AND_LIST, str(listing), *args], env=env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr[-2000:]
    return set(listing.read_text().split())


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["server", "list", "--names"]], ids=" ".join)
def test_the_shell_imports_no_trio_protocol_or_transport(args, tmp_path):
    modules = _imported_modules(args, tmp_path)
    assert "gemini_split.cli" in modules  # the measurement saw our imports at all
    if args[0] == "server":
        assert "gemini_split.commands.run_server_profiles" in modules  # ... and the runner's
    heavy = sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert heavy == [], f"gemini-split {' '.join(args)} imported {heavy}"


@pytest.mark.timeout(10)
def test_serves_help_states_the_stores_own_defaults():
    """commands/parsers/serve.py copies the store's defaults (importing the
    store would slow ``serve --help``): the copies must say what the store does."""
    from gemini_split.commands.parsers import serve
    from gemini_split.server import store

    assert serve.DEFAULT_SESSION_TTL == store.DEFAULT_SESSION_TTL
    assert serve.DEFAULT_REPLAY_CAPACITY == store.DEFAULT_REPLAY_CAPACITY


COMMAND_LINES = [["serve"], ["attach"], ["server", "list"], ["server", "add", "n", "ws://h:1"], ["server", "remove", "n"],
                 ["server", "status"], ["server", "connect", "n"], ["server", "test", "n"], ["completions", "bash"],
                 ["protocol", "schema"], ["daemon", "start"], ["daemon", "restart"], ["daemon", "run"],
                 ["daemon", "stop"], ["daemon", "status"], ["mcp", "list"], ["mcp", "add", "n", "cmd"],
                 ["mcp", "remove", "n"], ["mcp", "enable", "n"], ["mcp", "disable", "n"], ["mcp", "serve"],
                 ["hooks", "list"],
                 ["skills", "list"], ["skills", "install", "p"], ["skills", "uninstall", "n"],
                 ["skills", "enable", "n"], ["skills", "disable", "n"], ["skills", "link", "p"],
                 ["extensions", "install", "p"], ["extensions", "link", "p"], ["extensions", "list"],
                 ["extensions", "update", "n"], ["extensions", "uninstall", "n"], ["extensions", "enable", "n"],
                 ["extensions", "disable", "n"], ["extensions", "new", "p"], ["extensions", "validate", "p"],
                 ["extensions", "config"], ["restore"], ["pair"]]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("argv", COMMAND_LINES, ids=" ".join)
def test_every_subcommand_names_the_runner_that_runs_it(argv):
    """cli.main imports only the module the subcommand's parser names
    (gemini_split/commands/parsers/): that name must lead to a function."""
    import importlib

    from gemini_split.cli import build_parser

    run = build_parser().parse_args(argv).run
    module, _, function = run.partition(":")
    assert module.startswith("gemini_split.commands.") and ".parsers." not in module
    assert callable(getattr(importlib.import_module(module), function))


def test_every_subcommand_is_on_the_list_above():
    from gemini_split.cli import build_parser
    from gemini_split.commands.run_completions import _fill_all

    parser = build_parser()
    _fill_all(parser)

    def leaves(parser, prefix):
        subs = [a for a in parser._actions if a.__class__.__name__ == "_Subcommands"
                or type(a).__name__ == "_SubParsersAction"]
        if not subs:
            yield prefix
            return
        for name, sub in subs[0].choices.items():
            yield from leaves(sub, [*prefix, name])

    assert sorted(" ".join(p) for p in leaves(parser, [])) == sorted(" ".join(a[:2] if a[0] in (
        "server", "daemon", "mcp", "protocol", "hooks", "skills", "extensions") else a[:1]) for a in COMMAND_LINES)
