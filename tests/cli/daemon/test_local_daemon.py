"""GEMINI_SERVER_MODE=local: the per-user daemon is started on demand, once,
replaced when it crashed or is another version, and stopped cleanly."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import gemini_split
from gemini_split import __version__
from gemini_split.testing.fake_gemini import FakeGemini
from tests.inprocess import cli

from .conftest import API_KEY, daemon_pids, info, run, wait_gone


def starts(home: str) -> int:
    """How many daemons were started for ``home`` (one line each in the log)."""
    return Path(home, "daemon", "daemon.log").read_text().count("starting:")


@pytest.mark.timeout(60)
def test_a_prompt_in_local_mode_starts_the_daemon_and_the_next_one_reuses_it(environ, home, tmp_path):
    first = cli(["-p", "one"], environ=environ, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout == "Echo: one\n"
    pid = info(home)["pid"]
    second = cli(["-p", "two"], environ=environ, cwd=tmp_path)
    assert second.returncode == 0 and second.stdout == "Echo: two\n", second.stderr
    assert info(home)["pid"] == pid and daemon_pids(home) == [pid]
    assert starts(home) == 1
    # The socket and its directory are closed to everyone else.
    socket_file = Path(home, "daemon", "daemon.sock")
    assert socket_file.stat().st_mode & 0o777 == 0o600
    assert Path(home, "daemon").stat().st_mode & 0o777 == 0o700


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_ten_parallel_first_calls_start_one_daemon(environ, home, tmp_path):
    def call(i: int) -> subprocess.CompletedProcess[str]:
        return run(["-p", f"call {i}"], environ, tmp_path, timeout=120)

    with ThreadPoolExecutor(10) as pool:
        results = list(pool.map(call, range(10)))
    for i, result in enumerate(results):
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"Echo: call {i}\n"
    assert starts(home) == 1
    assert daemon_pids(home) == [info(home)["pid"]]


@pytest.mark.timeout(60)
def test_daemon_stop_leaves_no_process_and_no_socket(environ, home, tmp_path):
    started = run(["daemon", "start"], environ, tmp_path)
    assert started.returncode == 0, started.stderr
    assert "running, pid" in started.stdout
    pid = info(home)["pid"]
    assert daemon_pids(home) == [pid]
    stopped = run(["daemon", "stop"], environ, tmp_path)
    assert stopped.returncode == 0 and f"stopped the daemon (pid {pid})" in stopped.stdout
    assert wait_gone(pid, 1), "daemon stop returned while the daemon was still running"
    assert daemon_pids(home) == []
    assert not Path(home, "daemon", "daemon.sock").exists()
    assert not Path(home, "daemon", "daemon.json").exists()
    status = run(["daemon", "status"], environ, tmp_path)
    assert status.returncode == 1 and "not running" in status.stdout
    again = run(["daemon", "stop"], environ, tmp_path)
    assert again.returncode == 0 and "was not running" in again.stdout


@pytest.mark.timeout(60)
def test_a_crashed_daemons_socket_is_replaced(environ, home, tmp_path):
    assert cli(["daemon", "start"], environ=environ, cwd=tmp_path).returncode == 0
    old = info(home)["pid"]
    os.kill(old, signal.SIGKILL)  # a crash: no clean-up at all
    # Returns once the main thread is a zombie: its other threads may still
    # be exiting, holding the socket (the next test makes that window wide).
    assert wait_gone(old)
    assert Path(home, "daemon", "daemon.sock").exists()  # left behind
    result = cli(["-p", "after the crash"], environ=environ, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == "Echo: after the crash\n", result.stderr
    new = info(home)["pid"]
    assert new != old and daemon_pids(home) == [new]
    assert "the server that made it is gone" in Path(home, "daemon", "daemon.log").read_text()


#: A daemon caught dying: it listens on the daemon's socket and writes its
#: daemon.json, then its main thread ends (the raw exit system call, not
#: exit_group) while another thread lives on for HOLD seconds. The process is
#: a zombie the whole time, and its socket still takes connections that
#: nobody will ever accept; then it goes, and the socket refuses. A SIGKILLed
#: daemon passes through the same state while its worker threads exit: on a
#: loaded machine long enough for a client to probe the socket in it.
DYING_DAEMON = """
import ctypes, json, os, socket, sys, threading, time
path, info, version, hold, number = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
listener = socket.socket(socket.AF_UNIX)
listener.bind(path)
listener.listen()
with open(info, "w") as f:
    json.dump({"pid": os.getpid(), "version": version, "address": "unix:" + path, "started": time.time()}, f)
