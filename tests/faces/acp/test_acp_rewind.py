"""Issue 30, rewind, on the ACP face: gemini-cli's ACP mode offers no
/rewind, so a prompt "/rewind" is answered with a clear "not supported"
(and the way that does it), never sent to the model."""

from __future__ import annotations

import json

from gemini_split.server.model.scripted import ScriptedModel

from .test_agent_inprocess import bridge_agent


async def test_a_rewind_prompt_is_said_to_be_unsupported_over_acp_and_never_reaches_the_model(tmp_path):
    model = ScriptedModel([{"text": "should not be asked"}])
    async with bridge_agent(tmp_path, model) as (_agent, connect):
        client = await connect()
        session = (await client.call("session/new", {"cwd": "/a", "mcpServers": []}))["result"]["sessionId"]
        client.ids += 1
        await client.stream.send(json.dumps({"jsonrpc": "2.0", "id": client.ids, "method": "session/prompt",
                                             "params": {"sessionId": session,
                                                        "prompt": [{"type": "text", "text": "/rewind"}]}}))
        seen = []
        while True:
            message = json.loads(await client.stream.receive())
            seen.append(message)
            if message.get("id") == client.ids:
                break
    said = "".join(m["params"]["update"].get("content", {}).get("text", "") for m in seen
                   if m.get("method") == "session/update")
    assert seen[-1]["result"] == {"stopReason": "end_turn"}
    assert "/rewind is not supported over ACP" in said and f"--resume {session} --rewind-to N" in said
    assert model.requests == []
