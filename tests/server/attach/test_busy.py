"""Issue 34.4: a second client prompting a session whose answer is still
streaming gets the documented ``busy`` (exit status 1, README "Any client
may prompt … refused as busy"), not another client's answer and a
traceback — in text, in ``-o json`` (one JSON object whatever happens),
and in an attached REPL, which keeps the prompt for the user to send again.

Two real clients on one real ``serve`` session; the first one's answer is
streamed slowly by the fake Gemini server."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.ui.repl.pty_driver import ENTER, PtyProcess
from tests.ui.repl.test_repl import PROMPT, _environ
from tests.e2e.test_serve_e2e import API_KEY, _env, client, daemon

pytestmark = pytest.mark.timeout(120)

SLOW = {"text": "slow answer " * 40, "chunks": 40, "chunk_delay": 0.25}


def _start_slow(address: str, work, fake: FakeGemini, *args: str) -> subprocess.Popen:
    """The first client, whose answer streams for about 10 s."""
    first = subprocess.Popen([sys.executable, "-m", "gemini_split", "--server", address, *args, "-p", "first"],
                             cwd=work, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    fake.wait_for_requests(lambda requests: len(requests) >= 1, timeout=30)
    time.sleep(0.5)  # streaming now
    return first


@pytest.mark.parametrize("output", ["text", "json"])
def test_a_second_prompt_on_a_busy_session_is_refused_as_busy_and_shows_nothing_of_the_other_answer(
        tmp_path, output):
    work = tmp_path / "work"
    work.mkdir()
    with FakeGemini(script=[SLOW, {"text": "not asked"}], api_key=API_KEY) as fake, \
            daemon(tmp_path, fake) as (_, address):
        first = _start_slow(address, work, fake)
        try:
            second = client(["--server", address, "--resume", "latest", "-p", "second", "-o", output], cwd=work,
                            in_process=False)
        finally:
            out, err = first.communicate(timeout=60)
        assert first.returncode == 0, err
        assert "slow answer" in out
    assert second.returncode == 1, second.stderr
    assert "Traceback" not in second.stderr
    assert "slow answer" not in second.stdout
    if output == "json":
        result = json.loads(second.stdout)  # one object
        assert result["error"]["type"] == "busy", result
        assert "still running" in result["error"]["message"]
    else:
        assert second.stdout == ""
        assert "busy" in second.stderr and "still running" in second.stderr, second.stderr
    assert len(fake.requests) == 1  # the second prompt never reached the model


def test_an_attached_repl_prompting_a_busy_session_is_told_busy_and_keeps_the_prompt(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with FakeGemini(script=[{"text": "hello"}, SLOW, {"text": "second answered"}], api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, "--state-dir", str(tmp_path / "state")) as (_, address):
        assert client(["--server", address, "-p", "hi"], cwd=work, in_process=False).returncode == 0
        repl = PtyProcess([sys.executable, "-m", "gemini_split", "attach", "latest", "--server", address,
                           "--label", "laptop"], env=_environ(tmp_path, NO_COLOR="1"), cwd=str(work))
        first = None
        try:
            repl.expect(PROMPT, timeout=30)
            fake.clear_requests()
            first = _start_slow(address, work, fake, "--resume", "latest")
            repl.drain(0.5)
            repl.type("my own question")
            repl.send(ENTER)
            repl.expect(r"the session is busy: another client's request", timeout=20)
            repl.expect(r"› my own question", timeout=20)  # kept, to send again
            first.communicate(timeout=60)
            repl.drain(1.0)
            repl.send(ENTER)  # sent again once the other answer has finished
            repl.expect(r"second answered", timeout=30)
            assert "Traceback" not in repl.text and "Internal error" not in repl.text, repl.text[-3000:]
        finally:
            if first is not None and first.poll() is None:
                first.kill()
            repl.close()
    prompts = [str(r) for r in fake.requests]
    assert sum("my own question" in p for p in prompts) == 1
