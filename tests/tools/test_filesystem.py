"""read_file, write_file, replace and list_directory through the executor."""

from __future__ import annotations

import os
import stat

import pytest

from gemini_split.tools.builtin import filesystem
from gemini_split.protocol import ToolCompleted, ToolError, ToolStarted

from .conftest import Env


async def test_read_file(env: Env):
    (env.root / "a.txt").write_text("one\ntwo\nthree\n")
    out = await env.run("read_file", {"file_path": "a.txt"})
    assert out.result == "one\ntwo\nthree\n"
    assert isinstance(out.events[0], ToolStarted) and isinstance(out.events[-1], ToolCompleted)
    out = await env.run("read_file", {"file_path": "a.txt", "start_line": 2, "end_line": 2})
    assert out.result == "two\n"
    out = await env.run("read_file", {"file_path": "a.txt", "start_line": 9})
    assert out.failure.code == "invalid_arguments" and "3 lines" in out.failure.message


async def test_read_file_failures_are_structured(env: Env):
    (env.root / "bin").write_bytes(b"\x89PNG\x00\x01")
    (env.root / "d").mkdir()
    cases = [
        ({"file_path": "missing"}, "not_found"),
        ({"file_path": "bin"}, "binary_file"),
        ({"file_path": "d"}, "is_a_directory"),
        ({}, "invalid_arguments"),
        ({"file_path": 3}, "invalid_arguments"),
        ({"file_path": "a", "bogus": 1}, "invalid_arguments"),
    ]
    for args, code in cases:
        out = await env.run("read_file", args)
        assert out.failure is not None and out.failure.code == code, (args, out.failure)
        assert isinstance(out.events[-1], ToolError)
        assert "Traceback" not in out.failure.message


async def test_read_file_size_cap_says_how_to_read_the_rest(env: Env, monkeypatch):
    monkeypatch.setattr(filesystem, "MAX_READ_LINES", 10)
    (env.root / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 31)))
    out = await env.run("read_file", {"file_path": "big.txt"})
    assert out.result.startswith("line 1\n") and "line 10\n" in out.result and "line 11\n" not in out.result
    assert "start_line=11" in out.result and "of 30 total lines" in out.result
    out = await env.run("read_file", {"file_path": "big.txt", "start_line": 11, "end_line": 30})
    assert out.result.startswith("line 11\n") and out.result.endswith("line 30\n")  # a range is not capped by lines
    monkeypatch.setattr(filesystem, "MAX_READ_BYTES", 40)
    out = await env.run("read_file", {"file_path": "big.txt", "start_line": 5, "end_line": 30})
    assert "[truncated: showing lines 5-" in out.result and "start_line=" in out.result


async def test_read_file_cuts_huge_lines(env: Env):
    (env.root / "min.js").write_text("x" * 100_000 + "\nsecond\n")
    out = await env.run("read_file", {"file_path": "min.js"})
    assert "cut at" in out.result and "second" in out.result and len(out.result) < 5000


async def test_write_file_creates_and_overwrites_exactly(env: Env):
    out = await env.run("write_file", {"file_path": "pkg/mod/new.py", "content": "print('hi')\n"})
    assert out.failure is None and "Created pkg/mod/new.py" in out.result
    assert (env.root / "pkg/mod/new.py").read_text() == "print('hi')\n"
    target = env.root / "keep.sh"
    target.write_text("old\n")
    target.chmod(0o750)
    out = await env.run("write_file", {"file_path": "keep.sh", "content": "new\nline\n"})
    assert out.failure is None and "Overwrote keep.sh" in out.result
    assert target.read_bytes() == b"new\nline\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o750  # mode preserved
    assert sorted(p.name for p in env.root.iterdir()) == ["keep.sh", "pkg"]  # no temp files left
    content = "unicode ✓\r\nno newline at end"
    await env.run("write_file", {"file_path": "u.txt", "content": content})
    assert (env.root / "u.txt").read_bytes() == content.encode()


async def test_write_file_new_file_mode_follows_umask(env: Env):
    old = os.umask(0o027)
    try:
        await env.run("write_file", {"file_path": "m.txt", "content": "x"})
    finally:
        os.umask(old)
    assert stat.S_IMODE((env.root / "m.txt").stat().st_mode) == 0o640


async def test_write_file_refusals(env: Env):
    (env.root / "d").mkdir()
    (env.root / "f").write_text("x")
    for args, code in [
        ({"file_path": "d", "content": "x"}, "is_a_directory"),
        ({"file_path": "f/child", "content": "x"}, "not_a_directory"),
        ({"file_path": ".", "content": "x"}, "is_a_directory"),
    ]:
        out = await env.run("write_file", args)
        assert out.failure is not None and out.failure.code == code, (args, out.failure)
    assert (env.root / "f").read_text() == "x"


