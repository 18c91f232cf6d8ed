"""The client end: spawning a command and talking to it, and every way a
command can fail to be a server. Real processes throughout."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest
import trio

from gemini_split.transport import (
    ConnectFailed,
    ConnectionBroken,
    ConnectionClosed,
    ConnectOptions,
    MessageTooLarge,
    get_transport,
)
from gemini_split_stdio import STDERR_TAIL_BYTES, CommandExited, CommandFailed, CommandStream

DEADLINE = 10
ROOT = Path(__file__).resolve().parents[3]


async def connect(*argv: str, max_message_size: int | None = None, **extra) -> CommandStream:
    address = "stdio:" + shlex.join(argv)
    options = ConnectOptions(extra={"cwd": str(ROOT), **extra})
    if max_message_size is not None:
        options.max_message_size = max_message_size
    stream = await get_transport(address).open_connection(address, options)
    assert isinstance(stream, CommandStream)
    return stream


def python(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


def is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie nobody has reaped yet is gone too
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


async def test_a_missing_command_fails_at_once_naming_it():
    with trio.fail_after(DEADLINE):
        with pytest.raises(ConnectFailed, match="no-such-command-xyz.*not found"):
            await connect("no-such-command-xyz", "serve")


async def test_a_file_that_is_not_executable_fails_at_once(tmp_path):
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\n")
    with trio.fail_after(DEADLINE):
        with pytest.raises(ConnectFailed, match="permission denied"):
            await connect(str(script))


async def test_a_command_that_exits_at_once_fails_to_connect_with_its_status():
    with trio.fail_after(DEADLINE):
        stream = await connect("false")
        with pytest.raises(CommandFailed) as info:
            await stream.receive()
        assert isinstance(info.value, ConnectFailed) and isinstance(info.value, ConnectionBroken)
        assert info.value.returncode == 1
        assert "'false' exited with status 1 before saying anything" in str(info.value)
        with pytest.raises(CommandFailed):  # and keeps saying so
            await stream.send("x")
        await stream.aclose()


async def test_a_command_that_dies_shows_the_tail_of_its_stderr():
    with trio.fail_after(DEADLINE):
        stream = await connect("sh", "-c", "echo 'warming up' >&2; echo 'fatal: no such profile' >&2; exit 3")
        with pytest.raises(CommandFailed) as info:
            await stream.receive()
        message = str(info.value)
        assert "status 3" in message
        assert "warming up\n  fatal: no such profile" in message
        assert info.value.stderr_tail.endswith("fatal: no such profile")
        assert stream.stderr_tail() == "warming up\nfatal: no such profile\n"
        await stream.aclose()


async def test_garbage_is_delivered_as_lines_then_the_exit_is_reported():
    with trio.fail_after(DEADLINE):
        stream = await connect("sh", "-c", "echo 'Welcome to box!'; echo 'login failed' >&2; exit 2")
        assert await stream.receive() == "Welcome to box!"  # the protocol layer's to reject
        with pytest.raises(CommandExited) as info:
            await stream.receive()
        assert not isinstance(info.value, ConnectFailed)  # it did say something
        assert "exited with status 2" in str(info.value)
        assert "login failed" in str(info.value)
        await stream.aclose()


async def test_an_unfinished_last_line_is_reported_not_delivered():
    with trio.fail_after(DEADLINE):
        stream = await connect("printf", "%s", "Password:")
        with pytest.raises(CommandFailed, match="unfinished line 'Password:'"):
            await stream.receive()
        await stream.aclose()


async def test_a_command_killed_by_a_signal_says_which():
    with trio.fail_after(DEADLINE):
        stream = await connect("sh", "-c", "kill -KILL $$")
        with pytest.raises(CommandFailed, match="killed by SIGKILL"):
            await stream.receive()
        await stream.aclose()


async def test_a_chatty_stderr_never_blocks_the_command_and_only_its_tail_is_kept():
    code = "import sys; sys.stderr.write('noise ' * 50_000 + 'the end'); print('done')"
    with trio.fail_after(DEADLINE):
        stream = await connect(*python(code))
        assert await stream.receive() == "done"
        with pytest.raises(CommandExited):
            await stream.receive()
        tail = stream.stderr_tail()
        assert len(tail.encode()) <= STDERR_TAIL_BYTES
        assert tail.endswith("noise the end")
        await stream.aclose()


async def test_show_stderr_copies_it_to_ours(capsys):
    with trio.fail_after(DEADLINE):
        stream = await connect("sh", "-c", "echo 'progress: 50%' >&2; echo ready", show_stderr=True)
        assert await stream.receive() == "ready"
        with pytest.raises(CommandExited):
            await stream.receive()
        await stream.aclose()
    assert "progress: 50%" in capsys.readouterr().err


async def test_a_line_over_the_limit_is_refused_and_the_stream_goes_on():
    with trio.fail_after(DEADLINE):
        stream = await connect(*python("print('x' * 5000); print('after')"), max_message_size=1000)
        with pytest.raises(MessageTooLarge):
            await stream.receive()
        assert await stream.receive() == "after"
        await stream.aclose()


async def test_a_clean_exit_on_end_of_input_is_waited_for_not_killed():
    with trio.fail_after(DEADLINE):
        stream = await connect("cat", close_grace=5)
        await stream.send('{"type":"ping"}')
        assert await stream.receive() == '{"type":"ping"}'
        with trio.fail_after(2):
            await stream.aclose()
        assert stream.returncode == 0
        await stream.aclose()  # idempotent
        with pytest.raises(ConnectionClosed):
            await stream.receive()


async def test_aclose_kills_the_whole_group_even_what_ignores_sigterm():
    # The leader and its child both ignore SIGTERM and end of input.
    with trio.fail_after(DEADLINE):
        stream = await connect("sh", "-c", "trap '' TERM; sleep 60 & echo $!; wait", close_grace=0.2)
        grandchild = int(await stream.receive())
        assert not is_gone(grandchild)
        await stream.aclose()
        assert stream.returncode == -9
        with trio.fail_after(2):
            while not is_gone(grandchild):
                await trio.sleep(0.02)


async def test_aclose_kills_stragglers_a_dead_leader_left_behind():
    # The leader dies of SIGTERM; the child it started ignores it.
    with trio.fail_after(DEADLINE):
        stream = await connect("sh", "-c", "(trap '' TERM; sleep 60) & echo $!; wait", close_grace=0.2)
        grandchild = int(await stream.receive())
        await stream.aclose()
        assert stream.returncode == -15
        with trio.fail_after(2):
            while not is_gone(grandchild):
                await trio.sleep(0.02)


async def test_aclose_under_cancellation_still_cleans_up():
    with trio.fail_after(DEADLINE):
        stream = await connect("sleep", "60", close_grace=0.2)
        with trio.CancelScope() as scope:
            scope.cancel()
            await stream.aclose()
        assert stream.returncode == -15


async def test_send_waits_for_the_pipe_and_a_cancelled_send_never_tears_a_line():
    # Reads nothing for a while, then reports each line it got.
    code = (
        "import sys, time\n"
        "time.sleep(0.5)\n"
        "for line in sys.stdin: print(len(line), line[:4], flush=True)"
    )
    with trio.fail_after(DEADLINE):
        stream = await connect(*python(code))
        with trio.move_on_after(0.1) as scope:
            await stream.send("b" * 1_000_000)  # far more than a pipe holds: it must wait
        assert scope.cancelled_caught
        await stream.send("next")  # first finishes the line already begun
        assert await stream.receive() == "1000001 bbbb"
        assert await stream.receive() == "5 next"
        await stream.aclose()


async def test_concurrent_receive_is_woken_by_aclose():
    with trio.fail_after(DEADLINE):
        stream = await connect("sleep", "60", close_grace=0.2)
        async with trio.open_nursery() as nursery:

            async def receiver():
                with pytest.raises(ConnectionClosed):
                    await stream.receive()

            nursery.start_soon(receiver)
            await trio.sleep(0.05)
            await stream.aclose()
