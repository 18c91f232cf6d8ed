"""Issue 32 in the REPL, under a pty: a running sub-agent is one collapsed
block under its call with the tool it runs now and the last lines of its
text (issue 45 §3), a one-line summary when it is done, Ctrl-T expands it;
``/stats`` splits tokens and tool calls per agent; ``/agents
list|disable|enable|reload`` persist gemini-cli's ``agents.overrides``."""

from __future__ import annotations

import json
import socket
import time
from contextlib import contextmanager

import pytest

from gemini_split.userfiles.settings import strip_json_comments

from .pty_driver import CTRL_C
from .test_turn_display import screen_lines
from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401  (fixtures)

pytestmark = pytest.mark.timeout(90)

MAIN = "You are gemini-split"


@pytest.fixture
def agents_home(tmp_path):
    root = tmp_path / "home" / "agents"
    root.mkdir(parents=True)
    (root / "scout.md").write_text("---\nname: scout\ndescription: Scouts the code.\ntools: [read_file]\n---\n"
                                   "You are SCOUT.\n")
    return tmp_path / "home"


def test_a_sub_agent_shows_as_a_block_then_one_line_and_ctrl_t_expands_it(start_repl, agents_home):  # noqa: F811
    repl = start_repl([
        {"system_contains": MAIN, "function_calls": [{"name": "scout", "args": {"query": "read the notes"}}]},
        {"system_contains": "SCOUT", "text": "SCOUT-SAYS reading", "delay": 1.5,
         "function_calls": [{"name": "read_file", "args": {"file_path": "notes.txt"}}]},
        {"system_contains": "SCOUT", "function_calls": [{"name": "complete_task",
                                                         "args": {"result": "The notes say: the notes."}}]},
        {"system_contains": MAIN, "text": "Scout read them."},
    ], "--yolo")
    ask(repl, "what do the notes say?")
    repl.expect(r"└ scout thinking…")  # collapsed while it runs
    repl.expect(r"│ SCOUT-SAYS reading")  # with the latest lines of its text
    repl.expect(r"✓ scout completed · 2 turns · 1 tool calls · [\d,]+ tokens: The notes say: the notes\.")
    repl.expect(r"Scout read them\.")
    repl.expect(PROMPT)
    repl.drain(0.3)
    # Its text stays in its block (gone with it) until expanded.
    assert "SCOUT-SAYS" not in "\n".join(screen_lines(repl))
    repl.send("\x14")  # Ctrl-T
    repl.expect(r"sub-agent 1: scout")
    repl.expect(r"SCOUT-SAYS reading")
    repl.expect(r"read_file\(file_path='notes.txt'\)\s+done")
    ask(repl, "/stats")
    repl.expect(r"main agent\s+1 tool calls · [\d,]+ tokens")
    repl.expect(r"↳ scout\s+1 run · 2 turns · 1 tool calls · [\d,]+ tokens")
    repl.expect(PROMPT)


def test_agents_are_listed_disabled_enabled_and_the_choice_persists(start_repl, agents_home):  # noqa: F811
    (agents_home / "settings.json").write_text('{\n  // my own note\n  "general": {"vimMode": false}\n}\n')
    repl = start_repl([])
    ask(repl, "/agents list")
    repl.expect(r"codebase_investigator \[enabled\] \(builtin\)")
    repl.expect(r"scout \[enabled\] \(user\)")
    repl.expect(PROMPT)
    ask(repl, "/agents disable scout")
    repl.expect(r'Sub-agent "scout" disabled in user settings')
    repl.expect(PROMPT)
    saved = (agents_home / "settings.json").read_text()
    assert "// my own note" in saved  # the user's comment is kept
    assert json.loads(strip_json_comments(saved)) == {
        "general": {"vimMode": False}, "agents": {"overrides": {"scout": {"enabled": False}}}}
    ask(repl, "/agents list")
    repl.expect(r"scout \[disabled\] \(user\)")
    repl.expect(PROMPT)
    ask(repl, "/agents enable scout")
    repl.expect(r'Sub-agent "scout" enabled in user settings')
    repl.expect(PROMPT)
    (agents_home / "agents" / "bad.md").write_text("---\nname: Bad Name\ndescription: x\n---\n")
    ask(repl, "/agents reload")
    repl.expect(r"bad\.md: field 'name'")
    repl.expect(r"Agents reloaded: 3 enabled")
    repl.expect(PROMPT)
    ask(repl, "/agents frob")
    repl.expect(r"/agents list \[nodesc\] \| enable NAME")
    repl.expect(PROMPT)


