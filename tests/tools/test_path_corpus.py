"""Attack the workspace boundary: every escape, through every file tool,
through the real executor in yolo mode (so approval is not what stops it).
The canaries outside the workspace must stay untouched and unread."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gemini_split.tools.base import ToolFailed

from .conftest import CANARY_TEXT, Env

CANARY_MARK = CANARY_TEXT.strip()


@pytest.fixture
def hostile(env: Env) -> Env:
    """The workspace with links laid as traps."""
    r = env.root
    (r / "sub").mkdir()
    (r / "notes.txt").write_text("inside\n")
    os.symlink(env.canary, r / "link_out")  # a file symlink pointing out
    os.symlink(env.outside, r / "dir_link")  # a directory symlink pointing out (mid-path)
    os.symlink("..", r / "up")  # relative link to the parent
    os.symlink(env.outside / "not-yet", r / "dangling")  # dangling, pointing out
    os.symlink("loop2", r / "loop1")  # a loop
    os.symlink("loop1", r / "loop2")
    os.symlink(r / "sub" / ".." / ".." / "outside", r / "sub" / "deep_link")
    return env


def escapes(env: Env) -> list[str]:
    """Paths that must all be refused."""
    r, o = env.root, env.outside
    return [
        "../outside/canary.txt",  # ..
        "sub/../../outside/canary.txt",
        "./../outside/canary.txt",
        str(env.canary),  # absolute, elsewhere
        f"{r}/../outside/canary.txt",  # absolute through the root
        str(env.sibling / "canary.txt"),  # sibling sharing the prefix
        "../ws-sibling/canary.txt",
        "link_out",  # symlink out
        "dir_link/canary.txt",  # symlink mid-path
        "up/outside/canary.txt",
        "sub/deep_link/canary.txt",
        "dangling",  # dangling symlink out
        "dangling/child.txt",
        "loop1",  # symlink loop
        "loop1/child.txt",
        "~",  # home
        "~/canary.txt",
        "~root/x",
        "canary.txt\x00.txt",  # NUL
        "\x00",
        "/",
        str(o),
        "..",
    ]


REFUSAL_CODES = {"outside_workspace", "invalid_path"}


def test_resolve_refuses_every_escape(hostile: Env):
    for path in escapes(hostile):
        with pytest.raises(ToolFailed) as info:
            hostile.workspace.resolve(path)
        assert info.value.code in REFUSAL_CODES, (path, info.value.code)


def test_resolve_codes_say_why(hostile: Env):
    ws = hostile.workspace
    for path, code in [("../x", "outside_workspace"), ("loop1", "invalid_path"), ("a\x00b", "invalid_path"),
                       ("~/x", "outside_workspace"), ("", "invalid_path")]:
        with pytest.raises(ToolFailed) as info:
            ws.resolve(path)
        assert info.value.code == code, path
        assert str(info.value)  # a message the model can read


def test_resolve_allows_what_is_inside(hostile: Env):
    ws, r = hostile.workspace, hostile.root
    assert ws.resolve(".") == r
    assert ws.resolve("notes.txt") == r / "notes.txt"
    assert ws.resolve(str(r / "notes.txt")) == r / "notes.txt"
    assert ws.resolve("sub/../notes.txt") == r / "notes.txt"
    assert ws.resolve("new/dir/file.txt") == r / "new" / "dir" / "file.txt"
    assert ws.resolve("./~tilde") == r / "~tilde"
    os.symlink("notes.txt", r / "alias")  # a link that stays inside is followed
    assert ws.resolve("alias") == r / "notes.txt"
    os.symlink("sub", r / "sub_alias")
    assert ws.resolve("sub_alias/x") == r / "sub" / "x"


def test_resolve_must_exist(hostile: Env):
    with pytest.raises(ToolFailed) as info:
        hostile.workspace.resolve("missing.txt", must_exist=True)
    assert info.value.code == "not_found"


def _calls(path: str) -> list[tuple[str, dict]]:
    return [
        ("read_file", {"file_path": path}),
        ("write_file", {"file_path": path, "content": "PWNED"}),
        ("replace", {"instruction": "edit", "file_path": path, "old_string": "SECRET", "new_string": "PWNED"}),
        ("replace", {"instruction": "edit", "file_path": path, "old_string": "", "new_string": "PWNED"}),
        ("list_directory", {"dir_path": path}),
        ("glob", {"pattern": "*", "dir_path": path}),
        ("grep_search", {"pattern": "CANARY", "dir_path": path}),
    ]


async def test_every_tool_refuses_every_escape(hostile: Env):
    executor = hostile.executor()
    for path in escapes(hostile):
        for tool, args in _calls(path):
            out = await hostile.run(tool, args, executor=executor)
            assert out.failure is not None, (tool, path, out.result)
            assert out.failure.code in REFUSAL_CODES, (tool, path, out.failure)
            assert CANARY_MARK not in out.text(), (tool, path)
            assert hostile.canaries_intact(), (tool, path)
    assert not (hostile.outside / "not-yet").exists()


async def test_glob_patterns_cannot_climb_out(hostile: Env):
    for pattern in ["../outside/*", "../*/canary.txt", f"{hostile.outside}/*", "sub/../../outside/*"]:
        out = await hostile.run("glob", {"pattern": pattern})
        assert out.failure is not None and out.failure.code == "outside_workspace", pattern
        assert CANARY_MARK not in out.text()


async def test_grep_include_pattern_cannot_climb_out(hostile: Env):
    out = await hostile.run("grep_search", {"pattern": "CANARY", "include_pattern": "../outside/*"})
    assert out.failure is not None and out.failure.code == "outside_workspace"


async def test_walkers_do_not_follow_links_out(hostile: Env):
    """Searching the whole workspace finds nothing behind the trap links."""
    out = await hostile.run("grep_search", {"pattern": "CANARY"})
    assert out.failure is None and CANARY_MARK not in out.text()
    assert out.result.startswith("No matches")
    out = await hostile.run("glob", {"pattern": "**/*"})
    assert out.failure is None
    assert "canary" not in out.result and "notes.txt" in out.result
    out = await hostile.run("list_directory", {"dir_path": "."})
    assert out.failure is None and CANARY_MARK not in out.text()
    assert hostile.canaries_intact()


async def test_symlink_to_inside_file_is_searched(hostile: Env):
    os.symlink("notes.txt", hostile.root / "alias.txt")
    out = await hostile.run("grep_search", {"pattern": "inside"})
    assert "File: alias.txt" in out.result and "File: notes.txt" in out.result


async def test_write_replaces_a_link_swapped_in_after_resolve(hostile: Env):
    """Writes rename over the resolved name: a symlink put there is replaced,
    never written through."""
    ws = hostile.workspace
    target = ws.resolve("swapped.txt")
    os.symlink(hostile.canary, target)  # a race: the name becomes a link out
    with pytest.raises(ToolFailed):
        ws.write_atomic(target, b"PWNED", "swapped.txt")  # refuses: not a regular file
    assert hostile.canaries_intact()
    with pytest.raises(ToolFailed) as info:
        ws.open_regular(target, "swapped.txt")  # O_NOFOLLOW
    assert info.value.code in {"invalid_path", "not_a_regular_file"}


async def test_fifo_is_not_opened(env: Env):
    os.mkfifo(env.root / "pipe")
    out = await env.run("read_file", {"file_path": "pipe"})
    assert out.failure is not None and out.failure.code == "not_a_regular_file"
    out = await env.run("grep_search", {"pattern": "x"})  # the walk skips it, does not block
    assert out.failure is None


def test_workspace_root_behind_a_symlink(tmp_path: Path):
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "alias")
    from gemini_split.tools.workspace import Workspace

    ws = Workspace(tmp_path / "alias")
    assert ws.root == real
    assert ws.resolve(str(tmp_path / "alias" / "f.txt")) == real / "f.txt"
    with pytest.raises(ToolFailed):
        ws.resolve(str(tmp_path / "alias" / ".." / "x"))


# --- a trailing slash names a directory (issue 13 §12) ------------------------


async def test_trailing_slash_on_a_file_is_an_error(hostile: Env):
    executor = hostile.executor()
    for path in ["notes.txt/", "notes.txt/.", "./notes.txt/", f"{hostile.root}/notes.txt/", "sub/../notes.txt/"]:
        for tool, args in [("read_file", {"file_path": path}),
                           ("write_file", {"file_path": path, "content": "PWNED"}),
                           ("replace", {"instruction": "edit", "file_path": path, "old_string": "inside", "new_string": "PWNED"}),
                           ("list_directory", {"dir_path": path}),
                           ("grep_search", {"pattern": "inside", "dir_path": path})]:
            out = await hostile.run(tool, args, executor=executor)
            assert out.failure is not None, (tool, path, out.result)
            assert out.failure.code in {"not_a_directory", "invalid_path"}, (tool, path, out.failure)
    assert (hostile.root / "notes.txt").read_text() == "inside\n"


async def test_trailing_slash_on_a_missing_name_does_not_create_a_file(hostile: Env):
    for tool, args in [("write_file", {"file_path": "newdir/", "content": "x"}),
                       ("replace", {"instruction": "edit", "file_path": "newdir/", "old_string": "", "new_string": "x"})]:
        out = await hostile.run(tool, args)
        assert out.failure is not None and out.failure.code == "invalid_path", (tool, out.result)
        assert not (hostile.root / "newdir").exists()
    out = await hostile.run("list_directory", {"dir_path": "sub/"})
    assert out.failure is None  # a directory with a slash is fine


# --- a directory swapped for a symlink mid-operation (issue 13 §2) ------------


async def test_symlink_swap_race_never_reaches_outside(env: Env):
    """A thread swaps ``sub`` for a symlink to the outside directory in a
    tight loop while the tools read, write, list and search through it.
    Resolve-then-open would follow the link now and then; opening component
    by component with O_NOFOLLOW never does."""
    import shutil
    import threading
    import time

    import trio

    r = env.root
    (r / "sub").mkdir()
    (r / "sub" / "canary.txt").write_text("harmless inside\n")
    (r / "sub" / "notes.txt").write_text("inside\n")
    stop = threading.Event()
    swaps = 0

    def swap() -> None:
        nonlocal swaps
        while not stop.is_set():
            try:
                os.rename(r / "sub", r / "sub.real")
                os.symlink(env.outside, r / "sub")
                time.sleep(0)
                os.unlink(r / "sub")
                os.rename(r / "sub.real", r / "sub")
                swaps += 1
            except OSError:
                # A write may have created a new 'sub' meanwhile: put things back.
                if os.path.islink(r / "sub"):
                    os.unlink(r / "sub")
                elif os.path.isdir(r / "sub") and os.path.isdir(r / "sub.real"):
                    shutil.rmtree(r / "sub", ignore_errors=True)
                if os.path.isdir(r / "sub.real") and not os.path.lexists(r / "sub"):
                    os.rename(r / "sub.real", r / "sub")

    calls = [
        ("read_file", {"file_path": "sub/canary.txt"}),
        ("write_file", {"file_path": "sub/new.txt", "content": "PWNED\n"}),
        ("replace", {"file_path": "sub/notes.txt", "old_string": "inside", "new_string": "inside"}),
        ("list_directory", {"dir_path": "sub"}),
        ("grep_search", {"pattern": "CANARY"}),
        ("glob", {"pattern": "**/canary.txt"}),
    ]
    executor = env.executor()
    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    ran = 0
    try:
        with trio.fail_after(20):
            deadline = trio.current_time() + 3.0
            while trio.current_time() < deadline:
                for tool, args in calls:
                    out = await env.run(tool, args, executor=executor)
                    ran += 1
                    assert CANARY_MARK not in out.text(), (tool, out.text()[:500])
                    assert sorted(p.name for p in env.outside.iterdir()) == ["canary.txt"], tool
    finally:
        stop.set()
        thread.join(5)
    assert swaps > 10 and ran > 10, (swaps, ran)  # the race really ran
    assert env.canaries_intact()
