"""Issue 34 (rough edges): two clients attached under the same label (two
terminals on one host both say ``vm``) are told apart: the second is
``vm#N``, in ``connected.attached`` and in the ``clients_changed`` the
first one sees."""

from __future__ import annotations

from gemini_split.protocol import ClientsChanged, GenerateContentRequest
from gemini_split.server.model.scripted import ScriptedModel

from tests.server.server_tools.helpers import finish, hello, serving, until


async def test_two_clients_with_one_label_get_distinct_names():
    async with serving(ScriptedModel([{"text": "hi"}]), None) as (_, address):
        async with hello(address, label="vm") as (first, opened):
            await first.send(GenerateContentRequest(prompt="hello"))
            await finish(first)
            async with hello(address, session_id=opened.session_id, resume_token=opened.resume_token,
                             label="vm") as (_second, joined):
                labels = [c.label for c in joined.attached]
                assert len(labels) == len(set(labels)) == 2 and "vm" in labels, labels
                _, change = await until(first, ClientsChanged, change="joined")
                assert change.client.label.startswith("vm#"), change
