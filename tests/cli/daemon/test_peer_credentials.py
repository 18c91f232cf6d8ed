"""Only the daemon's own user gets in (SO_PEERCRED), checked with a real
second uid: the tests run a process as ``nobody`` through ``setpriv``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import trio

from gemini_split.protocol import Caller, Connected, Error, Hello, decode, encode
from gemini_split.stamping import stamp
from gemini_split.transport import ConnectFailed, ConnectOptions, ServeOptions, get_transport
from tests.inprocess import cli

from .conftest import info

NOBODY = 65534

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to run a process as another uid")


def as_nobody(script: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    """Run a stdlib-only Python script as uid/gid 65534."""
    return subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         sys.executable, "-I", "-c", textwrap.dedent(script)],
        capture_output=True, text=True, timeout=timeout, cwd="/")


HELLO = encode(stamp(Hello(client="intruder")))

CONNECT_AND_SAY_HELLO = """
    import socket, sys
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(sys.argv[1] if len(sys.argv) > 1 else {path!r})
    except OSError as exc:
        print("connect failed:", type(exc).__name__)
        raise SystemExit(0)
    s.sendall({hello!r}.encode() + b"\\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    print("answer:", data.decode())
"""


@needs_root
@pytest.mark.timeout(60)
def test_another_uid_cannot_even_reach_the_socket(environ, home, tmp_path):
    assert cli(["daemon", "start"], environ=environ, cwd=tmp_path).returncode == 0
    path = info(home)["address"].removeprefix("unix:")
    os.chmod(home, 0o755)  # only the daemon's own directory and socket stand in the way
    result = as_nobody(CONNECT_AND_SAY_HELLO.format(path=path, hello=HELLO))
    assert result.stdout.strip() == "connect failed: PermissionError", result.stderr


@needs_root
@pytest.mark.timeout(60)
def test_another_uid_that_reaches_the_socket_is_refused_by_its_credentials(environ, home, tmp_path):
    assert cli(["daemon", "start"], environ=environ, cwd=tmp_path).returncode == 0
    path = info(home)["address"].removeprefix("unix:")
    # Open every door the file system has, so only SO_PEERCRED is left.
    os.chmod(home, 0o755)
    os.chmod(Path(path).parent, 0o755)
    os.chmod(path, 0o666)
    result = as_nobody(CONNECT_AND_SAY_HELLO.format(path=path, hello=HELLO))
    answer = result.stdout.removeprefix("answer: ").strip()
    assert answer, result.stdout + result.stderr
    refusal = decode(answer)
    assert isinstance(refusal, Error) and refusal.fatal and refusal.code == "unauthorized"
    assert f"uid {NOBODY} is refused" in refusal.message
    log = Path(home, "daemon", "daemon.log").read_text()
    assert f"refused a connection on {path} from uid {NOBODY}" in log
    # Its own user is unaffected.
    ok = cli(["-p", "still mine"], environ=environ, cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout == "Echo: still mine\n", ok.stderr


LISTEN_AS_NOBODY = """
    import os, socket, sys
    s = socket.socket(socket.AF_UNIX)
    s.bind(sys.argv[1])
    s.listen()
    print("listening", flush=True)
    conn, _ = s.accept()
    conn.recv(1)
"""


@needs_root
@pytest.mark.timeout(30)
async def test_the_client_refuses_a_server_of_another_uid():
    folder = Path(tempfile.mkdtemp(prefix="gsd-"))
    try:
        os.chown(folder, NOBODY, NOBODY)
        path = folder / "daemon.sock"
        process = await trio.lowlevel.open_process(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
             sys.executable, "-I", "-c", textwrap.dedent(LISTEN_AS_NOBODY), str(path)],
            stdout=subprocess.PIPE)
        try:
            assert await process.stdout.receive_some(100) == b"listening\n"
            with pytest.raises(ConnectFailed, match=f"runs as uid {NOBODY}, not as you"):
                await get_transport(f"unix:{path}").open_connection(f"unix:{path}", ConnectOptions())
        finally:
            process.kill()
            await process.wait()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def test_a_caller_key_is_refused_on_any_other_transport(tmp_path):
    """hello.caller (a key) over loopback, i.e. anything but the daemon's own
    user on its Unix socket, is a fatal unauthorized error."""
    from gemini_split.server.model.callers import CallerModels, KeylessModel
    from gemini_split.server.config import ServerConfig
    from gemini_split.server.service import AgentService

    service = AgentService(KeylessModel(), ServerConfig(), callers=CallerModels())
    transport = get_transport("loopback:")
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        address = await nursery.start(transport.serve, "loopback:", service.handle_connection, ServeOptions())
        stream = await transport.open_connection(address, ConnectOptions())
        await stream.send(encode(stamp(Hello(caller=Caller(api_key="secret-key")))))
        answer = decode(await stream.receive())
        assert isinstance(answer, Error) and answer.fatal and answer.code == "unauthorized"
        assert "only by a local daemon over its Unix socket" in answer.message
        # Without a caller the same server opens a session.
        stream = await transport.open_connection(address, ConnectOptions())
        await stream.send(encode(stamp(Hello())))
        assert isinstance(decode(await stream.receive()), Connected)
        await stream.aclose()
        nursery.cancel_scope.cancel()
    await service.aclose()


def test_a_callers_key_never_shows_in_its_repr():
    caller = Caller(api_key="secret-key", base_url="http://127.0.0.1:1", model="gemini-2.5-flash")
    assert "secret-key" not in repr(caller) and "secret-key" not in repr(Hello(caller=caller))
