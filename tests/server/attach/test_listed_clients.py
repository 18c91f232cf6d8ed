"""(1.5) ``sessions`` says who is attached to each session now
(``SessionInfo.clients`` / ``attached``), to peers of 1.5 and later only."""

from __future__ import annotations

import trio

from gemini_split.protocol import (
    SESSION_ATTACHED_MAX,
    Finished,
    GenerateContentRequest,
    ListSessions,
    Sessions,
)
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.testing.service import open_test_service

from tests.server.attach.test_attach_server import hello


async def _listed(address, **fields) -> dict:
    """The sessions a new connection lists, by id, and the reply's wire text."""
    async with hello(address, **fields) as (lister, _):
        await lister.send(ListSessions())
        text = await lister.stream.receive()
    from gemini_split.protocol import decode

    reply = decode(text)
    assert isinstance(reply, Sessions), reply
    return {s.id: s for s in reply.sessions}, text


async def test_the_session_list_names_the_clients_attached_to_each_session_now():
    async with open_test_service(ScriptedModel([{"text": "hi"}])) as (_, address):
        with trio.fail_after(20):
            async with hello(address, label="laptop") as (laptop, first):
                await laptop.send(GenerateContentRequest(prompt="hello"))
                await laptop.receive_until(lambda m: isinstance(m, Finished))
                async with hello(address, session_id=first.session_id, resume_token=first.resume_token,
                                 label="phone", role="observer") as (_, _second):
                    listed, _ = await _listed(address)
                    both = listed[first.session_id]
                    assert both.clients == 2
                    assert [(c.label, c.role) for c in both.attached] == [("laptop", "driver"), ("phone", "observer")]
                await laptop.receive()  # the phone left (clients_changed)
                listed, _ = await _listed(address)
                assert [c.label for c in listed[first.session_id].attached] == ["laptop"]
            # Nobody attached: listed without clients.
            with trio.fail_after(5):
                while True:
                    listed, _ = await _listed(address)
                    if listed[first.session_id].clients == 0:
                        break
                    await trio.sleep(0.05)
            assert listed[first.session_id].attached == ()


async def test_a_1_4_peer_is_not_sent_who_is_attached():
    async with open_test_service(ScriptedModel([{"text": "hi"}])) as (_, address):
        with trio.fail_after(20):
            async with hello(address, label="laptop") as (laptop, _first):
                await laptop.send(GenerateContentRequest(prompt="hello"))
                await laptop.receive_until(lambda m: isinstance(m, Finished))
                listed, text = await _listed(address, protocol_version="1.4")
                assert len(listed) == 1 and '"attached"' not in text and '"clients"' not in text
                listed, text = await _listed(address)
                assert '"attached":[{"label":"laptop"}]' in text and '"clients":1' in text


async def test_a_session_with_many_clients_names_the_first_few_and_counts_them_all():
    async with open_test_service(ScriptedModel([{"text": "hi"}])) as (_, address):
        with trio.fail_after(30):
            async with hello(address, label="c0") as (first_client, first):
                await first_client.send(GenerateContentRequest(prompt="hello"))
                await first_client.receive_until(lambda m: isinstance(m, Finished))
                async with trio.open_nursery() as nursery:
                    joined = trio.Semaphore(0)
                    done = trio.Event()

                    async def watcher(i: int) -> None:
                        async with hello(address, session_id=first.session_id, resume_token=first.resume_token,
                                         label=f"c{i}", role="observer"):
                            joined.release()
                            await done.wait()

                    extra = SESSION_ATTACHED_MAX + 2
                    for i in range(1, extra + 1):
                        nursery.start_soon(watcher, i)
                    for _ in range(extra):
                        await joined.acquire()
                    listed, _ = await _listed(address)
                    done.set()
    info = listed[first.session_id]
    assert info.clients == extra + 1 and len(info.attached) == SESSION_ATTACHED_MAX
