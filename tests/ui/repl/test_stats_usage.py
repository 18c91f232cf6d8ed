"""``/stats`` and the line after each answer use the usage the server
reports, and say so when it reports none (gemini.v1 over gRPC has no field
for token counts): never "context 0 tokens, 0.0%" after real turns."""

from __future__ import annotations

import re
import sys

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.faces.grpc.helpers import ServerThread
from .pty_driver import ENTER, PtyProcess
from .test_repl import PROMPT, _environ, ask


def _three_turns_then_stats(repl: PtyProcess) -> None:
    for question in ("one", "two", "three"):
        ask(repl, question)
        repl.expect(rf"Answer {question}\.", timeout=30)
        repl.expect(PROMPT)
    ask(repl, "/stats")
    repl.expect(r"context\s+(\d|not reported)", timeout=15)
    repl.expect(PROMPT)


SCRIPT = [{"text": f"Answer {n}."} for n in ("one", "two", "three")]


@pytest.mark.timeout(90)
def test_stats_over_grpc_says_the_server_reports_no_token_counts(tmp_path):
    with FakeGemini(SCRIPT) as fake, ServerThread(fake) as server:
        repl = PtyProcess([sys.executable, "-m", "gemini_split", "--server", server.address],
                          env=_environ(tmp_path, NO_COLOR="1"), cwd=str(tmp_path), cols=120)
        try:
            repl.expect(PROMPT, timeout=30)
            _three_turns_then_stats(repl)
            repl.send("\x04")
            repl.wait(timeout=20)
        finally:
            repl.close()
    text = repl.text
    assert re.search(r"session\s+\d+ min \d+ s · 3 turns", text)
    assert re.search(r"tokens\s+not reported by the server", text)
    assert re.search(r"context\s+not reported by the server", text)
    assert "0 tokens, 0.0%" not in text and "tokens: 0 in" not in text
    assert "token counts not reported by the server" in text  # after each answer, not zeros


@pytest.mark.timeout(90)
def test_stats_shows_the_last_prompt_the_server_reported(tmp_path):
    script = [dict(turn, usage={"promptTokenCount": 1000 * (i + 1), "candidatesTokenCount": 2,
                                "totalTokenCount": 1000 * (i + 1) + 2}) for i, turn in enumerate(SCRIPT)]
    with FakeGemini(script, api_key="k") as fake:
        repl = PtyProcess([sys.executable, "-m", "gemini_split"],
                          env=_environ(tmp_path, NO_COLOR="1", GEMINI_API_KEY="k", GOOGLE_GEMINI_BASE_URL=fake.url),
                          cwd=str(tmp_path), cols=120)
        try:
            repl.expect(PROMPT, timeout=30)
            _three_turns_then_stats(repl)
        finally:
            repl.close()
    assert re.search(r"tokens\s+6,000 in · 6 out", repl.text)
    assert re.search(r"context\s+3,000 tokens, 0\.3% of the model's 1,048,576", repl.text)
