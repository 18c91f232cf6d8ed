"""Shell commands under bubblewrap: escapes tried for real (writing outside
the workspace, reading ~/.ssh, reaching a loopback listener, outliving the
parent), through the real shell tool. Skipped where bwrap does not work."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
import trio

from gemini_split.tools.approval import ApprovalMode, ApprovalPolicy
from gemini_split.tools.executor import ToolExecutor
from gemini_split.tools.registry import default_tools
from gemini_split.tools.workspace import Workspace
from gemini_split.errors import ConfigurationError
from gemini_split.sandbox import Sandbox, SandboxUnavailable, probe_bwrap, sandbox_mode_from

BWRAP = shutil.which("bwrap")
WORKS = BWRAP is not None and probe_bwrap(BWRAP) is None
needs_bwrap = pytest.mark.skipif(not WORKS, reason="bubblewrap is not installed or does not work here "
                                                   "(.ci/run installs it)")
CANARY = "CANARY-SANDBOX-5e1a"


# --- choosing a sandbox ---------------------------------------------------------


def test_none_runs_commands_as_they_are():
    sandbox = Sandbox.resolve("none")
    assert not sandbox.enabled
    assert sandbox.command(["sh", "-c", "x"], cwd="/", writable=["/w"]) == ["sh", "-c", "x"]


def test_unknown_mode():
    with pytest.raises(ValueError, match="auto, bwrap or none"):
        Sandbox.resolve("docker")


@pytest.mark.parametrize("mode", ["auto", "bwrap"])
def test_no_bwrap_refuses_rather_than_running_unconfined(mode, tmp_path):
    with pytest.raises(SandboxUnavailable) as info:
        Sandbox.resolve(mode, environ={"PATH": str(tmp_path)})
    assert "apt-get install bubblewrap" in str(info.value) and "--sandbox none" in str(info.value)


@pytest.mark.parametrize("flag, environ, setting, expected", [
    (None, {}, None, "none"),
    ("auto", {}, None, "auto"),
    ("bwrap", {}, None, "bwrap"),
    (None, {"GEMINI_SANDBOX": "true"}, None, "auto"),
    (None, {"GEMINI_SANDBOX": "1"}, None, "auto"),
    ("auto", {"GEMINI_SANDBOX": "false"}, None, "none"),  # the environment wins, as in gemini-cli
    (None, {}, True, "auto"),
    (None, {}, "bwrap", "bwrap"),
    ("none", {}, True, "none"),
    (None, {"GEMINI_SANDBOX": "docker"}, None, "auto"),
    (None, {"GEMINI_SANDBOX": "podman"}, None, "auto"),
])
def test_mode_precedence(flag, environ, setting, expected):
    warnings: list[str] = []
    assert sandbox_mode_from(flag, environ, setting, warn=warnings.append) == expected
    if environ.get("GEMINI_SANDBOX") in ("docker", "podman"):
        assert warnings and "bubblewrap" in warnings[0]


def test_bad_gemini_sandbox_value():
    with pytest.raises(ConfigurationError, match="GEMINI_SANDBOX"):
        sandbox_mode_from(None, {"GEMINI_SANDBOX": "maybe"})


# --- escapes, through the real shell tool ------------------------------------------


@pytest.fixture
def box():
    """A workspace, a fake home with a key, and a canary directory, all
    *outside* /tmp (which the sandbox replaces anyway), so what hides them
    is the sandbox's own rules."""
    base = Path("/var/tmp") / f"gemini-split-sandbox-{uuid.uuid4().hex[:8]}"
    (base / "ws").mkdir(parents=True)
    (base / "home" / ".ssh").mkdir(parents=True)
    (base / "home" / ".ssh" / "id_ed25519").write_text(secret(base))
    (base / "outside").mkdir()
    (base / "outside" / "canary.txt").write_text(secret(base))
    yield base
    shutil.rmtree(base, ignore_errors=True)


async def run_shell(box: Path, command: str, *, network: bool = False, background: bool = False,
                    policy: ApprovalPolicy | None = None) -> str:
    old_home = os.environ.get("HOME")
    os.environ["HOME"] = str(box / "home")  # the shell tool hands the command this environment
    try:
        sandbox = Sandbox.resolve("bwrap", network=network)
        executor = ToolExecutor(default_tools(sandbox=sandbox), Workspace(box / "ws"),
                                policy or ApprovalPolicy(ApprovalMode.YOLO))
        events: list = []

        async def emit(event):
            events.append(event)

        args = {"command": command, "is_background": background}
        if background:
            args["delay_ms"] = 1500
        result, failure = await executor.execute("c1", "run_shell_command", args, emit)
        executor.registry.close()
        return repr(result) + repr(failure) + repr(events)
    finally:
        if old_home is None:
            del os.environ["HOME"]
        else:
            os.environ["HOME"] = old_home


def secret(box: Path) -> str:
    """What this box's key and canary hold: its own, because the sandbox
    shows /var/tmp (read-only), where other tests' boxes may exist."""
    return f"{CANARY}-{box.name}"


def canary_intact(box: Path) -> bool:
    return (sorted(p.name for p in (box / "outside").iterdir()) == ["canary.txt"]
            and (box / "outside" / "canary.txt").read_text() == secret(box)
            and (box / "home" / ".ssh" / "id_ed25519").read_text() == secret(box))