threading.Thread(target=time.sleep, args=(hold,)).start()
print("dying", flush=True)
ctypes.CDLL(None).syscall(number, 0)
"""
SYS_EXIT = {"x86_64": 60, "aarch64": 93}.get(os.uname().machine)


@pytest.mark.skipif(SYS_EXIT is None, reason="the exit system call's number is known for x86_64 and aarch64 only")
@pytest.mark.timeout(60)
def test_a_dying_daemon_is_waited_for_not_connected_to(environ, home, tmp_path):
    state = Path(home, "daemon")
    state.mkdir(mode=0o700)
    dying = subprocess.Popen([sys.executable, "-I", "-c", DYING_DAEMON, str(state / "daemon.sock"),
                              str(state / "daemon.json"), __version__, "1.5", str(SYS_EXIT)],
                             stdout=subprocess.PIPE)
    try:
        assert dying.stdout.readline() == b"dying\n"
        assert wait_gone(dying.pid, 5)  # a zombie: what a crash looks like from outside
        result = cli(["-p", "after the crash"], environ=environ, cwd=tmp_path)
        assert result.returncode == 0 and result.stdout == "Echo: after the crash\n", result.stderr
        new = info(home)["pid"]
        assert new != dying.pid and daemon_pids(home) == [new]
        assert "the server that made it is gone" in Path(home, "daemon", "daemon.log").read_text()
    finally:
        dying.kill()
        dying.wait()


@pytest.mark.timeout(90)
def test_a_daemon_of_another_version_is_restarted(environ, home, tmp_path):
    # A real older gemini-split: a copy of the package that says 0.0.1.
    old_tree = tmp_path / "old"
    shutil.copytree(Path(gemini_split.__file__).parent, old_tree / "gemini_split",
                    ignore=shutil.ignore_patterns("__pycache__"))
    init = old_tree / "gemini_split" / "__init__.py"
    init.write_text(init.read_text().replace(f'"{__version__}"', '"0.0.1"'))
    old_env = dict(environ, PYTHONPATH=str(old_tree))
    started = run(["daemon", "start"], old_env, tmp_path)
    assert started.returncode == 0, started.stderr
    old = info(home)
    assert old["version"] == "0.0.1"
    status = run(["daemon", "status"], environ, tmp_path)
    assert "version 0.0.1; this client is" in status.stdout

    result = run(["-p", "new version"], environ, tmp_path)
    assert result.returncode == 0 and result.stdout == "Echo: new version\n", result.stderr
    new = info(home)
    assert new["version"] == __version__ and new["pid"] != old["pid"]
    assert wait_gone(old["pid"])
    assert daemon_pids(home) == [new["pid"]]


@pytest.mark.timeout(60)
def test_each_session_runs_on_its_callers_key_and_endpoint(environ, home, fake, tmp_path):
    other_key = "someone-elses-key"
    with FakeGemini(api_key=other_key) as other:
        first = cli(["-p", "first caller"], environ=environ, cwd=tmp_path)
        second = cli(["-p", "second caller"], cwd=tmp_path,
                     environ=dict(environ, GEMINI_API_KEY=other_key, GOOGLE_GEMINI_BASE_URL=other.url))
        # Each fake refuses any key but its own: each answer proves whose key was used.
        assert len(other.requests) == 1 and len(fake.requests) == 1
        third = cli(["-p", "no key"], cwd=tmp_path,
                    environ={k: v for k, v in environ.items() if k != "GEMINI_API_KEY"})
    assert first.returncode == 0 and first.stdout == "Echo: first caller\n", first.stderr
    assert second.returncode == 0 and second.stdout == "Echo: second caller\n", second.stderr
    assert starts(home) == 1  # one daemon served both keys
    # Without a key of its own the daemon makes no request on anyone's key.
    assert third.returncode == 41, third.stderr
    assert "no API key of its own" in third.stderr
    log = Path(home, "daemon", "daemon.log").read_text()
    assert API_KEY not in log and other_key not in log
    # The daemon's environment never held a key.
    pid = info(home)["pid"]
    assert b"GEMINI_API_KEY" not in Path(f"/proc/{pid}/environ").read_bytes()


@pytest.mark.timeout(60)
def test_an_idle_daemon_exits_by_itself(environ, home, tmp_path):
    started = cli(["daemon", "start", "--idle-exit", "1s"], environ=environ, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    pid = info(home)["pid"]
    assert cli(["-p", "keep me busy"], environ=environ, cwd=tmp_path).returncode == 0
    assert wait_gone(pid, 30)
    assert not Path(home, "daemon", "daemon.sock").exists()
    assert "idle for 1s: exiting" in Path(home, "daemon", "daemon.log").read_text()


@pytest.mark.timeout(60)
def test_the_runtime_directory_holds_the_socket_when_set(environ, home, tmp_path):
    runtime = Path(home, "run")
    runtime.mkdir(mode=0o700)
    env = dict(environ, XDG_RUNTIME_DIR=str(runtime))
    result = cli(["-p", "where"], environ=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    socket_file = runtime / "gemini-split" / "daemon.sock"
    assert socket_file.is_socket() and info(home)["address"] == f"unix:{socket_file}"
    status = cli(["daemon", "status"], environ=env, cwd=tmp_path)
    assert f"socket:  {socket_file}" in status.stdout


def test_server_local_is_the_daemon_too(environ, home, tmp_path):
    env = {k: v for k, v in environ.items() if k != "GEMINI_SERVER_MODE"}
    result = cli(["--server", "local", "-p", "by flag"], environ=env, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == "Echo: by flag\n", result.stderr
    assert daemon_pids(home) == [info(home)["pid"]]


@pytest.mark.timeout(90)
def test_leaving_a_repl_on_the_daemon_says_to_resume_with_server_local(environ, home, tmp_path):
    """Issue 45 item 2: the REPL's exit summary names the local daemon as
    ``--server local`` (not its socket), also when GEMINI_SERVER_MODE chose
    it; the command resumes the session, with or without that variable."""
    from tests.ui.repl.pty_driver import CTRL_D, PtyProcess

    repl = PtyProcess([sys.executable, "-m", "gemini_split"], env={**environ, "TERM": "xterm-256color",
                                                                  "NO_COLOR": "1"}, cwd=str(tmp_path))
    try:
        repl.expect(r"/help for commands", timeout=30)
        repl.type("hello daemon")
        repl.send("\r")
        repl.expect(r"Echo: hello daemon")
        repl.expect("› ")
        repl.send(CTRL_D)
        line = repl.expect(r"To resume this session: (gemini-split --resume (s-\S+) --server local)\r?\n")
        assert repl.wait() == 0
    finally:
        repl.close()
    env = {k: v for k, v in environ.items() if k != "GEMINI_SERVER_MODE"}
    resumed = cli([*line.group(1).split()[1:], "-p", "again", "-o", "json"], environ=env, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["session_id"] == line.group(2)
