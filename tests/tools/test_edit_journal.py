"""Issue 30, rewind: the edit journal under the real executor and tools —
what the agent's write_file / replace changed is put back; a file over
10 MiB is recorded as skipped, not copied; a journal line that is not the
journal's own never leads a revert outside it."""

from __future__ import annotations

import json

import trio

from gemini_split.tools.approval import ApprovalPolicy
from gemini_split.tools.approval_mode import ApprovalMode
from gemini_split.tools.edit_journal import SIZE_LIMIT, EditJournal
from gemini_split.tools.executor import ToolExecutor
from gemini_split.tools.registry import default_tools
from gemini_split.tools.workspace import Workspace


async def _discard(event) -> None:
    return None


def _executor(work, journal_dir) -> ToolExecutor:
    executor = ToolExecutor(default_tools(), Workspace(work), ApprovalPolicy(ApprovalMode.YOLO))
    executor.edits_dir = journal_dir
    executor.request_seq = lambda request_id: {"r-1": 3, "r-2": 9}.get(request_id or "")
    return executor


async def test_edits_are_put_back_newest_first_and_a_big_file_is_recorded_as_skipped(tmp_path):
    work, journal_dir = tmp_path / "work", tmp_path / "journal"
    work.mkdir()
    (work / "kept.txt").write_text("before\n")
    (work / "big.bin").write_bytes(b"x" * (SIZE_LIMIT + 1))
    executor = _executor(work, journal_dir)
    calls = [("r-1", "write_file", {"file_path": "kept.txt", "content": "first edit\n"}),
             ("r-2", "replace", {"file_path": "kept.txt", "old_string": "first", "new_string": "second",
                                 "instruction": "again"}),
             ("r-2", "write_file", {"file_path": "new.txt", "content": "made\n"}),
             ("r-2", "write_file", {"file_path": "big.bin", "content": "small now\n"})]
    for n, (request, tool, args) in enumerate(calls):
        result, failure = await executor.execute(f"c-{n}", tool, args, _discard, request_id=request)
        assert failure is None, failure
    journal = EditJournal(journal_dir)
    assert journal.count(["r-2"]) == 3 and journal.count(["r-1"]) == 1
    planned = await trio.to_thread.run_sync(lambda: journal.plan(["r-1", "r-2"], executor.workspace))
    assert [(p.path, p.action) for p in planned] == [("big.bin", "skip"), ("kept.txt", "restore"),
                                                     ("new.txt", "delete")]
    assert "over 10 MiB" in planned[0].reason
    done = journal.revert(planned, executor.workspace)
    assert [(o.path, o.action) for o in done] == [("big.bin", "skipped"), ("kept.txt", "restored"),
                                                  ("new.txt", "deleted")]
    assert (work / "kept.txt").read_text() == "before\n" and not (work / "new.txt").exists()
    assert (work / "big.bin").read_text() == "small now\n"
    assert not list((journal_dir / "blobs").iterdir()) or all(
        e.path == "big.bin" for e in journal.edits())  # what was undone left the journal
    assert [e.seq for e in journal.edits()] == [9]


async def test_a_journal_line_naming_a_path_outside_the_journal_is_never_followed(tmp_path):
    work, journal_dir = tmp_path / "work", tmp_path / "journal"
    work.mkdir()
    (tmp_path / "secret.txt").write_text("not for the workspace\n")
    executor = _executor(work, journal_dir)
    await executor.execute("c-1", "write_file", {"file_path": "a.txt", "content": "A\n"}, _discard, request_id="r-1")
    await executor.execute("c-2", "write_file", {"file_path": "a.txt", "content": "B\n"}, _discard, request_id="r-2")
    lines = (journal_dir / "journal.jsonl").read_text().splitlines()
    forged = json.loads(lines[1])
    forged["before"] = "../../secret.txt"
    (journal_dir / "journal.jsonl").write_text(lines[0] + "\n" + json.dumps(forged) + "\n")
    journal = EditJournal(journal_dir)
    done = journal.revert(journal.plan(["r-2"], executor.workspace), executor.workspace)
    assert [(o.path, o.action) for o in done] == [("a.txt", "skipped")]
    assert "is not one of the journal's" in done[0].reason
    assert (work / "a.txt").read_text() == "B\n"