@needs_bwrap
@pytest.mark.parametrize("command", [
    "echo pwned > ../outside/canary.txt",
    "echo pwned > {base}/outside/canary.txt",
    "touch {base}/outside/new",
    "rm -f {base}/outside/canary.txt",
    "cd .. && touch outside/new2",
    "ln -s {base}/outside link && echo pwned > link/canary.txt",
    "echo pwned > ~/.ssh/id_ed25519",
    "touch /etc/gemini-split-sandbox-x",
    "python3 -c \"open('{base}/outside/py', 'w')\"",
])
async def test_writes_outside_the_workspace_fail(box, command):
    out = await run_shell(box, command.format(base=box))
    assert canary_intact(box), out
    assert not Path("/etc/gemini-split-sandbox-x").exists()


@needs_bwrap
async def test_the_workspace_is_writable(box):
    out = await run_shell(box, "echo made > made.txt && mkdir -p d/e && cat made.txt")
    assert (box / "ws" / "made.txt").read_text() == "made\n" and (box / "ws" / "d" / "e").is_dir()
    assert "made" in out


@needs_bwrap
@pytest.mark.parametrize("command", [
    "cat ~/.ssh/id_ed25519",
    "cat $HOME/.ssh/id_ed25519",
    "cat {base}/home/.ssh/id_ed25519",
    "grep -rs CANARY ~; find / -xdev -name id_ed25519 -exec cat {{}} + 2>/dev/null",
])
async def test_home_is_hidden(box, command):
    out = await run_shell(box, command.format(base=box))
    assert secret(box) not in out


@needs_bwrap
async def test_tmp_is_private(box, tmp_path):
    (tmp_path / "secret.txt").write_text(CANARY)
    out = await run_shell(box, f"cat {tmp_path}/secret.txt; ls /tmp; echo x > /tmp/mine && cat /tmp/mine")
    assert CANARY not in out and "x\\n" in out


class Listener:
    """A loopback TCP listener that records whether anyone connected."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted.set()
            conn.close()

    async def was_reached(self, timeout: float = 5.0) -> bool:
        """Whether a connection came (one the kernel took may reach this
        listener's accept a moment after its client already went on)."""
        return await trio.to_thread.run_sync(self.accepted.wait, timeout)

    def close(self):
        self.stop.set()
        self.thread.join(2)
        self.sock.close()


NET_PROBE = ("python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2); "
             "print('CONN' + 'ECTED')\"")


@needs_bwrap
async def test_no_network_unless_asked(box):
    listener = Listener()
    try:
        out = await run_shell(box, NET_PROBE.format(port=listener.port))
        assert "CONNECTED" not in out and not listener.accepted.is_set()
        out = await run_shell(box, NET_PROBE.format(port=listener.port), network=True)
        assert "CONNECTED" in out and await listener.was_reached()  # the control: --sandbox-network
    finally:
        listener.close()


@needs_bwrap
async def test_a_policy_rule_with_allow_network_gives_exactly_its_commands_the_network(box, tmp_path):
    from gemini_split.policy import load_policy

    rules = tmp_path / "net.toml"
    rules.write_text('[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "python3"\n'
                     'decision = "allow"\npriority = 100\nallowNetwork = true\n\n'
                     '[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "true"\n'
                     'decision = "allow"\npriority = 100\n')
    policy = ApprovalPolicy(ApprovalMode.DEFAULT, policy=load_policy(config_dir=tmp_path, policy_paths=[rules]))
    listener = Listener()
    try:
        probe = NET_PROBE.format(port=listener.port)
        out = await run_shell(box, probe, policy=policy)
        assert "CONNECTED" in out and await listener.was_reached()
        listener.accepted.clear()
        # a part allowed by a rule without allowNetwork: no network for any part
        out = await run_shell(box, "true && " + probe, policy=policy)
        assert "CONNECTED" not in out and not listener.accepted.is_set()
        # the same command decided by the approval mode (yolo), not the rule: none either
        out = await run_shell(box, probe)
        assert "CONNECTED" not in out and not listener.accepted.is_set()
    finally:
        listener.close()


@needs_bwrap
async def test_background_commands_are_sandboxed_too(box):
    listener = Listener()
    try:
        out = await run_shell(box, f"echo pwned > {box}/outside/canary.txt; cat ~/.ssh/id_ed25519; "
                                   + NET_PROBE.format(port=listener.port), background=True)
        assert canary_intact(box) and secret(box) not in out and not listener.accepted.is_set()
    finally:
        listener.close()


@needs_bwrap
def test_the_sandboxed_process_dies_with_its_parent(tmp_path):
    tag = f"{uuid.uuid4().int % 10**6}.25"
    parent = textwrap.dedent(f"""
        import subprocess, sys, time
        from gemini_split.sandbox import Sandbox
        argv = Sandbox.resolve("bwrap").command(["/bin/sh", "-c", "sleep {tag} & sleep {tag}"],
                                                 cwd="{tmp_path}", writable=["{tmp_path}"])
        subprocess.Popen(argv)
        print("started", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 10
        while len(_processes_with(tag, command="sleep")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_processes_with(tag, command="sleep")) == 2, "the sandboxed commands never started"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)
        deadline = time.monotonic() + 10
        while _processes_with(tag) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _processes_with(tag)
    finally:
        proc.kill()
        proc.wait()


def _processes_with(tag: str, command: str = "") -> list[str]:
    """Processes whose command line holds ``tag`` (and starts with ``command``)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if tag.encode() in cmdline and b"python" not in cmdline and cmdline.startswith(command.encode()):
            found.append(pid)
    return found
