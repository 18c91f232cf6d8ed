"""glob, grep_search and the .gitignore matcher."""

from __future__ import annotations

import os
import time

import pytest

from gemini_split.gitignore import IgnoreRules, glob_to_regex

from .conftest import Env


def ignored(lines: str, path: str, is_dir: bool = False, base: str = "") -> bool:
    rules = IgnoreRules()
    rules.add_lines(lines, base)
    return rules.is_ignored(path, is_dir)


@pytest.mark.parametrize(
    "lines, path, is_dir, expected",
    [
        ("*.log", "a.log", False, True),
        ("*.log", "deep/er/a.log", False, True),
        ("*.log", "a.log.txt", False, False),
        ("build/", "build", True, True),
        ("build/", "build", False, False),  # directories only
        ("build/", "src/build", True, True),
        ("/build", "src/build", True, False),  # anchored
        ("/build", "build", True, True),
        ("doc/frotz", "doc/frotz", True, True),
        ("doc/frotz", "a/doc/frotz", True, False),  # a middle slash anchors
        ("**/foo", "a/b/foo", False, True),
        ("a/**/b", "a/b", False, True),
        ("a/**/b", "a/x/y/b", False, True),
        ("a/**", "a/x/y", False, True),
        ("*.py\n!keep.py", "keep.py", False, False),
        ("*.py\n!keep.py", "drop.py", False, True),
        ("!keep.py\n*.py", "keep.py", False, True),  # the later line wins
        ("\\#hash", "#hash", False, True),
        ("# comment", "# comment", False, False),
        ("\\!bang", "!bang", False, True),
        ("trail   ", "trail", False, True),
        ("f[0-9].txt", "f7.txt", False, True),
        ("f[!0-9].txt", "f7.txt", False, False),
        ("f?.txt", "f/.txt", False, False),
        ("", "x", False, False),
    ],
)
def test_gitignore_rules(lines, path, is_dir, expected):
    assert ignored(lines, path, is_dir) is expected


def test_nested_gitignore_is_relative_to_its_directory():
    rules = IgnoreRules()
    rules.add_lines("*.tmp", "")
    rules.add_lines("/local.txt\n!keep.tmp", "sub")
    assert rules.is_ignored("sub/local.txt", False)
    assert not rules.is_ignored("local.txt", False)
    assert not rules.is_ignored("sub/keep.tmp", False)
    assert rules.is_ignored("other/keep.tmp", False)


def test_glob_regex():
    import re

    def m(pattern, path):
        return bool(re.fullmatch(glob_to_regex(pattern, braces=True), path))

    assert m("**/*.py", "a.py") and m("**/*.py", "x/y/a.py")
    assert m("*.py", "a.py") and not m("*.py", "x/a.py")
    assert m("src/**/*.{ts,tsx}", "src/a/b.tsx") and not m("src/**/*.{ts,tsx}", "src/a/b.js")
    assert m("a[bc]d", "acd") and m("a\\*", "a*") and not m("a\\*", "ab")


@pytest.fixture
def tree(env: Env) -> Env:
    r = env.root
    files = {
        "README.md": "Project readme\nTODO: write docs\n",
        "src/app.py": "import os\n\ndef main():\n    # TODO: implement\n    return 0\n",
        "src/util.py": "def helper():\n    return 'todo later'\n",
        "src/web/index.ts": "export const todo = 1;\n",
        "src/web/view.tsx": "// TODO render\n",
        "build/out.py": "# TODO generated\n",
        "notes/debug.log": "TODO in a log\n",
        "notes/keep.log": "TODO kept\n",
        ".git/config": "TODO in git internals\n",
    }
    for name, text in files.items():
        path = r / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (r / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00TODO")
    (r / ".gitignore").write_text("build/\n*.log\n")
    (r / "notes" / ".gitignore").write_text("!keep.log\n")
    old = time.time() - 7 * 24 * 3600
    for p in r.rglob("*"):
        os.utime(p, (old, old))
    os.utime(r / "src" / "util.py")  # the one recent file
    return env


async def test_glob(tree: Env):
    out = await tree.run("glob", {"pattern": "**/*.py"})
    assert out.failure is None
    lines = out.result.splitlines()
    assert "Found 2 files" in lines[0]
    assert lines[1:] == ["src/util.py", "src/app.py"]  # recent first, build/ ignored
    out = await tree.run("glob", {"pattern": "**/*.py", "respect_git_ignore": False})
    assert "build/out.py" in out.result
    out = await tree.run("glob", {"pattern": "*.{ts,tsx}", "dir_path": "src/web"})
    assert out.result.splitlines()[1:] == ["src/web/index.ts", "src/web/view.tsx"]
    out = await tree.run("glob", {"pattern": "readme.MD"})
    assert "README.md" in out.result
    out = await tree.run("glob", {"pattern": "readme.MD", "case_sensitive": True})
    assert out.result.startswith("No files found")
    out = await tree.run("glob", {"pattern": "**/*.log"})
    assert out.result.splitlines()[1:] == ["notes/keep.log"]
    out = await tree.run("glob", {"pattern": "**/config"})
    assert out.result.startswith("No files found")  # .git is never searched


async def test_grep_search(tree: Env):
    out = await tree.run("grep_search", {"pattern": "todo"})
    assert out.failure is None
    text = out.result
    assert text.startswith('Found 6 matches for pattern "todo"')
    for expected in ["File: README.md\nL2: TODO: write docs", "File: src/app.py\nL4:     # TODO: implement",
                     "File: src/util.py", "File: notes/keep.log"]:
        assert expected in text
    for absent in ["build/out.py", "debug.log", "image.png", ".git"]:
        assert absent not in text


async def test_grep_search_options(tree: Env):
    out = await tree.run("grep_search", {"pattern": "TODO", "case_sensitive": True, "include_pattern": "*.py"})
    assert "File: src/app.py" in out.result and "util.py" not in out.result
    out = await tree.run("grep_search", {"pattern": "todo", "include_pattern": "src/**/*.{ts,tsx}"})
    assert "index.ts" in out.result and "view.tsx" in out.result and "app.py" not in out.result
    out = await tree.run("grep_search", {"pattern": "todo", "dir_path": "src", "names_only": True})
    assert out.result.splitlines()[1:] == ["src/app.py", "src/util.py", "src/web/index.ts", "src/web/view.tsx"]
    out = await tree.run("grep_search", {"pattern": "todo", "exclude_pattern": "implement|later"})
    assert "implement" not in out.result and "later" not in out.result and "README.md" in out.result
    out = await tree.run("grep_search", {"pattern": "todo", "total_max_matches": 2})
    assert out.result.startswith("Found 2 matches") and "total_max_matches=2" in out.result
    (tree.root / "many.txt").write_text("todo\n" * 10)
    out = await tree.run("grep_search", {"pattern": "todo", "max_matches_per_file": 3, "include_pattern": "many.txt"})
    assert out.result.count("\nL") == 3 and "max_matches_per_file=3" in out.result
    out = await tree.run("grep_search", {"pattern": "zzz-nothing"})
    assert out.result.startswith("No matches found")


async def test_grep_search_failures(tree: Env):
    out = await tree.run("grep_search", {"pattern": "("})
    assert out.failure.code == "invalid_pattern" and out.failure.hint
    out = await tree.run("grep_search", {"pattern": "x", "dir_path": "README.md"})
    assert out.failure.code == "not_a_directory"
    out = await tree.run("grep_search", {"pattern": "x", "total_max_matches": 0})
    assert out.failure.code == "invalid_arguments"
