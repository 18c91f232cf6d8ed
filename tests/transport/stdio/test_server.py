"""The server end: this process's own stdin and stdout, seen from outside
the way a client (or a person) sees it: bytes in, bytes out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio

from gemini_split.transport import ServeOptions, TransportError, get_transport

DEADLINE = 10
ROOT = Path(__file__).resolve().parents[3]


async def run_server(module: str, *args: str, stdin: bytes) -> subprocess.CompletedProcess:
    with trio.fail_after(DEADLINE):
        return await trio.run_process(
            [sys.executable, "-m", module, *args],
            stdin=stdin, capture_stdout=True, capture_stderr=True, cwd=ROOT, check=False,
        )


async def test_stdout_carries_only_protocol_whatever_the_handler_prints():
    lines = b'{"type":"ping","id":"1"}\n' b'"two\\nlines"\n'
    result = await run_server("tests.transport.stdio.noisy_server", stdin=lines)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout == lines
    stderr = result.stderr.decode()
    for stray in ['stray print {"type":"ping","id":"1"}', "stray print two\nlines",
                  "stray log", "stray write to fd 1", "stray child output"]:
        assert stray in stderr


async def test_end_of_stdin_ends_the_connection_and_serve_returns():
    result = await run_server("tests.transport.stdio.noisy_server", stdin=b"")
    assert result.returncode == 0
    assert result.stdout == b""
    assert result.stderr.decode().splitlines() == ["started at stdio:-", "serve returned"]


async def test_a_server_exits_when_its_client_closes_stdin_mid_session():
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "tests.transport.conformance.echo"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT,
    )
    try:
        with trio.fail_after(DEADLINE):
            await process.stdin.send_all(b"hello\n")
            assert await process.stdout.receive_some() == b"hello\n"
            await process.stdin.aclose()
            assert await process.wait() == 0
            assert await process.stdout.receive_some() == b""
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_the_wire_is_lines_a_person_can_type():
    typed = [
        b"hello\r\n",  # a CRLF line end is tolerated
        b"\n",  # an empty line carries nothing
        b'{"type":"get_state","id":"7"}\n',
        b'"a \\"quoted\\" word"\n',  # a JSON string is decoded: a "quoted" word
        b'"\\"starts with a quote"\n',  # which has to travel as a JSON string
        b"not \xff utf-8\n",
    ]
    result = await run_server("tests.transport.conformance.echo", stdin=b"".join(typed))
    assert result.stdout.splitlines(keepends=True) == [
        b"hello\n",
        b'{"type":"get_state","id":"7"}\n',
        b'a "quoted" word\n',
        b'"\\"starts with a quote"\n',
        b"not \xef\xbf\xbd utf-8\n",
    ]


async def test_a_line_over_the_limit_is_refused_and_the_session_goes_on():
    result = await run_server(
        "tests.transport.conformance.echo", "--max-message-size", "100",
        stdin=b"x" * 100_000 + b"\nafter\n" + b"y" * 100 + b"\n",
    )
    assert result.stdout == b"error:too_large\nafter\n" + b"y" * 100 + b"\n"


async def test_serve_takes_only_its_own_stdio():
    with pytest.raises(TransportError, match="only this process's own stdin"):
        await get_transport("stdio:-").serve(
            "stdio:ssh box", lambda stream: None, ServeOptions()
        )
