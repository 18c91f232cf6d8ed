"""What an older peer is sent: the table of ``protocol/versions.py``,
applied by the :class:`Connection` once the handshake told it the version
both ends speak.

Plain synchronous tests (h11's pattern): a client and a server
:class:`Connection` pass text to each other, no event loop. Every row of
:data:`SINCE` is checked at the version just before it (skipped, converted
or refused) and at its own (sent as it is); the rows whose effect shows in
the state are checked end to end through ``send`` and ``receive``; the text
path the replay and the Redis relay take agrees with the message path. One
more test keeps version checks inside ``protocol/``.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from gemini_split.protocol import (
    PROTOCOL_VERSION,
    SINCE,
    AgentDefinition,
    ApprovalModeChanged,
    AgentFinished,
    AgentStarted,
    AskUserQuestion,
    ClientInfo,
    ClientsChanged,
    Compress,
    Compressed,
    Connected,
    Connection,
    Error,
    ErrorCode,
    GenerateContentRequest,
    GetSystemPrompt,
    Hello,
    HookResponse,
    ListSessions,
    PROTOCOL_VERSION,
    LocalProtocolError,
    Pair,
    RequestStarted,
    Restore,
    Retrying,
    Rewind,
    Rewound,
    SessionContext,
    SessionInfo,
    Sessions,
    TextDelta,
    ThinkingDelta,
    TooOld,
    ToolAwaitingApproval,
    ToolCallAnswered,
    ToolCompleted,
    ToolDecided,
    ToolDecision,
    ToolDelta,
    ToolDiscovery,
    EditedFile,
    EditProposal,
    ToolError,
    ToolExecutionRequest,
    ToolFailure,
    ToolProgress,
    ToolSpec,
    ToolStarted,
    version_tuple,
    decode,
    encode,
    usable_capabilities,
)
from gemini_split.protocol.replay import mark_replayed
from gemini_split.protocol.messages import version_tuple
from gemini_split.protocol.versions import adapted, adapted_text

_ids = itertools.count(1)


def m(cls, **fields):
    """A message stamped the way the I/O layer stamps it."""
    fields.setdefault("id", f"m-{next(_ids)}")
    fields.setdefault("timestamp", 1_700_000_000_000)
    return cls(**fields)


def pair(client: str = PROTOCOL_VERSION, server: str = PROTOCOL_VERSION,
         capabilities: tuple[str, ...] = ()) -> tuple[Connection, Connection]:
    """A client and a server Connection after the handshake, each end
    speaking the version given."""
    ours, theirs = Connection("client"), Connection("server")
    theirs.receive(ours.send(m(Hello, protocol_version=client, capabilities=capabilities)))
    ours.receive(theirs.send(m(Connected, protocol_version=server, session_id="s-1")))
    return ours, theirs


def dotted(version: tuple[int, int]) -> str:
    return ".".join(map(str, version))


def before(version: tuple[int, int]) -> str:
    return dotted((version[0], version[1] - 1))


_AGENTS = (
    AgentDefinition(name="local_one", description="d",
                    mcp_tools=(ToolSpec(name="own_tool", description="d"),)),
    AgentDefinition(name="far_one", description="d", kind="remote", url="https://a.example"),
    AgentDefinition(name="denied_one", description="d", denied="no, by policy"),
    AgentDefinition(name="plain_one", description="d"),
)


def _prompt(*agents: AgentDefinition) -> GenerateContentRequest:
    return m(GenerateContentRequest, prompt="p", context=SessionContext(agents=agents))

#: A message each row is about, by (message type, what): about it alone
#: (no row of a later version changes it).
SAMPLES = {
    (RequestStarted, ""): lambda: m(RequestStarted, request_id="r", seq=1),
    (ClientsChanged, ""): lambda: m(ClientsChanged, change="joined", client=ClientInfo(label="b"), seq=1),
    (ToolCallAnswered, ""): lambda: m(ToolCallAnswered, request_id="r", call_id="c", seq=1),
    (ToolDecided, ""): lambda: m(ToolDecided, request_id="r", call_id="c", decision="approve", seq=1),
    (Compressed, ""): lambda: m(Compressed, request_id="r", before_tokens=9, after_tokens=3, seq=1),
    (Rewound, ""): lambda: m(Rewound, before_seq=3, points=1, by="laptop", seq=7),
    (AgentStarted, ""): lambda: m(AgentStarted, request_id="r", agent_id=1, name="a", parent_call_id="p", seq=1),
    (AgentFinished, ""): lambda: m(AgentFinished, request_id="r", agent_id=1, name="a", parent_call_id="p",
                                   outcome="completed", seq=1),
    (TextDelta, "agent_id"): lambda: m(TextDelta, request_id="r", content="x", agent_id=1, seq=1),
    (ThinkingDelta, "agent_id"): lambda: m(ThinkingDelta, request_id="r", content="x", agent_id=1, seq=1),
    (ToolStarted, "agent_id"): lambda: m(ToolStarted, request_id="r", call_id="c", tool="t", agent_id=1, seq=1),
    (ToolDelta, "agent_id"): lambda: m(ToolDelta, request_id="r", call_id="c", content="x", agent_id=1, seq=1),
    (ToolCompleted, "agent_id"): lambda: m(ToolCompleted, request_id="r", call_id="c", tool="t", agent_id=1, seq=1),
    (ToolError, "agent_id"): lambda: m(ToolError, request_id="r", call_id="c", tool="t",
                                       error=ToolFailure(code="c", message="no"), agent_id=1, seq=1),
    (Retrying, "agent_id"): lambda: m(Retrying, request_id="r", attempt=1, max_attempts=3, delay=1.0, error="e",
                                      agent_id=1, seq=1),
    (ToolAwaitingApproval, "questions"): lambda: m(ToolAwaitingApproval, request_id="r", call_id="c", tool="ask_user",
                                                   questions=(AskUserQuestion(question="Which?"),), seq=1),
    (Sessions, "sessions.project"): lambda: m(Sessions, in_reply_to="l", sessions=(SessionInfo(
        id="s-1", project="/work/app", running=True),)),
    (Sessions, "sessions.clients"): lambda: m(Sessions, in_reply_to="l", sessions=(SessionInfo(
        id="s-1", project="/work/app", running=True, clients=2, attached=(ClientInfo(label="a"),)),)),
    (Compress, ""): lambda: m(Compress),
    (Rewind, ""): lambda: m(Rewind, session_id="s-1", before_seq=1),
    (Restore, ""): lambda: m(Restore, session_id="s-1"),
    (GetSystemPrompt, ""): lambda: m(GetSystemPrompt),
    (Pair, ""): lambda: m(Pair),
    (HookResponse, ""): lambda: m(HookResponse, hook_id="h"),
    (ToolProgress, ""): lambda: m(ToolProgress, request_id="c", content="x"),
    (GenerateContentRequest, "context.agents"): lambda: _prompt(_AGENTS[3]),
    (GenerateContentRequest, "context.agents.kind"): lambda: _prompt(_AGENTS[1]),
    (GenerateContentRequest, "context.agents.denied"): lambda: _prompt(_AGENTS[2]),
    (GenerateContentRequest, "context.agents.mcp_tools"): lambda: _prompt(_AGENTS[0]),
    (GenerateContentRequest, "context.system_prompt"): lambda: m(GenerateContentRequest, prompt="p",
                                                                 context=SessionContext(system_prompt="Be brief.")),
    (ApprovalModeChanged, ""): lambda: m(ApprovalModeChanged, mode="default", by="exit_plan_mode", seq=1),
    (ToolDiscovery, "approval_mode"): lambda: m(ToolDiscovery, approval_mode="plan"),
    (GenerateContentRequest, "typed"): lambda: m(GenerateContentRequest, prompt="EXPANDED", typed="/git:show s t"),
    (ToolAwaitingApproval, "edit"): lambda: m(ToolAwaitingApproval, request_id="r", call_id="c", tool="write_file",
                                              edit=EditProposal(path="a.py", content="x = 1\n", size=6), seq=1),
    (ToolDecided, "modified"): lambda: m(ToolDecided, request_id="r", call_id="c", decision="approve", modified=True,
                                         seq=1),
    (ToolDecision, "edit"): lambda: m(ToolDecision, call_id="c", decision="approve",
                                      edit=EditedFile(path="a.py", content="x = 2\n")),
}


def _ends(row) -> tuple[str, str, str]:
    """(sender, the older peer's version, the row's version) for a pair in
    which only the receiver of ``row.message`` is older."""
    return row.message.SENDER, before(row.version), dotted(row.version)


def _sender(row, peer_version: str) -> Connection:
    sender, _, _ = _ends(row)
    if sender == "server":
        return pair(client=peer_version)[1]
    return pair(server=peer_version)[0]


@pytest.mark.parametrize("row", SINCE, ids=lambda r: f"{r.message.TYPE}{'.' + r.what if r.what else ''}")
def test_each_row_applies_below_its_version_and_not_from_it(row):
    sample = SAMPLES[(row.message, row.what)]()
    _, older, since = _ends(row)
    assert _sender(row, since).for_peer(sample) is sample
    conn = _sender(row, older)
    assert conn.too_old_for(row.message, row.what) == TooOld(older, since)
    if row.action == "refuse":
        with pytest.raises(LocalProtocolError) as refused:
            conn.for_peer(sample)
        assert refused.value.code is ErrorCode.UNKNOWN_TYPE
    elif row.action == "skip":
        assert conn.for_peer(sample) is None
    else:
        converted = conn.for_peer(sample)
        assert converted is not None and converted != sample
        assert (converted.id, converted.timestamp) == (sample.id, sample.timestamp)


def test_every_row_has_a_sample():
    assert {(row.message, row.what) for row in SINCE} == set(SAMPLES)


def test_nothing_is_adapted_before_the_handshake():
    conn = Connection("server")
    sample = SAMPLES[(Compressed, "")]()
    assert conn.for_peer(sample) is sample
    assert conn.too_old_for(Compressed) == TooOld("0.0", "1.3")
    with pytest.raises(KeyError):
        conn.too_old_for(TextDelta)  # no row is about a whole text_delta


# --- through send and receive ------------------------------------------------------


def _running(client: Connection, server: Connection) -> str:
    """Start a request (announced from 1.2 on); its id."""
    request = m(GenerateContentRequest, prompt="p")
    server.receive(client.send(request))
    if client.announced:
        client.receive(server.send(m(RequestStarted, request_id=request.id, seq=1)))
    return request.id


def test_a_1_1_client_is_sent_none_of_the_1_2_events_and_its_request_runs_as_before():
    client, server = pair(client="1.1")
    rid = _running(client, server)
    assert server.send(m(RequestStarted, request_id=rid, seq=1)) is None
    assert server.send(m(ClientsChanged, change="joined", client=ClientInfo(label="b"), seq=2)) is None
    assert server.send(m(ToolDecided, request_id=rid, call_id="c", decision="approve", seq=3)) is None
    assert server.request is not None and server.request.request_id == rid
    assert server.last_seq == 0  # nothing skipped counted as sent
    client.receive(server.send(m(TextDelta, request_id=rid, content="hi", seq=4)))
    assert client.last_seq == 4


def test_a_1_2_client_is_not_sent_compressed_and_a_1_3_client_is():
    for version, sent in (("1.2", False), ("1.3", True)):
        client, server = pair(client=version)
        rid = _running(client, server)
        text = server.send(m(Compressed, request_id=rid, before_tokens=9, after_tokens=3, seq=2))
        assert (text is not None) is sent
        if sent:
            assert isinstance(client.receive(text), Compressed)


def test_a_1_3_client_reads_a_notice_instead_of_rewound():
    client, server = pair(client="1.3")
    rewound = m(Rewound, before_seq=3, points=1, by="laptop", seq=7)
    notice = client.receive(server.send(rewound, text=encode(rewound)))
    assert isinstance(notice, Error) and not notice.fatal
    assert notice.code == ErrorCode.SESSION_REWOUND.value and notice.seq == 7
    assert "laptop rewound this session" in notice.message and "older protocol than 1.4" in notice.message
    client, server = pair(client="1.4")
    assert client.receive(server.send(rewound)) == rewound


def test_a_1_3_client_sees_the_main_agent_and_what_it_must_answer():
    client, server = pair(client="1.3")
    rid = _running(client, server)
    assert server.send(m(AgentStarted, request_id=rid, agent_id=1, name="a", parent_call_id="p", seq=2)) is None
    assert server.send(m(TextDelta, request_id=rid, content="sub", agent_id=1, seq=3)) is None
    assert client.receive(server.send(m(TextDelta, request_id=rid, content="main", seq=4))).content == "main"
    call = client.receive(server.send(m(ToolExecutionRequest, request_id=rid, tool="write_file", agent_id=1,
                                        seq=5)))
    assert call.agent_id == 1 and client.request.pending_calls == {call.id}


def test_a_1_3_client_is_not_asked_ask_users_questions_but_is_asked_for_approvals():
    client, server = pair(client="1.3")
    rid = _running(client, server)
    question = m(ToolAwaitingApproval, request_id=rid, call_id="q", tool="ask_user",
                 questions=(AskUserQuestion(question="Which?"),), seq=2)
    assert server.send(question) is None
    assert server.request.awaiting_decision == set()
    client.receive(server.send(m(ToolAwaitingApproval, request_id=rid, call_id="a", tool="write_file", seq=3)))
    assert client.request.awaiting_decision == {"a"}


@pytest.mark.parametrize(("version", "expected"), [
    ("1.3", SessionInfo(id="s-1")),
    ("1.4", SessionInfo(id="s-1", project="/work/app", running=True)),
    ("1.5", SessionInfo(id="s-1", project="/work/app", running=True, clients=2, attached=(ClientInfo(label="a"),))),
])
def test_sessions_says_what_the_clients_version_has(version, expected):
    client, server = pair(client=version)
    ask = m(ListSessions)
    server.receive(client.send(ask))
    full = SessionInfo(id="s-1", project="/work/app", running=True, clients=2, attached=(ClientInfo(label="a"),))
    reply = client.receive(server.send(m(Sessions, in_reply_to=ask.id, sessions=(full,))))
    assert reply.sessions == (expected,)


@pytest.mark.parametrize("cls", [Compress, Rewind, Restore, GetSystemPrompt, Pair, HookResponse, ToolProgress])
def test_a_client_may_not_send_an_older_server_what_it_lacks(cls):
    row = next(r for r in SINCE if r.message is cls)
    client, _ = pair(server=before(row.version))
    with pytest.raises(LocalProtocolError) as refused:
        client.send(SAMPLES[(cls, "")]())
    assert refused.value.code is ErrorCode.UNKNOWN_TYPE
    assert f"not part of protocol {before(row.version)}" in str(refused.value)
    assert client.request is None and client.owed_replies == frozenset()


@pytest.mark.parametrize(("version", "agents", "mcp_tools"), [
    ("1.3", None, ()),
    ("1.4", ("local_one", "plain_one"), ()),
    ("1.5", ("local_one", "far_one", "denied_one", "plain_one"), ("own_tool",)),
])
def test_a_server_is_sent_the_sub_agents_its_version_runs(version, agents, mcp_tools):
    client, server = pair(server=version)
    sent = server.receive(client.send(m(GenerateContentRequest, prompt="p", context=SessionContext(agents=_AGENTS))))
    got = sent.context.agents
    assert (tuple(a.name for a in got) if got else None) == agents
    assert tuple(t.name for a in got for t in a.mcp_tools) == mcp_tools


def test_a_13_server_is_sent_no_system_prompt_it_would_ignore():
    for version, kept in (("1.3", None), ("1.4", "Be brief.")):
        client, server = pair(server=version)
        request = m(GenerateContentRequest, prompt="p", context=SessionContext(system_prompt="Be brief."))
        assert server.receive(client.send(request)).context.system_prompt == kept


# --- the text path (the replay, the Redis relay) -------------------------------------


@pytest.mark.parametrize("row", [r for r in SINCE if r.message.SENDER == "server"],
                         ids=lambda r: f"{r.message.TYPE}{'.' + r.what if r.what else ''}")
def test_the_text_path_agrees_with_the_message_path(row):
    sample = SAMPLES[(row.message, row.what)]()
    text = encode(sample)
    for version in ((1, 1), row.version, version_tuple(PROTOCOL_VERSION)):
        expected = adapted(sample, version)
        assert adapted_text(text, version) == (None if expected is None else encode(expected))
        marked = adapted_text(mark_replayed(text), version)
        assert (marked is None) is (expected is None)


def test_the_text_path_decodes_nothing_for_a_current_peer():
    text = encode(m(TextDelta, request_id="r", content="not json at all", agent_id=2))
    # The browser page speaks the current version: its replays are not decoded.
    current = version_tuple(PROTOCOL_VERSION)
    assert adapted_text(text, current) is text
    assert adapted_text('{"type":"text_delta" broken', current) == '{"type":"text_delta" broken'


def test_an_older_server_titles_a_custom_command_by_its_expansion():
    for version, typed in (("1.5", ""), ("1.6", "/git:show s t")):
        client, server = pair(server=version)
        sent = server.receive(client.send(SAMPLES[(GenerateContentRequest, "typed")]()))
        assert (sent.prompt, sent.typed) == ("EXPANDED", typed)


# --- capabilities -----------------------------------------------------------------


def test_a_capability_counts_only_from_the_version_that_has_it():
    capabilities = ("tool_hooks", "ask_user", "tool_approvals")
    assert usable_capabilities(m(Hello, protocol_version="1.3", capabilities=capabilities)) == {"tool_approvals"}
    assert usable_capabilities(m(Hello, protocol_version="1.4", capabilities=capabilities)) == set(capabilities)


# --- where version checks live ------------------------------------------------------

#: A line that tests a protocol version: a ``*_SINCE`` constant, a version
#: parsed or compared, or the Connection asked whether the peer is too old.
_VERSION_TEST = re.compile(r"_SINCE\b|version_tuple|\.version\s*[<>]|too_old_for\(")
#: At most this many such lines outside ``protocol/`` (issue 41).
VERSION_TESTS_OUTSIDE = 5


def test_version_checks_live_in_the_protocol_package():
    root = Path(__file__).resolve().parents[2]
    found = [f"{path.relative_to(root)}:{n}: {line.strip()}"
             for top in ("gemini_split", "plugins") for path in sorted((root / top).rglob("*.py"))
             if "protocol" not in path.relative_to(root / top).parts[:1]
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if _VERSION_TEST.search(line)]
    assert len(found) <= VERSION_TESTS_OUTSIDE, "\n".join(found)


def test_a_1_5_client_is_asked_about_an_edit_without_its_text_and_a_1_6_client_with_it():
    question = m(ToolAwaitingApproval, request_id="r", call_id="c", tool="write_file", description="Create a.py",
                 edit=EditProposal(path="a.py", content="x = 1\n", size=6, limit=100), seq=1)
    decided = m(ToolDecided, request_id="r", call_id="c", decision="approve", by="laptop", modified=True, seq=2)
    for version, sent in (("1.5", False), ("1.6", True)):
        _, server = pair(client=version)
        # live, and from the session's log (a replay or a replica's relay)
        for text in (server.for_peer(question), adapted_text(encode(question), version_tuple(version))):
            got = decode(encode(text) if not isinstance(text, str) else text)
            assert got.description == "Create a.py"
            assert (got.edit == question.edit) is sent and (got.edit is None) is not sent
        got = decode(adapted_text(encode(decided), version_tuple(version)))
        assert got.modified is sent and got.by == "laptop"


def test_an_edited_approval_is_never_sent_to_a_1_5_server():
    client, _ = pair(server="1.5")
    with pytest.raises(LocalProtocolError):
        client.for_peer(m(ToolDecision, call_id="c", decision="approve", edit=EditedFile(path="a", content="b")))
    plain = m(ToolDecision, call_id="c", decision="approve")
    assert client.for_peer(plain) is plain
