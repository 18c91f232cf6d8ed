"""Telemetry (issue 31 §13) of sub-agents: their model calls are recorded
under the session's id like the main agent's, so an operator's collector
joins them to the session (a real recorder writing gemini-cli's outfile)."""

from __future__ import annotations

from gemini_split import telemetry
from gemini_split.tools.approval import Answer
from gemini_split.protocol import SessionContext
from gemini_split.server.model.scripted import ScriptedModel

from tests.cli.test_telemetry import _json_objects
from tests.server.server_tools.helpers import serving
from tests.server.server_tools.test_client_approvals import ScriptedAsker
from tests.server.test_subagents import agent, calls, client_for, done, main_turn, sub_turn


async def test_a_sub_agents_model_calls_are_recorded_under_the_sessions_id(tmp_path):
    outfile = tmp_path / "telemetry.log"
    model = ScriptedModel([
        main_turn(**calls(("reader", {"query": "look around"}))),
        sub_turn("READER", **done("nothing to see")),
        main_turn(text="all quiet"),
    ])
    context = SessionContext(agents=(agent("reader", "You are READER.", tools=()),))
    config = telemetry.TelemetryConfig(enabled=True, outfile=str(outfile))
    with telemetry.activated(config, role="server", warn=print):
        async with serving(model, None) as (service, address):
            async with client_for(address, tmp_path, ScriptedAsker(Answer.YES), []) as client:
                outcome = await client.run_turn("go", context=context)
                session_id = client.connected.session_id
    assert outcome.finished is not None
    records = [o for o in _json_objects(outfile.read_text()) if "attributes" in o]
    for name in ("gemini_cli.api_request", "gemini_cli.api_response"):
        seen = [r["attributes"] for r in records if r["attributes"]["event.name"] == name]
        assert len(seen) == 3, name  # the main agent's two model calls and the sub-agent's one
        assert {r.get("session.id") for r in seen} == {session_id}, name