def test_delegating_to_a_remote_agent_asks_naming_it_and_its_url_and_the_list_shows_it(  # noqa: F811
        start_repl, tmp_path):
    """(1.5) gemini-cli's default policy asks before delegating to a remote
    agent: the question names the agent and where the task goes."""
    from tests.e2e.test_remote_agents_e2e import a2a_peer

    root = tmp_path / "home" / "agents"
    root.mkdir(parents=True)
    with a2a_peer(tmp_path) as (base, peer_log):
        (root / "peer.md").write_text(f"---\nkind: remote\nname: peer\n"
                                      f"agent_card_url: {base}/.well-known/agent-card.json\n---\n")
        repl = start_repl([
            {"system_contains": MAIN, "function_calls": [{"name": "peer", "args": {"query": "count the sheep"}}]},
            {"system_contains": MAIN, "text": "The peer answered."},
        ])
        ask(repl, "/agents list")
        repl.expect(rf"peer \[enabled\] \(user\)\s+remote \(Agent2Agent\) {base}/rpc")
        repl.expect(PROMPT)
        ask(repl, "ask the peer")
        repl.expect(r"sub-agent peer")
        repl.expect(rf"Delegate to the remote agent peer \(Agent2Agent\) at {base}/rpc")
        repl.expect(r"count the sheep")
        repl.expect(r"❯ 3\. No")
        repl.send("\x1b[A\x1b[A")  # up, up: yes, once
        repl.expect(r"❯ 1\. Yes, allow once")
        repl.send("\r")
        repl.expect(r"✓ peer completed")
        repl.expect(r"The peer answered\.")
        repl.expect(PROMPT)
        assert "count the sheep" in [r.get("task") for r in peer_log()]


@pytest.mark.parametrize("run_on", ["client", "server"])
def test_agents_list_says_why_a_tools_server_session_offers_no_remote_agent(tmp_path, run_on):
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from gemini_split.userfiles.agents import discover
    from gemini_split.ui.repl.commands.agents import _list

    root = tmp_path / "agents"
    root.mkdir()
    (root / "peer.md").write_text("---\nkind: remote\nname: peer\nagent_card_json: "
                                  "'{\"url\": \"https://peer.example/rpc\", \"description\": \"Peers.\"}'\n---\n")
    out = io.StringIO()
    repl = SimpleNamespace(console=Console(file=out, width=200, color_system=None),
                           settings=SimpleNamespace(context=SimpleNamespace(agents=discover([("user", root)])),
                                                    tools=SimpleNamespace(run_on=run_on), loaded_settings=None))
    _list(repl, describe=True)
    text = out.getvalue()
    assert "peer [enabled] (user)  remote (Agent2Agent) https://peer.example/rpc" in text
    assert ("not offered in this session: its tools run on the server (--tools server)" in text) == (
        run_on == "server")


@contextmanager
def _silent_card_agent(agents_home):
    """A remote agent ``far`` whose card URL accepts connections (the
    backlog) and never answers."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        (agents_home / "agents" / "far.md").write_text(
            f"---\nkind: remote\nname: far\nagent_card_url: http://127.0.0.1:{silent.getsockname()[1]}/card\n---\n")
        yield


def _abandon_the_wait(repl, command: str) -> None:
    """``command`` says it waits on the card; Ctrl-C abandons it, and the
    next command is answered at once, not after the card's 10 s."""
    ask(repl, command)
    repl.expect(r"Reading the settings and definitions again \(a remote agent's card\)… Ctrl-C abandons", timeout=10)
    began = time.monotonic()
    repl.send(CTRL_C)
    repl.expect(r"Interrupted\.", timeout=5)
    repl.expect(PROMPT)
    ask(repl, "/agents list nodesc")
    repl.expect(r"scout \[enabled\]", timeout=5)
    assert time.monotonic() - began < 5  # not after the card's 10 s


def test_agents_reload_waiting_on_a_silent_card_can_be_abandoned_and_ends_within_the_card_timeout(  # noqa: F811
        start_repl, agents_home):
    """A remote agent's card is read off the REPL's loop: a reload that
    waits says so, Ctrl-C abandons it (nothing changes, the next command is
    answered at once), and a reload left to run ends within the card
    timeout (10 s) with that agent's error, the others loaded."""
    repl = start_repl([])
    with _silent_card_agent(agents_home):
        _abandon_the_wait(repl, "/agents reload")
        repl.expect(PROMPT)

        began = time.monotonic()
        ask(repl, "/agents reload")
        repl.expect(r"far\.md: field 'agent_card_url': the agent card at http://127\.0\.0\.1:\d+/card was not "
                    r"read within 10 seconds", timeout=30)
        repl.expect(r"Agents reloaded: 3 enabled", timeout=10)  # the built-ins and scout
        assert time.monotonic() - began < 20
        repl.expect(PROMPT)


@pytest.mark.parametrize("command", ["/skills reload", "/memory refresh"])
def test_skills_reload_and_memory_refresh_waiting_on_a_silent_card_can_be_abandoned(  # noqa: F811
        start_repl, agents_home, command):
    """They read the agents' definitions again too (the next prompt carries
    them), off the REPL's loop as /agents reload does."""
    repl = start_repl([])
    with _silent_card_agent(agents_home):
        _abandon_the_wait(repl, command)
