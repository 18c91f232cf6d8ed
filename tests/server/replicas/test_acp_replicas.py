"""The ACP bridge (``serve --acp-ws``) on replicas: an editor loading a
session on a replica that does not run it is relayed to the runner (the
bridge is a native client of its own service). Real serve processes, a real
redis-server, the ACP SDK editor."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from gemini_split.testing import redis_server as rs
from gemini_split.testing.fake_gemini import FakeGemini

from tests.faces.acp.helpers import API_KEY, HERE, agent_env, message_text, run_editor

pytestmark = [pytest.mark.skipif(not rs.available(), reason=rs.MISSING), pytest.mark.timeout(120)]


class BridgeReplica:
    """``serve --acp-ws`` on ``--store REDIS_URL``; ``url`` is its ACP bridge."""

    def __init__(self, fake, tmp_path, redis_url: str, name: str):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gemini_split", "serve", "--listen", "127.0.0.1:0", "--acp-ws", "127.0.0.1:0",
             "--store", redis_url, "--lease-ttl", "1.5s"],
            env=agent_env(fake, tmp_path / f"home-{name}"), stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        self.url = None
        seen = []
        while time.monotonic() < deadline and self.url is None:
            line = self.process.stderr.readline()
            seen.append(line)
            assert line, "serve exited before the bridge started: " + "".join(seen)[-2000:]
            m = re.search(r"ACP bridge on (ws://\S+)", line)
            if m:
                self.url = m.group(1)
        assert self.url, "".join(seen)[-2000:]

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stderr.close()


def test_an_editor_loads_on_another_replica_a_session_the_runner_keeps_and_prompts_it(tmp_path, redis_server):
    script = [{"text": "answer one"}, {"text": "answer two, from the runner"}]
    url = redis_server.url_with_prefix()
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        a = BridgeReplica(fake, tmp_path, url, "a")
        b = BridgeReplica(fake, tmp_path, url, "b")
        try:
            session_file = tmp_path / "session"
            plan = {"ws": a.url, "cwd": "/home/someone/project",
                    "steps": [{"do": "initialize"}, {"do": "new"}, {"do": "prompt", "text": "first"},
                              {"do": "write_session", "path": str(session_file)},
                              {"do": "wait_text", "text": "answer two"}]}
            (tmp_path / "a.json").write_text(json.dumps(plan))
            first = subprocess.Popen([sys.executable, str(HERE / "sdk_editor.py"), str(tmp_path / "a.json")],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 60
            while not session_file.exists():
                assert first.poll() is None, first.communicate()[1][-3000:]
                assert time.monotonic() < deadline
                time.sleep(0.05)
            session = session_file.read_text()
            # A keeps the session (its editor is attached): B relays.
            second = run_editor({"ws": b.url, "cwd": "/home/someone/project",
                                 "steps": [{"do": "initialize"}, {"do": "load", "session": session},
                                           {"do": "prompt", "text": "second"}]}, tmp_path)
            out, err = first.communicate(timeout=60)
            assert first.returncode == 0, err[-3000:]
            early = json.loads(out)
        finally:
            a.close()
            b.close()
    assert "error" not in json.dumps(second["results"]), second["results"]
    assert second["results"][2] == {"stopReason": "end_turn"}
    assert message_text(second).endswith("answer two, from the runner")
    # The editor on A saw the answer to the prompt made through B. (Not the
    # prompt itself: a bridge echoes the prompts of its own editors only.)
    assert message_text(early) == "answer oneanswer two, from the runner"
    # One conversation: the model saw the first turn with the second prompt.
    assert len(fake.requests) == 2 and len(fake.requests[-1]["body"]["contents"]) == 3
