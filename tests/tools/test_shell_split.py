"""The sans-IO shell splitter: plain functions, no event loop."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gemini_split.shell_split import (
    ShellParseError,
    command_allowed,
    parse_prefix,
    split_command,
    wrapped_command,
)


def parts(command: str) -> list[str]:
    return [str(p) for p in split_command(command)]


def words(command: str) -> list[list[str]]:
    return [[w.text for w in p.words] for p in split_command(command) if not p.group]


@pytest.mark.parametrize(
    "command, expected",
    [
        ("echo hi", [["echo", "hi"]]),
        ("echo hi && ls", [["echo", "hi"], ["ls"]]),
        ("a || b ; c | d & e |& f", [["a"], ["b"], ["c"], ["d"], ["e"], ["f"]]),
        ("a\nb\n\nc", [["a"], ["b"], ["c"]]),
        ("a &&\n  b", [["a"], ["b"]]),
        ("echo 'a;b' \"c|d\" e\\&f", [["echo", "a;b", "c|d", "e&f"]]),
        ("e\\cho \"h\"'i'", [["echo", "hi"]]),
        ("ec\\\nho hi", [["echo", "hi"]]),
        ("echo $(date) `whoami`", [["date"], ["whoami"], ["echo", "$(…)", "`…`"]]),
        ('echo "x $(a "$(b)") y"', [["b"], ["a", "$(…)"], ["echo", "x $(…) y"]]),
        ("(a; b) && c", [["a"], ["b"], ["c"]]),
        ("echo hi # a comment; rm -rf /", [["echo", "hi"]]),
        ("echo a#b; c", [["echo", "a#b"], ["c"]]),
        ("echo hi;", [["echo", "hi"]]),
        ("", []),
        ("   # only a comment", []),
    ],
)
def test_split(command, expected):
    assert words(command) == expected


def test_every_substitution_is_a_part():
    found = words("x > $(a) < `b` 2>\"$(c)\" $(d $(e))")
    assert sorted(map(tuple, found)) == [("a",), ("b",), ("c",), ("d", "$(…)"), ("e",), ("x", "$(…)")]


def test_redirections_are_recorded():
    (cmd,) = split_command("echo hi >out 2>&1 <in >>log &>/dev/null 3<>rw >|clobber")
    ops = [(r.op, r.target.text, r.harmless) for r in cmd.redirects]
    assert ops == [
        (">", "out", False), ("2>&", "1", True), ("<", "in", False), (">>", "log", False),
        ("&>", "/dev/null", True), ("3<>", "rw", False), (">|", "clobber", False),
    ]
    assert [w.text for w in cmd.words] == ["echo", "hi"]


def test_assignments_are_recorded():
    (cmd,) = split_command("A=1 B='x y' make C=2")
    assert [w.text for w in cmd.assignments] == ["A=1", "B=x y"]
    assert [w.text for w in cmd.words] == ["make", "C=2"]
    (cmd,) = split_command("'A=1' cmd")  # quoted: a command named A=1
    assert not cmd.assignments


def test_literal_flags():
    (cmd,) = split_command("echo plain 'quoted' $HOME ~/x *.py {a,b} \"$x\" $'\\x41'")
    assert [w.literal for w in cmd.words] == [True, True, True, False, False, False, False, False, False]


@pytest.mark.parametrize(
    "command",
    [
        "echo 'unterminated", 'echo "unterminated', "echo `unterminated", "echo $(unterminated",
        "echo )", "(echo", "; echo", "echo &&", "echo | ", "a && && b",
        "cat <<EOF\nx\nEOF", "cat <(ls)", "echo >(ls)",
        "echo $((1+2))", "echo $[1+2]", "((x++))",
        "echo ${x:-$(id)}", "echo ${!x}", "echo ${x@P}", "echo ${#x}",
        "if true; then id; fi", "for x in a; do id; done", "while true; do id; done",
        "{ id; }", "[[ -f x ]]", "f() { id; }", "function f { id; }", "! id", "time id", "coproc id",
        "case x in a) id;; esac", "echo hi\\", "echo $()", "(echo) word",
        "echo \"`echo \\\"x\\\"`\"",
    ],
)
def test_refuses_what_it_cannot_vouch_for(command):
    with pytest.raises(ShellParseError):
        split_command(command)


def test_nul_is_refused():
    with pytest.raises(ShellParseError):
        split_command("echo a\x00b")


def test_deep_nesting_is_refused():
    with pytest.raises(ShellParseError):
        split_command("$(" * 50 + "x" + ")" * 50)


def test_wrappers():
    (cmd,) = split_command("eval 'touch x' y")
    assert wrapped_command(cmd) == "touch x y"
    (cmd,) = split_command("bash -c 'a; b' zero one")
    assert wrapped_command(cmd) == "a; b"
    (cmd,) = split_command("sh -c 'a'")
    assert wrapped_command(cmd) == "a"
    (cmd,) = split_command("bash script.sh")
    assert wrapped_command(cmd) is None
    (cmd,) = split_command("echo eval")
    assert wrapped_command(cmd) is None
    for text in ("eval $x", "bash -c \"$x\"", "bash -x -c id", "bash --rcfile f -c id"):
        (cmd,) = split_command(text)
        with pytest.raises(ShellParseError):
            wrapped_command(cmd)


def test_parse_prefix():
    assert parse_prefix("git status") == ("git", "status")
    assert parse_prefix(" 'git'  status ") == ("git", "status")
    for bad in ("git status && ls", "git > x", "A=1 git", "$x", "git *", ""):
        with pytest.raises(ShellParseError):
            parse_prefix(bad)


ECHO = [("echo",)]


@pytest.mark.parametrize(
    "command",
    [
        "echo hi", "echo", "e\\cho hi", "\"echo\" hi", "echo 'a && b'", "echo hi 2>&1", "echo hi >/dev/null",
        "echo a; echo b", "echo a | echo b", "echo $HOME", "(echo a) 2>&1", "eval echo hi", "bash -c 'echo a && echo b'",
        "sh -c \"eval 'echo x'\"", "echo hi # ; touch FLAG", "echo <<< x",
    ],
)
def test_allowed_with_echo(command):
    ok, reasons = command_allowed(command, ECHO)
    assert ok, reasons


@pytest.mark.parametrize(
    "command",
    [
        "echo hi && touch FLAG", "echo $(touch FLAG)", "echo `touch FLAG`", "echo ok > FLAG",
        "echo ok 2>FLAG", "echo >&FLAG", "echo hi < /etc/passwd", "bash -c 'touch FLAG'", "eval touch FLAG",
        "./echo hi", "/bin/echo hi", "echoo hi", "PATH=. echo hi", "\\touch FLAG", "{echo,hi}", "ech? hi",
        "$x hi", "`echo echo` hi", "echo hi\ntouch FLAG", "(touch FLAG)", "(echo hi) > FLAG", "> FLAG",
        "X=1", "bash -c \"$x\"", "echo $[1]", "eval 'echo $(touch FLAG)'", "", "echo hi >&\u0662",
    ],
)
def test_not_allowed_with_echo(command):
    ok, reasons = command_allowed(command, ECHO)
    assert not ok and reasons


def test_prefix_matches_whole_words():
    prefixes = [("git", "status"), ("ls",)]
    assert command_allowed("git status --short", prefixes)[0]
    assert command_allowed("ls -la && git status", prefixes)[0]
    assert not command_allowed("git statusx", prefixes)[0]
    assert not command_allowed("git push", prefixes)[0]
    assert not command_allowed("git", prefixes)[0]
    assert not command_allowed("lsblk", prefixes)[0]
    assert not command_allowed("git $cmd", prefixes)[0]


def test_reasons_name_the_offending_part():
    ok, reasons = command_allowed("echo hi && rm -rf x", ECHO)
    assert not ok and len(reasons) == 1 and "rm -rf x" in reasons[0]


@pytest.mark.skipif(sys.platform == "win32", reason="needs bash")
def test_splitter_agrees_with_bash_on_words():
    """The words the splitter sees are the words bash passes."""
    for command in ["printf '%s\\n' e\\cho \"a b\" 'c d' x\\ y", "printf '%s\\n' \"a\\$b\" 'q\"' \"\\\\\""]:
        (cmd,) = split_command(command)
        out = subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=True).stdout
        assert out.splitlines() == [w.text for w in cmd.words[2:]]
