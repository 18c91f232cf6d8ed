"""One place maps what went wrong to the exit status (gemini-cli's codes)."""

from __future__ import annotations

import pytest

from gemini_split.client.protocol_client import HandshakeFailed, RequestFailed
from gemini_split.errors import BadInput, ConfigurationError, MissingApiKey, ProfileError
from gemini_split.exit_status import ExitStatus, exit_status_for
from gemini_split.transport import AuthenticationFailed, ConnectFailed, ConnectionBroken


@pytest.mark.parametrize(
    ("error", "status"),
    [
        ("model_auth", ExitStatus.AUTH),
        ("unauthorized", ExitStatus.AUTH),
        ("invalid_request", ExitStatus.BAD_INPUT),
        ("message_too_large", ExitStatus.BAD_INPUT),
        ("turn_limit", ExitStatus.TURN_LIMIT),
        ("cancelled", ExitStatus.INTERRUPTED),
        ("internal_error", ExitStatus.ERROR),
        ("a_code_from_a_newer_server", ExitStatus.ERROR),
        (MissingApiKey("no key"), ExitStatus.AUTH),
        (AuthenticationFailed("bad token"), ExitStatus.AUTH),
        (BadInput("empty prompt"), ExitStatus.BAD_INPUT),
        (ConfigurationError("bad flag"), ExitStatus.USAGE),
        (ProfileError("bad profile"), ExitStatus.USAGE),
        (KeyboardInterrupt(), ExitStatus.INTERRUPTED),
        (ConnectFailed("refused"), ExitStatus.ERROR),
        (ConnectionBroken("gone", 1006), ExitStatus.ERROR),
        (RuntimeError("a bug"), ExitStatus.ERROR),
    ],
    ids=repr,
)
def test_each_error_has_one_exit_status(error, status):
    assert exit_status_for(error) is status


def test_an_error_carrying_a_protocol_code_gets_that_codes_status():
    assert exit_status_for(HandshakeFailed("refused", code="unauthorized")) is ExitStatus.AUTH
    assert exit_status_for(RequestFailed("too big", code="message_too_large")) is ExitStatus.BAD_INPUT


@pytest.mark.parametrize("command", [["--list-sessions"], ["protocol", "schema"], ["completions", "bash"],
                                     ["-p", "hello"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path, command):
    """``gemini-split --list-sessions | head -1``: the reader closes the
    pipe; the command stops without a traceback, as tools do on SIGPIPE."""
    import os
    import subprocess
    import sys

    script = tmp_path / "script.json"
    script.write_text('[{"text": "an answer"}, {"text": "' + "long answer line\\n" * 5000 + '"}]')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    env.update(GEMINI_SPLIT_HOME=str(tmp_path / "home"), GEMINI_MODEL=f"scripted:{script}")
    first = subprocess.run([sys.executable, "-m", "gemini_split", "-p", "a first session"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr  # (--list-sessions has one to list)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    try:
        proc = subprocess.run([sys.executable, "-m", "gemini_split", *command], cwd=tmp_path, env=env,
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert proc.stderr == "" and proc.returncode == 0, proc.stderr
