"""Every ``gemini-split`` command the README, docs/ and ``--help`` show is one
the program accepts: a renamed or removed option fails here, not in the
hands of a reader who copied it."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from gemini_split.cli import EPILOG, UsageError, build_parser, split_prompt_words

ROOT = Path(__file__).resolve().parents[1]
#: Where a shown command ends: a comment, or (in the tables of examples) the
#: wide gap before its description.
_END = re.compile(r"\s{3,}|\s+#\s")
_SHELL = set(";&|<>")


def _lines() -> list[tuple[str, str]]:
    shown = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```[a-z]*\n(.*?)```", path.read_text(), re.DOTALL):
            shown += [(path.name, line) for line in re.sub(r"\\\n\s*", " ", block).splitlines()]
    shown += [("gemini-split --help", line) for line in EPILOG.splitlines()]
    return shown


def _commands() -> list[tuple[str, str]]:
    found = []
    for where, line in _lines():
        start = re.search(r"(?:^\s*(?:\$ )?|\|\s*)(gemini-split (?!serve --stdio'))", line)
        if start is not None:
            found.append((where, _END.split(line[start.start(1):], 1)[0].strip()))
    return found


def _words(command: str) -> list[str]:
    """The command's words, up to a redirection, pipe or list operator."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars="".join(_SHELL))
    lexer.whitespace_split = True
    words = []
    for word in lexer:
        if set(word) <= _SHELL:
            break
        words.append(word)
    return words


COMMANDS = _commands()


def test_the_docs_show_commands_at_all():
    assert len(COMMANDS) >= 60  # the extraction still finds what the docs show
    assert {where for where, _ in COMMANDS} >= {"README.md", "deployment.md", "gemini-split --help"}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("where,command", COMMANDS, ids=[f"{w}: {c}" for w, c in COMMANDS])
def test_every_command_shown_parses(where, command):
    parser = build_parser()
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            argv, _ = split_prompt_words(parser, _words(command)[1:])
            parser.parse_args(argv)
    except UsageError as exc:
        pytest.fail(f"{where}: {command}\n{exc}")
    except SystemExit as exc:
        assert exc.code in (0, None), f"{where}: {command}\n{errors.getvalue()}"