async def test_write_is_atomic_when_the_write_fails(env: Env, monkeypatch):
    target = env.root / "precious.txt"
    target.write_text("original\n")

    def boom(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", boom)
    out = await env.run("write_file", {"file_path": "precious.txt", "content": "half"})
    assert out.failure is not None and out.failure.code == "write_failed"
    assert target.read_text() == "original\n"
    assert sorted(p.name for p in env.root.iterdir()) == ["precious.txt"]


async def test_replace_changes_exactly_one_occurrence(env: Env):
    f = env.root / "code.py"
    f.write_text("def a():\n    return 1\n\ndef b():\n    return 2\n")
    out = await env.run("replace", {"instruction": "edit", "file_path": "code.py", "old_string": "    return 2\n", "new_string": "    return 20\n",
                                    "instruction": "make b return 20"})
    assert out.failure is None and "1 replacement" in out.result
    assert f.read_text() == "def a():\n    return 1\n\ndef b():\n    return 20\n"


async def test_replace_zero_matches_fails_clearly(env: Env):
    f = env.root / "code.py"
    f.write_text("alpha\n")
    out = await env.run("replace", {"instruction": "edit", "file_path": "code.py", "old_string": "beta", "new_string": "gamma"})
    assert out.failure.code == "no_match" and "not found" in out.failure.message and out.failure.hint
    assert f.read_text() == "alpha\n"


async def test_replace_multiple_matches_needs_allow_multiple(env: Env):
    f = env.root / "code.py"
    f.write_text("x = 1\nx = 1\nx = 1\n")
    out = await env.run("replace", {"instruction": "edit", "file_path": "code.py", "old_string": "x = 1", "new_string": "x = 2"})
    assert out.failure.code == "multiple_matches" and "3 times" in out.failure.message
    assert "allow_multiple" in out.failure.hint
    assert f.read_text() == "x = 1\nx = 1\nx = 1\n"
    out = await env.run("replace", {"instruction": "edit", "file_path": "code.py", "old_string": "x = 1", "new_string": "x = 2", "allow_multiple": True})
    assert out.failure is None and "3 replacements" in out.result
    assert f.read_text() == "x = 2\nx = 2\nx = 2\n"


async def test_replace_other_cases(env: Env):
    out = await env.run("replace", {"instruction": "edit", "file_path": "fresh.txt", "old_string": "", "new_string": "born\n"})
    assert out.failure is None and (env.root / "fresh.txt").read_text() == "born\n"
    out = await env.run("replace", {"instruction": "edit", "file_path": "fresh.txt", "old_string": "", "new_string": "again"})
    assert out.failure.code == "file_exists"
    out = await env.run("replace", {"instruction": "edit", "file_path": "fresh.txt", "old_string": "born", "new_string": "born"})
    assert out.failure.code == "no_change"
    out = await env.run("replace", {"instruction": "edit", "file_path": "nope.txt", "old_string": "a", "new_string": "b"})
    assert out.failure.code == "not_found"
    (env.root / "blob").write_bytes(b"a\x00b")
    out = await env.run("replace", {"instruction": "edit", "file_path": "blob", "old_string": "a", "new_string": "b"})
    assert out.failure.code == "binary_file"


async def test_replace_keeps_crlf_and_foreign_bytes(env: Env):
    f = env.root / "win.txt"
    f.write_bytes(b"one\r\ntwo\r\nlatin1:\xe9\r\n")
    out = await env.run("replace", {"instruction": "edit", "file_path": "win.txt", "old_string": "one\ntwo", "new_string": "1\n2"})
    assert out.failure is None, out.failure
    assert f.read_bytes() == b"1\r\n2\r\nlatin1:\xe9\r\n"


async def test_describe_shows_a_unified_diff(env: Env):
    from gemini_split.tools.registry import default_tools

    (env.root / "f.txt").write_text("a\nb\nc\n")
    tools = default_tools()
    text = tools.get("replace").describe({"file_path": "f.txt", "old_string": "b", "new_string": "B"}, env.workspace)
    assert text.splitlines()[:6] == ["Edit f.txt", "--- a/f.txt", "+++ b/f.txt", "@@ -1,3 +1,3 @@", " a", "-b"]
    text = tools.get("write_file").describe({"file_path": "g.txt", "content": "x"}, env.workspace)
    assert "--- /dev/null" in text and "+x" in text and "No newline at end of file" in text


async def test_list_directory(env: Env):
    (env.root / "src").mkdir()
    (env.root / "b.py").write_text("")
    (env.root / "a.pyc").write_text("")
    (env.root / "build").mkdir()
    (env.root / ".gitignore").write_text("build/\n*.log\n")
    (env.root / "debug.log").write_text("")
    out = await env.run("list_directory", {"dir_path": "."})
    lines = out.result.splitlines()
    assert lines[0] == "Directory listing for .:"
    assert lines[1:5] == ["[DIR] src", ".gitignore", "a.pyc", "b.py"]
    assert "2 entries ignored by .gitignore" in out.result
    out = await env.run("list_directory", {"dir_path": ".", "ignore": ["*.pyc"]})
    assert "a.pyc" not in out.result
    out = await env.run("list_directory", {"dir_path": "src"})
    assert out.result == "Directory src is empty."
    out = await env.run("list_directory", {"dir_path": "b.py"})
    assert out.failure.code == "not_a_directory"


@pytest.mark.parametrize("tool", ["read_file", "write_file", "replace", "list_directory"])
def test_specs_are_usable(tool):
    from gemini_split.tools.registry import default_tools

    spec = default_tools().get(tool).spec()
    assert spec.name == tool and len(spec.description) > 40
    assert spec.parameters["type"] == "object" and spec.parameters["required"]
    for prop in spec.parameters["properties"].values():
        assert prop.get("description")
