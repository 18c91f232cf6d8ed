"""Issue 34.4: a second client prompting a session whose answer is still
streaming gets the documented ``busy`` (exit status 1, README "Any client
may prompt … refused as busy"), not another client's answer and a
traceback — in text, in ``-o json`` (one JSON object whatever happens),
and in an attached REPL, which keeps the prompt for the user to send again.

The one-shot client is the real ``gemini-split`` process against the real
session (``open_test_service`` over a real WebSocket, in a thread of the
test), whose first answer is held after its first piece until the second
client has been refused: the session is busy exactly as long as the test
needs, not for a 10 s stream. The attached REPL keeps its end-to-end test:
two real clients on one real ``serve`` session, the first one's answer
streamed slowly by the fake Gemini server."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time

import pytest
import trio

from gemini_split.protocol import Finished, GenerateContentRequest, TextDelta
from gemini_split.server.model.base import TextChunk
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.testing.fake_gemini import FakeGemini
from gemini_split.testing.service import open_test_service

from tests.server.attach.test_attach_server import _text, hello
from tests.ui.repl.pty_driver import ENTER, PtyProcess
from tests.ui.repl.test_repl import PROMPT, _environ
from tests.e2e.test_serve_e2e import API_KEY, _env, client, daemon

pytestmark = pytest.mark.timeout(120)

SLOW = {"text": "slow answer " * 40, "chunks": 40, "chunk_delay": 0.25}
#: Seconds the session thread may run (the test's own limit is above it).
SESSION_DEADLINE = 60


class HeldModel(ScriptedModel):
    """A scripted model whose first answer stops after its first piece
    until ``release`` is set (from the session's own Trio run)."""

    def __init__(self, turns):
        super().__init__(turns)
        self.release = trio.Event()

    async def stream(self, request):
        held = len(self.requests) == 0
        async for chunk in super().stream(request):
            yield chunk
            if held and isinstance(chunk, TextChunk):
                held = False
                await self.release.wait()


class BusySession:
    """A session busy with a first client's request, in a thread: the real
    AgentService over a real WebSocket, the first client a raw one. Its
    ``address`` and ``session_id`` are there once the first answer has
    begun; ``finish()`` lets the answer end and returns the first client's
    events."""

    def __init__(self):
        self.model = HeldModel([{"text": "slow answer " * 40, "chunks": 40}, {"text": "not asked"}])
        self._ready: queue.Queue = queue.Queue()
        self._events: list = []
        self._thread = threading.Thread(target=self._run, name="busy-session", daemon=True)

    def __enter__(self) -> "BusySession":
        self._thread.start()
        ready = self._ready.get(timeout=SESSION_DEADLINE)
        if isinstance(ready, BaseException):
            raise ready
        self.address, self.session_id, self._token = ready
        return self

    def __exit__(self, *exc) -> None:
        if self._thread.is_alive():
            trio.from_thread.run_sync(self.model.release.set, trio_token=self._token)
            self._thread.join(SESSION_DEADLINE)

    def finish(self) -> list:
        self.__exit__()
        assert not self._thread.is_alive()
        return self._events

    def _run(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as error:  # handed to the test's thread
            self._ready.put(error)

    async def _serve(self) -> None:
        with trio.fail_after(SESSION_DEADLINE):
            async with open_test_service(self.model, address="ws://127.0.0.1:0") as (_, address), \
                    hello(address) as (first, connected):
                await first.send(GenerateContentRequest(prompt="first"))
                self._events += await first.receive_until(lambda m: isinstance(m, TextDelta))  # held now
                self._ready.put((address, connected.session_id, trio.lowlevel.current_trio_token()))
                self._events += await first.receive_until(lambda m: isinstance(m, Finished))


@pytest.mark.parametrize("output", ["text", "json"])
def test_a_second_prompt_on_a_busy_session_is_refused_as_busy_and_shows_nothing_of_the_other_answer(
        tmp_path, output):
    work = tmp_path / "work"
    work.mkdir()
    with BusySession() as session:
        second = client(["--server", session.address, "--resume", session.session_id, "-p", "second", "-o", output],
                        cwd=work, in_process=False)
        first = session.finish()
    assert isinstance(first[-1], Finished)
    assert "slow answer" in _text(first)
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
    assert len(session.model.requests) == 1  # the second prompt never reached the model


def _start_slow(address: str, work, fake: FakeGemini, *args: str) -> subprocess.Popen:
    """The first client, whose answer streams for about 10 s."""
    first = subprocess.Popen([sys.executable, "-m", "gemini_split", "--server", address, *args, "-p", "first"],
                             cwd=work, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    fake.wait_for_requests(lambda requests: len(requests) >= 1, timeout=30)
    time.sleep(0.5)  # streaming now
    return first


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
