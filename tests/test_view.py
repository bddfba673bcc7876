"""``tinyacp view`` without a browser: what the page holds for a real demo batch and for journals of every
version, how hostile text is escaped, how transcripts are bounded, what a damaged journal gives, and the command.
(tests/test_view_browser.py drives the page in headless Chromium.)"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import helpers.view as helpers_view
import tinyacp
from helpers.view import (
    ANSWER,
    HOSTILE,
    HOSTILE_FILE,
    crafted_epoch,
    demo_batch,
    hostile_journal,
    newer_batch,
    newer_journal,
    page_data,
    prompt,
    received,
    sent,
    transcript,
    update,
)
from tinyacp import view

SRC = Path(__file__).resolve().parent.parent / "src"
JOURNALS = Path(__file__).resolve().parent / "journals"
TIMEOUT = 60


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("view-batch")
    return demo_batch(base / "out", base / "work")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("view-hostile")
    return hostile_journal(base / "hostile.jsonl", base / "work")


@pytest.fixture(scope="module")
def newer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("view-newer")
    return newer_journal(base / "newer.jsonl", base / "work")


def prompted(path: Path) -> tuple[tinyacp.JsonlJournal, int]:
    """A new journal at ``path`` whose first epoch starts with our prompt "hi" to session ``s``."""
    journal = tinyacp.JsonlJournal(path)
    epoch = journal.begin_epoch()
    prompt(journal, epoch, 1, "hi", session_id="s")
    return journal, epoch


def kinds(page: str, index: int) -> list[str]:
    return [event["k"] for event in transcript(page, index)["events"]]


def events(page: str, index: int, kind: str) -> list[dict[str, Any]]:
    return [event for event in transcript(page, index)["events"] if event["k"] == kind]


def by_id(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {turn["id"]: turn for turn in data["turns"]}


# --------------------------------------------------------------------------------------------------------------
# A batch.


def test_a_batch_gives_one_row_per_record_with_its_outcome_permissions_and_error(batch: Path) -> None:
    data = page_data(view.render_html(batch))
    turns = by_id(data)
    assert sorted(turns) == ["crash-1", "read-1", "read-2", "rejected-1", "slow-1"]
    assert [turns[name]["ok"] for name in ("read-1", "read-2", "rejected-1")] == [True, True, True]
    assert (turns["read-1"]["allow"], turns["read-1"]["reject"], turns["read-1"]["tools"]) == (1, 0, 1)
    assert (turns["rejected-1"]["allow"], turns["rejected-1"]["reject"]) == (0, 1)
    assert turns["crash-1"]["ok"] is False and turns["crash-1"]["err"].startswith("AgentExited: ")
    assert turns["slow-1"]["ok"] is False and turns["slow-1"]["err"].startswith("AgentTimeout: ")
    assert turns["read-1"]["cost"] > 0 and turns["read-1"]["cur"] == "USD" and turns["read-1"]["tokens"] > 0
    agents = {agent["agent"]: agent for agent in data["overview"]["agents"]}
    assert (agents["demo"]["turns"], agents["demo"]["ok"], agents["demo"]["failed"]) == (4, 3, 1)
    assert sum(agents["demo"]["bins"]) == 4 and agents["demo"]["median"] is not None
    assert data["notes"] == []


def test_a_batch_turn_carries_its_prompt_messages_tool_call_and_decision(batch: Path) -> None:
    page = view.render_html(batch)
    index = {turn["id"]: i for i, turn in enumerate(page_data(page)["turns"])}
    read = index["read-1"]
    shown = [kind for kind in kinds(page, read) if kind in ("prompt", "tool", "perm", "msg", "result")]
    assert shown == ["prompt", "tool", "perm", "msg", "result"]
    assert events(page, read, "prompt")[0]["x"] == "What is in this folder?"
    assert "notes.txt" in json.dumps(events(page, read, "tool")[0]["content"])
    assert (events(page, read, "tool")[0]["name"], events(page, read, "tool")[0]["kind"]) == ("Read", "read")
    assert events(page, read, "perm")[0]["decision"]["allowed"] is True
    assert events(page, read, "perm")[0]["decision"]["by"] == "policy"
    notice = events(page, index["read-2"], "notice")[0]  # the demo agent's own, asked for by the prompt
    assert (notice["severity"], notice["title"]) == ("warning", "Model fallback")
    (compaction,) = events(page, index["read-2"], "compaction")  # its updates merged by its id
    assert (compaction["status"], compaction["n"]) == ("completed", 4) and compaction["x"].startswith("0 earlier")
    assert events(page, index["read-2"], "update") == []  # no kind of today's ACP is left as raw JSON
    rejected = events(page, index["rejected-1"], "perm")[0]["decision"]
    assert (rejected["allowed"], rejected["by"], rejected["optionKind"]) == (False, "default-reject", "reject_once")
    assert events(page, index["rejected-1"], "tool")[0]["status"] == "failed"
    crash = transcript(page, index["crash-1"])["error"]
    assert crash["type"] == "AgentExited" and "the agent fell over: <b>bold</b>" in crash["stderr"]


def test_the_batch_page_is_written_into_the_batch_directory_by_default(batch: Path) -> None:
    written = view.write_html(batch)
    assert written == batch / "report.html"
    assert written.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert not list(batch.glob(".report.html*"))  # no temporary left


def test_a_batch_directory_that_moved_finds_its_journals_and_says_what_it_skipped(batch: Path, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    moved.mkdir()
    (moved / "journals").mkdir()
    for journal in (batch / "journals").iterdir():
        (moved / "journals" / journal.name).write_bytes(journal.read_bytes())
    records = (batch / "results.jsonl").read_bytes()
    (moved / "results.jsonl").write_bytes(records + b'{"id": "half a record"}\n<script>\n{"id": "torn')
    assert str(batch) in (moved / "results.jsonl").read_text()  # the records name the old place
    page = view.render_html(moved, max_turn_bytes=10**6)
    assert all("events" in transcript(page, i) for i in range(5))
    notes = page_data(page)["notes"]
    assert [note.split(" (")[0] for note in notes] == [
        "results.jsonl line 6 is not a turn record",
        "results.jsonl line 7 is not a turn record",
        "results.jsonl: its last line is torn",
    ]


# --------------------------------------------------------------------------------------------------------------
# Today's ACP: compaction, plans by id, subagents, session messages, questions, forced calls.


def test_a_turn_with_every_feature_shows_each_kind_of_today_in_its_own_event(newer: Path) -> None:
    page = view.render_html(newer)
    top = kinds(page, 0)
    for kind in ("notice", "compaction", "planop", "ask", "child", "smsg", "msg", "result"):
        assert kind in top, kind
    assert "update" not in top and "agentline" not in top  # nothing of it is left as raw JSON
    (compaction,) = events(page, 0, "compaction")
    assert [state[0] for state in compaction["states"]] == ["in_progress", "completed"]
    assert compaction["x"] == f"0 earlier turns in {newer.parent / 'work'}."  # the summary, given whole at the end
    (plan,) = events(page, 0, "planop")  # four plan_update of one plan id, then plan_removed: one event
    assert (plan["id"], plan["n"], plan["type"]) == ("plan-1", 4, "items") and plan["removed"] == plan["end"]
    assert [entry[1] for entry in plan["entries"]] == ["completed", "completed"]


def test_a_subagents_work_is_grouped_under_it_and_not_mixed_into_its_parents(newer: Path) -> None:
    page = view.render_html(newer)
    (child,) = events(page, 0, "child")
    assert (child["title"], child["state"]) == ("File reader", "idle (end_turn)")
    assert child["sid"].endswith(".sub-1") and child["description"].startswith("Lists the files in")
    assert [state[0] for state in child["states"]] == ["running", "idle (end_turn)"]
    own = [event["k"] for event in child["events"]]
    assert own == ["thought", "tool", "perm", "msg"]
    assert child["events"][2]["decision"]["by"] == "policy" and child["events"][2]["name"] == "Read"
    assert "tool" not in kinds(page, 0) and "perm" not in kinds(page, 0)  # the parent's own events hold neither
    (reply,) = events(page, 0, "msg")
    assert reply["x"].startswith("You said:")  # the parent's reply only: the child's is under the child
    task, answer = events(page, 0, "smsg")
    assert (task["from"], task["to"]) == (child["sid"].rsplit(".", 1)[0], child["sid"])
    assert (answer["from"], answer["n"]) == (child["sid"], 2) and answer["x"].startswith("I read 1 file")
    row = page_data(page)["turns"][0]
    assert (row["subs"], row["tools"], row["allow"]) == (1, 1, 1)


def test_a_question_shows_its_form_and_the_answer_with_who_gave_it(newer: Path, tmp_path: Path) -> None:
    page = view.render_html(newer)
    (ask,) = events(page, 0, "ask")
    assert (ask["mode"], ask["x"]) == ("form", "How should I summarise the files?")
    assert [field[0] for field in ask["fields"]] == ["name", "style", "lines", "detail", "sizes"]
    assert ask["fields"][0] == ["name", "string", "Your name", True]
    assert ask["answer"]["action"] == "accept" and ask["answer"]["by"] == "observer"
    assert json.loads(ask["answer"]["content"]) == ANSWER
    declined = newer_batch(tmp_path / "out", tmp_path / "work")  # nobody answers in a batch
    (ask,) = events(view.render_html(declined), 0, "ask")
    assert (ask["answer"]["action"], ask["answer"]["by"]) == ("decline", "default-decline")


def test_a_call_sent_with_force_is_marked(newer: Path) -> None:
    page = view.render_html(newer)
    (forced,) = [event for event in transcript(page, 0)["events"] if event.get("forced")]
    assert (forced["k"], forced["m"], forced["x"]) == ("call", "session/set_mode", '{"modeId":"turbo"}')
    assert events(page, 0, "error")[0]["m"] == "session/set_mode"  # which the agent then refused
    fork, forked = [event for event in events(page, 0, "call") if "fork" in event["m"]]
    assert (fork["m"], forked["m"]) == ("session/fork", "forked") and "forced" not in fork  # the agent offers it
    (session,) = [event for event in events(page, 0, "call") if event["m"] == "session"]
    assert fork["x"] == f"{session['x']} in {newer.parent / 'work'}" and forked["x"] != session["x"]
    assert len(events(page, 0, "child")) == 1  # the fork is a session of ours, not a child


def test_a_refused_side_call_leaves_the_turn_ok_and_shows_as_an_error_event(newer: Path) -> None:
    page = view.render_html(newer)
    first = page_data(page)["turns"][0]
    assert (first["ok"], first["stop"]) == (True, "end_turn") and "err" not in first  # the prompt ended end_turn
    (refused,) = events(page, 0, "error")
    assert refused["m"] == "session/set_mode"


def test_a_turn_whose_prompt_got_an_error_answer_another_stop_reason_or_none_failed(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    journal = tinyacp.JsonlJournal(path)
    epoch = journal.begin_epoch()
    sent(journal, epoch, {"jsonrpc": "2.0", "id": 1, "method": "session/set_mode", "params": {"modeId": "x"}})
    no_mode = {"code": -32602, "message": "no such mode"}
    received(journal, epoch, {"jsonrpc": "2.0", "id": 1, "error": no_mode}, "session/set_mode")
    prompt(journal, epoch, 2, "refused", session_id="s")
    error = {"code": -32603, "message": "overloaded"}
    received(journal, epoch, {"jsonrpc": "2.0", "id": 2, "error": error}, "session/prompt")
    prompt(journal, epoch, 3, "cancelled", session_id="s")
    received(journal, epoch, {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "cancelled"}}, "session/prompt")
    prompt(journal, epoch, 4, "unanswered", session_id="s")  # the agent exited
    journal.close()
    refused, cancelled, unanswered = page_data(view.render_html(path))["turns"]
    assert (refused["ok"], refused["err"]) == (False, "session/prompt: overloaded (code -32603)")  # not set_mode's
    assert (cancelled["ok"], cancelled["stop"]) == (False, "cancelled")  # ok as a batch record says it: end_turn
    assert unanswered["ok"] is False and unanswered["err"].startswith("the prompt got no answer in the journal")


def test_hostile_text_in_the_newer_kinds_stays_text(newer: Path) -> None:
    page = view.render_html(newer)
    assert page.count("<script") == page.count("</script>") == page.count('<script type="application/json"') + 1
    for needle in ("<img", "<!--", "\u2028", "\u202e", "\x1b", "\x00"):
        assert needle not in page
    visible = HOSTILE.replace("\u202e", "\u27e8U+202E\u27e9")[:60]
    (compaction,) = events(page, 1, "compaction")
    assert compaction["status"] == "failed" and compaction["x"].startswith("summary " + visible)
    assert compaction["error"].startswith(visible)
    (plan,) = events(page, 1, "planop")  # given as markdown, then as a file: the file is what it is now
    assert (plan["type"], plan["uri"], plan["n"]) == ("file", "javascript:alert(1)", 2) and "x" not in plan
    (child,) = events(page, 1, "child")
    assert child["title"].startswith("Kid " + visible) and [e["k"] for e in child["events"]] == ["msg", "ask"]
    ask = child["events"][1]  # the child's URL question, under the child
    assert (ask["mode"], ask["url"]) == ("url", "javascript:window.__pwned=6")
    assert (ask["answer"]["action"], ask["answer"]["by"]) == ("decline", "default-decline")
    assert page_data(page)["turns"][1]["subs"] == 1


def test_merged_events_stay_within_the_turns_bound(tmp_path: Path) -> None:
    path = tmp_path / "merged.jsonl"
    journal, epoch = prompted(path)
    text = {"type": "text", "text": "z" * 1024}
    seq = 0
    for n in range(600):  # each patches one event in place; what it brings is counted against the bound
        for step in (
            {"sessionUpdate": "plan_update", "plan": {"type": "markdown", "planId": "p", "content": "m" * 1024}},
            {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c", "content": text},
            {"sessionUpdate": "session_message_chunk", "messageId": f"m{n % 3}", "content": text},
            {"sessionUpdate": "subagent_update", "sessionId": "kid", "title": "t" * 1024},
        ):
            seq += 1
            update(journal, epoch, seq, step)
    journal.close()
    page = view.render_html(path, max_turn_bytes=64 * 1024)
    assert len(page) < 200 * 1024
    cut = transcript(page, 0)["cut"]
    assert cut["bytes"] > 600 * 3 * 1024 - 64 * 1024  # the plans', summaries' and messages' text past the bound
    shown = [event["k"] for event in transcript(page, 0)["events"]]
    assert shown == ["prompt", "planop", "compaction", "smsg", "child", "smsg", "smsg"]
    assert events(page, 0, "planop")[0]["n"] == 600  # counted whole, though its text was cut


def test_a_turns_usage_is_shown_by_the_names_tinyacp_writes_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    journal, epoch = prompted(path)
    usage = {"inputTokens": 5, "outputTokens": 7, "totalTokens": 12, "cachedReadTokens": 1}
    answer = {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn", "usage": usage}}
    received(journal, epoch, answer, "session/prompt")
    journal.close()
    page = view.render_html(path)
    (result,) = events(page, 0, "result")
    assert result["usage"] == {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12, "cached_read_tokens": 1}
    assert page_data(page)["turns"][0]["tokens"] == 12


def test_the_updates_of_a_session_we_forked_are_not_a_childs(tmp_path: Path) -> None:
    path = tmp_path / "fork.jsonl"
    journal, epoch = prompted(path)
    received(journal, epoch, {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}, "session/prompt")
    fork = {"sessionId": "s", "cwd": "/", "mcpServers": []}
    sent(journal, epoch, {"jsonrpc": "2.0", "id": 2, "method": "session/fork", "params": fork})
    chunk = {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hi"}}
    update(journal, epoch, 1, chunk, session_id="f")  # the fork's history, replayed before the answer
    received(journal, epoch, {"jsonrpc": "2.0", "id": 2, "result": {"sessionId": "f"}}, "session/fork")
    update(journal, epoch, 2, {**chunk, "sessionUpdate": "agent_message_chunk"}, session_id="f")
    journal.close()
    page = view.render_html(path)
    assert kinds(page, 0)[-4:] == ["call", "user", "call", "msg"]  # replayed before the answer: shown as it came
    assert page_data(page)["turns"][0]["subs"] == 0


def test_children_of_children_nest_only_so_deep(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    journal, epoch = prompted(path)
    for seq in range(1, 3001):  # each child announces the next: a page's data nested 3,000 deep would not render
        step = {"sessionUpdate": "subagent_update", "sessionId": f"s{seq}", "title": f"child {seq}"}
        update(journal, epoch, seq, step, session_id="s" if seq == 1 else f"s{seq - 1}")
    journal.close()
    page = view.render_html(path, max_turn_bytes=1 << 20)
    top = events(page, 0, "child")
    assert len(top) == 3000 // 8 and top[1]["owner"] == "s8" and "owner" not in top[0]
    nested, depth = top[0], 1
    while nested["events"]:
        (nested,) = nested["events"]
        depth += 1
    assert depth == 8 and page_data(page)["turns"][0]["subs"] == 3000


def test_a_childs_updates_before_its_announcement_are_still_kept_apart(tmp_path: Path) -> None:
    path = tmp_path / "early.jsonl"
    journal, epoch = prompted(path)
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "early"}}
    update(journal, epoch, 1, chunk, session_id="s.kid")
    update(journal, epoch, 2, {"sessionUpdate": "subagent_update", "sessionId": "s.kid", "title": "Late"})
    update(journal, epoch, 3, {**chunk, "content": {"type": "text", "text": "mine"}})
    journal.close()
    page = view.render_html(path)
    (child,) = events(page, 0, "child")
    assert (child["title"], [e["x"] for e in child["events"]]) == ("Late", ["early"]) and "unannounced" not in child
    assert [e["x"] for e in events(page, 0, "msg")] == ["mine"]
    assert page_data(page)["turns"][0]["subs"] == 1


# --------------------------------------------------------------------------------------------------------------
# Hostile text.


def test_hostile_text_stays_data_inside_the_script_element(hostile: Path) -> None:
    page = view.render_html(hostile)
    data_elements = page.count('<script type="application/json"')
    assert page.count("<script") == data_elements + 1  # the data, and the page's own script
    assert page.count("</script>") == data_elements + 1
    for needle in ("<img", "<!--", "\u2028", "\u202e", "\x1b", "\x00"):
        assert needle not in page
    assert "javascript:" not in page.split("<script>")[0].split('id="data">')[0]  # nothing in the markup itself


def test_hostile_text_comes_back_as_visible_text(hostile: Path) -> None:
    page = view.render_html(hostile)
    assert len(page_data(page)["turns"]) == 2
    prompt = events(page, 0, "prompt")[0]["x"]
    assert prompt.startswith("<script>window.__pwned=1</script></script><img src=x onerror=")
    assert "\u27e8U+202E\u27e9evil\u27e8U+202C\u27e9" in prompt  # the override is shown, not obeyed
    assert "\u27e8U+001B\u27e9[31mred" in prompt and "\u27e8U+2028\u27e9" in prompt
    assert prompt.endswith("&amp; \u27e8U+0000\u27e9")
    assert events(page, 0, "tool")[0]["content"][0]["x"].endswith("\t" + HOSTILE_FILE)
    assert events(page, 0, "msg")[0]["x"].startswith("You said: <script>")


def test_a_notice_a_named_tool_call_with_a_diff_and_an_unknown_update_are_rendered(hostile: Path) -> None:
    page = view.render_html(hostile)
    assert kinds(page, 1) == ["prompt", "notice", "tool", "update", "msg", "result"]
    assert page_data(page)["turns"][1]["agent"] == "tinyacp-demo"  # named by the journal's other run
    notice = events(page, 1, "notice")[0]
    assert (notice["severity"], notice["title"][:14]) == ("warning", "Model fallback")
    tool = events(page, 1, "tool")[0]
    assert (tool["name"], tool["kind"], tool["status"]) == ("edit_file", "edit", "completed")
    assert tool["content"] == [
        {"type": "diff", "path": "javascript:alert(1)", "old": "a\nold line\nz", "new": "a\nnew line\nz"}
    ]
    unknown = events(page, 1, "update")[0]
    assert unknown["kind"] == "hologram_update" and unknown["x"].startswith('{"beam":"<script>')


def test_the_policy_forbids_every_connection_and_allows_only_the_pages_own_script_and_style(hostile: Path) -> None:
    page = view.render_html(hostile)
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert policy is not None
    rules = dict(rule.strip().split(" ", 1) for rule in policy.group(1).split(";"))
    assert rules["default-src"] == rules["connect-src"] == rules["form-action"] == rules["base-uri"] == "'none'"
    assert rules["img-src"] == "data:"
    script = page.rsplit("<script>", 1)[1].split("</script>", 1)[0]
    style = page.split("<style>", 1)[1].split("</style>", 1)[0]
    for text, rule in ((script, "script-src"), (style, "style-src")):
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert rules[rule] == f"'sha256-{digest}'"
    for call in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "href", "src=", "eval(", "fetch("):
        assert call not in script


def test_the_json_escapes_lt_gt_amp_and_the_line_separators() -> None:
    text = view._json({"x": "</script><!--&\u2028\u2029"})
    assert text == '{"x":"\\u003c/script\\u003e\\u003c!--\\u0026\\u2028\\u2029"}'
    assert json.loads(text) == {"x": "</script><!--&\u2028\u2029"}


# --------------------------------------------------------------------------------------------------------------
# Bounds, damage, versions.


def test_a_turn_past_max_turn_bytes_is_cut_and_the_cut_is_said(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    journal = tinyacp.JsonlJournal(path)
    epoch = crafted_epoch(journal)
    chunk = {"type": "text", "text": "y" * (3 << 20)}  # one line of 3 MiB

    update(journal, epoch, 9, {"sessionUpdate": "agent_message_chunk", "content": chunk})
    for seq in range(10, 2010):
        update(journal, epoch, seq, {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "t"}})
    journal.close()
    page = view.render_html(path, max_turn_bytes=64 * 1024)
    assert len(page) < 200 * 1024
    cut = transcript(page, 0)["cut"]
    assert cut["limit"] == 64 * 1024 and cut["bytes"] > (3 << 20) - 64 * 1024
    assert page_data(page)["turns"][0]["stop"] == "end_turn"  # the facts come from every record, cut or not
    whole = view.render_html(path, max_turn_bytes=8 << 20)
    assert "cut" not in transcript(whole, 0) and len(whole) > 3 << 20


def test_a_damaged_journal_renders_what_it_can_and_says_what_it_skipped(hostile: Path, tmp_path: Path) -> None:
    lines = hostile.read_bytes().split(b"\n")
    damaged = tmp_path / "damaged.jsonl"
    garbage = b"\xff\xfe not a record <script>window.__pwned=5</script>"
    damaged.write_bytes(b"\n".join([*lines[:6], garbage, b'{"type":"line"}', *lines[6:-1]]) + b'\n{"type":"li')
    page = view.render_html(damaged)
    data = page_data(page)
    assert len(data["turns"]) == 2 and data["turns"][0]["skipped"] == 2
    notes = " ".join(data["notes"])
    assert "lines 7, 8 are not records, shown raw" in notes and "last line is torn (11 bytes" in notes
    bad = events(page, 0, "bad")
    assert [event["n"] for event in bad] == [7, 8] and "not a record <script>" in bad[0]["x"]
    assert "msg" in kinds(page, 0) and data["turns"][0]["stop"] == "end_turn"


@pytest.mark.parametrize("name", ["v0.1.0", "line-field"])
def test_journals_of_earlier_versions_render(name: str) -> None:
    page = view.render_html(JOURNALS / f"{name}.jsonl")
    data = page_data(page)
    assert [turn["id"] for turn in data["turns"]] == [f"{name} #1", f"{name} #2"]
    first = data["turns"][0]
    assert (first["agent"], first["ok"], first["reject"], first["allow"]) == ("tinyacp-demo", True, 1, 0)
    assert events(page, 0, "prompt")[0]["x"] == "What is in this directory?"
    assert events(page, 0, "perm")[0]["decision"]["by"] == "default-reject"
    assert len(events(page, 1, "agentline")) >= 5  # the odd lines of the second epoch, each shown raw
    assert data["turns"][1]["ok"] is False and data["turns"][1]["err"].startswith("no prompt was sent")


def test_a_directory_of_journals_shows_the_latest_first(hostile: Path, tmp_path: Path) -> None:
    older, newer = tmp_path / "20260101T000000Z-demo-0123456789abcdef.jsonl", tmp_path / "b.jsonl"
    older.write_bytes((JOURNALS / "v0.1.0.jsonl").read_bytes())
    newer.write_bytes(hostile.read_bytes())
    os.utime(older, (1_000_000_000, 1_000_000_000))
    ids = [turn["id"] for turn in page_data(view.render_html(tmp_path))["turns"]]
    assert ids == ["b #1", "b #2", f"{older.stem} #1", f"{older.stem} #2"]


def test_a_chat_journal_gives_a_turn_per_prompt(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    journal = tinyacp.JsonlJournal(path)
    options = tinyacp.Options(
        command=[sys.executable, "-m", "tinyacp.demo"], epoch=journal.begin_epoch(), observer=journal
    )
    with tinyacp.Client(options) as client:
        client.initialize(timeout=30)
        session = client.new_session(tmp_path, timeout=30)
        for text in ("one", "two", "three"):
            client.prompt(session.id, text, timeout=30)
    journal.close()
    page = view.render_html(path)
    assert [turn["prompt"] for turn in page_data(page)["turns"]] == ["one", "two", "three"]
    assert [turn["agent"] for turn in page_data(page)["turns"]] == ["tinyacp-demo"] * 3


def test_bad_sources_raise_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        view.render_html(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match=r"neither a batch's results\.jsonl nor a journal"):
        view.render_html(tmp_path)
    with pytest.raises(OSError, match="not a regular file"):
        view.render_html("/dev/null")
    (tmp_path / "README.md").write_text("# Hello\n\nNot a journal.\n", encoding="utf-8")
    with pytest.raises(OSError, match="not a tinyacp journal: not one line of it is a journal record"):
        view.render_html(tmp_path / "README.md")
    with pytest.raises(ValueError, match="max_turn_bytes"):
        view.render_html(JOURNALS / "v0.1.0.jsonl", max_turn_bytes=0)


def test_import_tinyacp_does_not_import_the_view() -> None:
    modules = "('tinyacp.view', 'tinyacp._view_model')"
    code = f"import sys, tinyacp; tinyacp.Client; print(*(m in sys.modules for m in {modules}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=TIMEOUT, check=True)
    assert done.stdout.split() == [b"False", b"False"]


# --------------------------------------------------------------------------------------------------------------
# The command.


def run(
    *argv: str | os.PathLike[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = dict(os.environ, PYTHONPATH=str(SRC), **(env or {}))
    command = [sys.executable, "-m", "tinyacp", "view", *map(str, argv)]
    return subprocess.run(
        command, check=False, capture_output=True, text=True, cwd=cwd, env=environment, timeout=TIMEOUT
    )


def test_the_command_writes_the_page_and_prints_its_path(batch: Path, tmp_path: Path) -> None:
    done = run(batch, "-o", tmp_path / "page.html", "--max-turn-bytes", "1K", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{tmp_path / 'page.html'}\n", "")
    assert page_data((tmp_path / "page.html").read_text(encoding="utf-8"))["maxTurnBytes"] == 1024
    done = run(JOURNALS / "v0.1.0.jsonl", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "tinyacp-view.html\n")
    assert (tmp_path / "tinyacp-view.html").is_file()


def test_the_command_opens_the_page_in_the_browser_it_is_told_of(batch: Path, tmp_path: Path) -> None:
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {opened}\n', encoding="utf-8")
    browser.chmod(0o755)
    done = run(batch / "results.jsonl", "--open", cwd=tmp_path, env={"BROWSER": str(browser)})
    assert (done.returncode, done.stdout) == (0, f"{batch / 'report.html'}\n")
    assert opened.read_text(encoding="utf-8") == (batch / "report.html").as_uri()


def test_the_command_with_no_path_shows_the_commands_own_journals(tmp_path: Path) -> None:
    state = tmp_path / "state"
    journals = state / "tinyacp" / "journals"
    done = run(cwd=tmp_path, env={"XDG_STATE_HOME": str(state)})
    assert done.returncode == 2 and "no journals yet in" in done.stderr and "Traceback" not in done.stderr
    journals.mkdir(parents=True)
    (journals / "20260101T000000Z-demo-0123456789abcdef.jsonl").write_bytes((JOURNALS / "v0.1.0.jsonl").read_bytes())
    done = run(cwd=tmp_path, env={"XDG_STATE_HOME": str(state)})
    assert done.returncode == 0
    assert len(page_data((tmp_path / "tinyacp-view.html").read_text(encoding="utf-8"))["turns"]) == 2


def test_the_command_names_what_it_cannot_read(tmp_path: Path) -> None:
    done = run(tmp_path / "missing", cwd=tmp_path)
    assert done.returncode == 2 and f"{tmp_path / 'missing'}" in done.stderr and "Traceback" not in done.stderr
    done = run(JOURNALS / "v0.1.0.jsonl", "-o", tmp_path / "no" / "such" / "dir.html", cwd=tmp_path)
    assert done.returncode == 2 and "tinyacp: error:" in done.stderr and "Traceback" not in done.stderr


def test_the_command_refuses_a_file_that_holds_no_journal_record_as_show_does(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# Hello\n\nNot a journal.\n", encoding="utf-8")
    (tmp_path / "empty.jsonl").write_bytes(b"")
    for source, what in ((readme, "not one line of it is a journal record"), (tmp_path / "empty.jsonl", "it is empty")):
        done = run(source, "-o", tmp_path / "x.html", cwd=tmp_path)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == f"tinyacp: error: {source}: not a tinyacp journal: {what}\n"
        assert not (tmp_path / "x.html").exists()


def test_a_batch_page_counts_items_its_latest_attempt_deciding_with_the_earlier_ones_inside(tmp_path: Path) -> None:
    from tinyacp.batch import run_batch

    crash = [sys.executable, "-c", "import sys; sys.stderr.write('attempt\\n'); sys.exit(3)"]
    flaky = [sys.executable, "-c", "import sys; sys.stderr.write('flaky\\n'); sys.exit(3)"]
    items: list[dict[str, Any]] = [
        {"id": "again", "prompt": "hello", "agent": crash},
        {"id": "fixed", "prompt": "hello", "agent": flaky},
    ]
    ok: list[dict[str, Any]] = [{"id": "fine", "prompt": "hello"}]
    out = tmp_path / "out"
    run_batch(ok + items, out, agent="demo", cwd=tmp_path, timeout=60)
    run_batch(ok + items, out, agent="demo", cwd=tmp_path, timeout=60, retry_failed=True)
    fixed = [{"id": "fixed", "prompt": "hello"}]  # its third attempt, by the demo agent, is ok
    summary = run_batch(ok + fixed + items[:1], out, agent="demo", cwd=tmp_path, timeout=60, retry_failed=True)
    page = view.render_html(out)
    data = page_data(page)
    turns = by_id(data)
    assert sorted(turn["id"] for turn in data["turns"]) == ["again", "fine", "fixed"]  # one row per item
    assert (summary.ok, summary.failed) == (2, 1)
    assert sum(turn["ok"] for turn in data["turns"]) == summary.ok  # the header's counts are the batch's
    agents = data["overview"]["agents"]
    assert [sum(agent[name] for agent in agents) for name in ("turns", "ok", "failed")] == [3, 2, 1]
    assert (turns["again"]["attempts"], turns["again"]["attempt"], turns["again"]["ok"]) == (3, 3, False)
    assert (turns["fixed"]["attempts"], turns["fixed"]["attempt"], turns["fixed"]["ok"]) == (3, 3, True)
    assert "attempts" not in turns["fine"] and "err" not in turns["fixed"]
    index = [turn["id"] for turn in data["turns"]].index("fixed")
    earlier = transcript(page, index)["earlier"]
    assert [(one["attempt"], one["ok"], one["epoch"]) for one in earlier] == [(1, False, 1), (2, False, 2)]
    assert [one["error"]["stderr"] for one in earlier] == ["flaky\n", "flaky\n"]
    assert earlier[0]["err"].startswith("AgentExited: ") and "events" in earlier[0]
    assert "msg" in [event["k"] for event in transcript(page, index)["events"]]  # the latest's own turn
    assert data["notes"] == []


def test_a_failed_row_carries_its_reason_short_and_on_one_line_the_whole_in_its_transcript(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    message = "the agent ended\nbefore answering " + "word " * 200
    record = {"id": "x", "ok": False, "error": {"type": "AgentExited", "message": message}}
    (out / "results.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    page = view.render_html(out)
    row = page_data(page)["turns"][0]
    assert row["err"].startswith("AgentExited: the agent ended before answering word word")
    assert len(row["err"]) == 160 and row["err"].endswith("\u2026") and "\n" not in row["err"]
    assert transcript(page, 0)["error"]["message"] == message


def test_the_page_of_ones_runs_carries_the_start_the_session_and_the_prompt_of_each_turn(tmp_path: Path) -> None:
    path = tmp_path / "20261204T183012Z-demo-0123456789abcdef.jsonl"
    journal, epoch = prompted(path)
    received(journal, epoch, {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}, "session/prompt")
    journal.close()
    (row,) = page_data(view.render_html(tmp_path))["turns"]
    assert (row["session"], row["prompt"], row["agent"]) == ("s", "hi", "demo")
    assert abs(row["started"] / 1000 - path.stat().st_mtime) < 120


def test_a_tool_calls_replaced_content_is_kept_marked_with_when_it_was_replaced(tmp_path: Path) -> None:
    path = tmp_path / "replaced.jsonl"
    journal, epoch = prompted(path)
    diff = {"type": "diff", "path": "a.py", "oldText": "x = 1", "newText": "x = 2"}
    done = {"type": "content", "content": {"type": "text", "text": "edited a.py"}}
    call = {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Edit a.py", "kind": "edit", "content": [diff]}
    update(journal, epoch, 1, call)
    asked = {"sessionId": "s", "toolCall": {"toolCallId": "t1", "content": [diff]},
             "options": [{"optionId": "y", "name": "Yes", "kind": "allow_once"}]}  # fmt: skip
    helpers_view.asked(
        journal, epoch, {"jsonrpc": "2.0", "id": 0, "method": "session/request_permission", "params": asked}
    )
    update(journal, epoch, 2, {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "in_progress"})
    update(journal, epoch, 3, {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
                               "content": [done]})  # fmt: skip
    journal.close()
    page = view.render_html(path)
    (tool,) = events(page, 0, "tool")
    assert tool["content"] == [{"type": "text", "x": "edited a.py"}]
    (replaced,) = tool["replaced"]
    assert replaced["content"] == [{"type": "diff", "path": "a.py", "old": "x = 1", "new": "x = 2"}]
    assert replaced["t"] == tool["t"] and replaced["until"] == tool["end"]
    (perm,) = events(page, 0, "perm")
    assert perm["content"] == [{"type": "diff", "path": "a.py", "old": "x = 1", "new": "x = 2"}]


# Any JSON value an agent might put in a field, strings of any character (lone surrogates included: JSON allows them).
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=())),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_KINDS = ["agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan", "notice",
          "usage_update", "user_message_chunk", "compaction_update", "compaction_summary_chunk", "plan_update",
          "plan_removed", "subagent_update", "session_message", "session_message_chunk", "something_else"]  # fmt: skip
_FIELDS = ["content", "title", "name", "kind", "status", "entries", "severity", "description", "cost", "toolCallId",
           "compactionId", "summary", "error", "plan", "planId", "sessionId", "state", "messageId",
           "senderSessionId", "recipientSessionId"]  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    updates=st.lists(
        st.tuples(st.sampled_from(_KINDS), st.dictionaries(st.sampled_from(_FIELDS), _JSON, max_size=5)), max_size=6
    ),
    raw=st.lists(st.binary(max_size=64), max_size=3),
)
def test_any_update_and_any_line_render_as_data_that_cannot_end_its_element(
    updates: list[tuple[str, dict[str, Any]]], raw: list[bytes]
) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "any.jsonl"
        journal = tinyacp.JsonlJournal(path)
        epoch = journal.begin_epoch()
        for seq, (kind, fields) in enumerate(updates, 1):
            update(journal, epoch, seq, {"sessionUpdate": kind, **fields})
        journal.close()
        with open(path, "ab") as file:
            file.write(b"".join(line.replace(b"\n", b" ") + b"\n" for line in raw))
        page = view.render_html(path, max_turn_bytes=4096)
    scripts = page.count('<script type="application/json"') + 1
    assert page.count("<script") == page.count("</script>") == scripts
    assert "<!--" not in page and "\u2028" not in page and "\u202e" not in page
    data = page_data(page)
    assert len(data["turns"]) == 1
    assert len(json.dumps(transcript(page, 0)).encode()) < 4096 * 7 + 50_000  # bounded, escapes included


# --------------------------------------------------------------------------------------------------------------
# Numbers past a double's range, budgets, links, the command's words.


def test_sums_past_a_doubles_range_are_clamped_and_said_never_a_traceback(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    huge = 1.7e308
    record = {"ok": True, "agent": "a", "usage": {"total_tokens": huge, "cost": {"amount": huge, "currency": "USD"}}}
    lines = [json.dumps({"id": f"i{n}", **record}) for n in range(2)]
    lines.append(json.dumps({"id": "big-int", "ok": True, "agent": "a", "usage": {"total_tokens": 10**400}}))
    (out / "results.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = run(out, "-o", tmp_path / "page.html", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    data = page_data((tmp_path / "page.html").read_text(encoding="utf-8"))
    (agent,) = data["overview"]["agents"]
    assert agent["tokens"] == agent["cost"]["USD"] == 1.7976931348623157e308
    notes = " ".join(data["notes"])
    assert "the tokens of a add up past the largest number the page can hold" in notes
    assert "the cost in USD of a add up past" in notes
    assert "tokens" not in by_id(data)["big-int"]  # an int no double holds is no figure


def test_a_turns_input_and_output_tokens_past_a_doubles_range_are_clamped_and_said(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    journal, epoch = prompted(path)
    usage = {"inputTokens": 1.7e308, "outputTokens": 1.7e308}
    received(journal, epoch, {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn", "usage": usage}},
             "session/prompt")  # fmt: skip
    journal.close()
    data = page_data(view.render_html(path))
    assert data["turns"][0]["tokens"] == 1.7976931348623157e308
    assert any("input and output tokens add up past a double's range" in note for note in data["notes"])


def test_a_questions_form_fields_count_against_the_turns_bound(tmp_path: Path) -> None:
    path = tmp_path / "forms.jsonl"
    journal, epoch = prompted(path)
    properties = {f"{n:03d}" + "f" * 96: {"type": "string", "title": "t" * 100} for n in range(50)}
    form = {"sessionId": "s", "mode": "form", "message": "?", "requestedSchema": {"properties": properties}}
    for n in range(400):  # each question is ~11 KB of fields and one character of message
        ask = {"jsonrpc": "2.0", "id": f"q{n}", "method": "elicitation/create", "params": form}
        received(journal, epoch, ask, None)
    journal.close()
    page = view.render_html(path, max_turn_bytes=8 * 1024)
    size = len(json.dumps(transcript(page, 0)).encode())
    assert size < 8 * 1024 * 2, size  # the bound, and the events' fixed cost: not 400 forms
    assert transcript(page, 0)["cut"]["events"] > 0


def test_the_journal_directory_leaves_symbolic_links_alone_as_journals_does(tmp_path: Path) -> None:
    state = tmp_path / "state"
    journals = state / "tinyacp" / "journals"
    journals.mkdir(parents=True)
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_bytes((JOURNALS / "line-field.jsonl").read_bytes())
    (journals / "20260101T000000Z-demo-0123456789abcdef.jsonl").symlink_to(outside)
    env = {"XDG_STATE_HOME": str(state)}
    done = run(cwd=tmp_path, env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "symbolic links to journals are not followed" in done.stderr
    (journals / "20260102T000000Z-demo-0123456789abcdef.jsonl").write_bytes((JOURNALS / "v0.1.0.jsonl").read_bytes())
    listed = subprocess.run(
        [sys.executable, "-m", "tinyacp", "journals"], capture_output=True, text=True, timeout=TIMEOUT,
        env=dict(os.environ, PYTHONPATH=str(SRC), **env), cwd=tmp_path, check=False,
    )  # fmt: skip
    assert "not journals, left alone: 20260101T000000Z-demo-0123456789abcdef.jsonl" in listed.stdout
    done = run(cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    data = page_data((tmp_path / "tinyacp-view.html").read_text(encoding="utf-8"))
    assert [turn["id"].split(" ")[0] for turn in data["turns"]] == ["20260102T000000Z-demo-0123456789abcdef"] * 2
    assert data["notes"] == [
        "20260101T000000Z-demo-0123456789abcdef.jsonl: a symbolic link, not read (as `tinyacp journals` leaves "
        "links alone)"
    ]


def test_the_commands_write_errors_name_the_output_path_and_an_empty_directory_gets_a_sentence(
    tmp_path: Path,
) -> None:
    target = tmp_path / "no" / "such" / "page.html"
    done = run(JOURNALS / "v0.1.0.jsonl", "-o", target, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert (
        done.stderr
        == f"tinyacp: error: {target}: cannot write the page: its directory {target.parent} does not exist\n"
    )
    done = run(JOURNALS / "v0.1.0.jsonl", "-o", tmp_path, cwd=tmp_path)
    assert (
        done.stderr
        == f"tinyacp: error: {tmp_path}: cannot write the page: this is a directory (name a file, e.g. report.html)\n"
    )
    assert ".tmp" not in done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run(empty, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        f"tinyacp: error: {empty}: this directory holds neither a batch's results.jsonl nor a journal (*.jsonl): "
        "name a batch's output directory, a journal, or a directory of journals\n"
    )


# --------------------------------------------------------------------------------------------------------------
# Batches compared.


def write_batch(out: Path, records: list[dict[str, Any]]) -> Path:
    """A batch directory holding ``records`` (no journals: each row says its transcript is missing)."""
    out.mkdir(parents=True)
    (out / "results.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return out


def outcome(ok: bool, seconds: float, tokens: int, **more: Any) -> dict[str, Any]:
    usage = {"total_tokens": tokens, "cost": {"amount": tokens / 1000, "currency": "USD"}}
    return {"ok": ok, "seconds": seconds, "usage": usage, **more}


def test_batches_compared_are_matched_by_item_with_the_differing_ones_marked_and_totals_per_batch(
    tmp_path: Path,
) -> None:
    failed = {"error": {"type": "AgentTimeout", "message": "no answer in 5 s"}}
    first = write_batch(tmp_path / "claude", [
        {"id": "x", **outcome(True, 1.0, 100)}, {"id": "y", **outcome(False, 5.0, 10, **failed)},
        {"id": 7, **outcome(True, 2.0, 50)}, {"id": "y", "attempt": 2, **outcome(False, 5.0, 10, **failed)},
    ])  # fmt: skip
    second = write_batch(tmp_path / "gemini", [
        {"id": "x", **outcome(True, 3.0, 300)}, {"id": "y", **outcome(True, 4.0, 40)},
        {"id": "w", **outcome(False, 1.0, 1, **failed)},
    ])  # fmt: skip
    page = view.render_html([first, second])
    data = page_data(page)
    assert data["kind"] == "compare" and data["title"] == "claude vs gemini"
    rows = by_id(data)
    assert list(rows) == ["x", "y", "7", "w"]
    assert [rows[name]["differs"] for name in ("x", "y", "7", "w")] == [False, True, True, True]
    assert [side["ok"] if side else None for side in rows["y"]["outs"]] == [False, True]
    assert rows["y"]["outs"][0]["attempts"] == 2 and rows["y"]["outs"][0]["err"].startswith("AgentTimeout: ")
    assert rows["7"]["outs"][1] is None and rows["w"]["outs"][0] is None
    totals = [batch["totals"] for batch in data["batches"]]
    assert [batch["name"] for batch in data["batches"]] == ["claude", "gemini"]
    assert totals[0] == {"items": 3, "ok": 2, "failed": 1, "missing": 1, "okRate": 2 / 3, "median": 2.0,
                         "tokens": 160, "cost": {"USD": 0.16}}  # fmt: skip
    assert (totals[1]["ok"], totals[1]["okRate"], totals[1]["median"], totals[1]["tokens"]) == (2, 2 / 3, 3.0, 341)
    for side in (0, 1):  # each batch's turn of the item, side by side
        assert "events" in json.loads(re.search(rf'id="tx-0-{side}">(.*?)</script>', page).group(1))  # type: ignore[union-attr]
    assert 'id="tx-2-1"' not in page  # 7 is not in the second batch


def test_comparing_names_batches_only_and_same_named_ones_apart(tmp_path: Path) -> None:
    one = write_batch(tmp_path / "a" / "out", [{"id": "x", **outcome(True, 1.0, 1)}])
    two = write_batch(tmp_path / "b" / "out", [{"id": "x", **outcome(True, 1.0, 1)}])
    data = page_data(view.render_html([one, two / "results.jsonl"]))
    assert [batch["name"] for batch in data["batches"]] == ["a/out", "b/out"]
    with pytest.raises(OSError, match=r"not a batch's directory \(it has no results\.jsonl\)"):
        view.render_html([one, JOURNALS / "v0.1.0.jsonl"])
    with pytest.raises(ValueError, match="at least one"):
        view.render_html([])
    assert page_data(view.render_html([one]))["kind"] == "batch"  # one batch in a list is itself


def test_the_pages_one_pass_reader_reads_every_line_as_the_journals_reader_does(newer: Path, tmp_path: Path) -> None:
    from tinyacp._journal import iter_journal, line_message
    from tinyacp._view_model import ViewLine, read_journal_lines

    damaged = tmp_path / "damaged.jsonl"
    lines = newer.read_bytes().split(b"\n")
    odd = [b'{"type":"line","epoch":1,"dir":"in","ts":"","kind":"update","len":3,"msg":{"a":1}}',  # len is wrong
           b'{"type":"line","epoch":1,"dir":"in","ts":"","kind":"update","len":9,"msg":{"a":NaN}}',
           b'{"type":"line","epoch":1,"dir":"in","ts":"","kind":"update","len":10,"msg":{"a":1e999}}',
           b"not json", b'{"type":"line","epoch":1,"line":"{\\"x\\":1}"}']  # fmt: skip
    damaged.write_bytes(b"\n".join([*lines[:5], *odd, b"a\rb", *lines[5:]]))  # a CR ends no line
    long = tmp_path / "long.jsonl"  # past what is read at once: read a line at a time
    long.write_bytes(damaged.read_bytes().replace(b"not json", b"x" * (2 << 20)))
    for path in (newer, damaged, long, *JOURNALS.glob("*.jsonl")):
        fast, slow = list(read_journal_lines(path)), list(iter_journal(path))
        assert [(line.number, line.data, line.record, line.torn) for line in fast] == [
            (line.number, line.data, line.record, line.torn) for line in slow
        ]
        for one, other in zip(fast, slow, strict=True):
            assert isinstance(one, ViewLine)
            if one.message is not None:
                assert other.record is not None and one.message == line_message(other.record)
    assert sum(line.message is not None for line in read_journal_lines(newer)) > 20


def test_files_and_terminals_the_agent_asked_for_show_what_came_of_them_and_who_decided(tmp_path: Path) -> None:
    from helpers.view import answered, requested, serve_decided

    path = tmp_path / "served.jsonl"
    journal, epoch = prompted(path)
    steps: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
        ("fs/read_text_file", {"sessionId": "s", "path": "/w/a.py", "line": 3, "limit": 2},
         {"result": {"content": "x = 1\ny = 2"}}, "policy"),
        ("fs/write_text_file", {"sessionId": "s", "path": "/etc/passwd", "content": "root::0:0"},
         {"error": {"code": -32000, "message": "not allowed"}}, "default-reject"),
        ("terminal/create", {"sessionId": "s", "command": "pytest", "args": ["-q"], "cwd": "/w",
                             "env": [{"name": "CI", "value": "1"}]}, {"result": {"terminalId": "term-1"}}, "policy"),
        ("terminal/wait_for_exit", {"sessionId": "s", "terminalId": "term-1"},
         {"result": {"exitCode": 1, "signal": None}}, "policy"),
        ("terminal/output", {"sessionId": "s", "terminalId": "term-1"},
         {"result": {"output": "z" * 5000 + "\n1 failed", "truncated": False, "exitStatus": {"exitCode": 1}}},
         "policy"),
        ("terminal/release", {"sessionId": "s", "terminalId": "term-1"}, {"result": {}}, "policy"),
    ]  # fmt: skip
    decisions = {
        "fs/write_text_file": {"allowed": False, "decided_by": "default-reject", "reason": "outside the roots",
                               "resolved": "/etc/passwd", "size": 9, "prior": {"exists": True, "size": 120,
                               "sha256": "ab" * 32}},
        "terminal/create": {"allowed": True, "decided_by": "policy", "reason": "", "command_line": "pytest -q"},
    }  # fmt: skip
    for n, (method, params, answer, by) in enumerate(steps):
        requested(journal, epoch, {"jsonrpc": "2.0", "id": f"a{n}", "method": method, "params": params})
        if method in decisions:  # the client's decision, recorded before it acts and answers
            serve_decided(journal, path, epoch, {"id": f"a{n}", "method": method, **decisions[method]})
        answered(journal, epoch, {"jsonrpc": "2.0", "id": f"a{n}", **answer}, by)
    journal.close()
    page = view.render_html(path)
    assert "other" not in kinds(page, 0)  # no record left raw
    read, write, terminal = events(page, 0, "served")
    assert "decision" not in read
    decided = {name: value for name, value in write["decision"].items() if name != "dt"}
    assert decided == {"allowed": False, "by": "default-reject", "reason": "outside the roots",
                       "resolved": "/etc/passwd", "size": 9, "prior": {"exists": True, "size": 120,
                       "sha256": "ab" * 32}}  # fmt: skip
    assert terminal["decision"]["line"] == "pytest -q" and terminal["decision"]["allowed"] is True
    assert (read["m"], read["path"], read["line"], read["limit"], read["x"]) == (
        "fs/read_text_file", "/w/a.py", 3, 2, "x = 1\ny = 2"
    )  # fmt: skip
    assert [(a["by"], a.get("error")) for a in read["answers"]] == [("policy", None)]
    assert (write["path"], write["size"], write["x"]) == ("/etc/passwd", 9, "root::0:0")
    assert write["answers"][0] == {"dt": write["answers"][0]["dt"], "by": "default-reject",
                                   "m": "fs/write_text_file", "error": "not allowed (code -32000)"}  # fmt: skip
    assert (terminal["cmd"], terminal["cwd"], terminal["env"], terminal["tid"]) == ("pytest -q", "/w", ["CI"], "term-1")
    assert terminal["exit"] == [1, ""] and terminal["out"].endswith("z\n1 failed") and terminal["outCut"] > 0
    assert [step[0] for step in terminal["steps"]] == ["terminal/wait_for_exit", "terminal/output", "terminal/release"]
    assert [answer["m"] for answer in terminal["answers"]] == [
        "terminal/create", "terminal/wait_for_exit", "terminal/output", "terminal/release"
    ]  # fmt: skip
    assert "agentline" not in kinds(page, 0)


def test_a_trace_id_on_the_journals_first_record_or_a_batch_record_is_shown_with_the_turn(tmp_path: Path) -> None:
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    path = tmp_path / "traced.jsonl"
    journal, _ = prompted(path)
    journal.close()
    first, rest = path.read_bytes().split(b"\n", 1)
    record = json.loads(first)
    assert record["type"] == "epoch"
    path.write_bytes(json.dumps({**record, "trace_id": trace}).encode() + b"\n" + rest)
    assert page_data(view.render_html(path))["turns"][0]["trace"] == trace
    out = tmp_path / "out"
    out.mkdir()
    records = [{"id": "a", "ok": True, "trace_id": trace}, {"id": "b", "ok": True, "trace_id": "not-hex</script>"}]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    rows = by_id(page_data(view.render_html(out)))
    assert rows["a"]["trace"] == trace and "trace" not in rows["b"]  # only what a trace id can be


def test_the_command_compares_the_batches_it_is_given_and_refuses_a_journal_among_them(tmp_path: Path) -> None:
    one = write_batch(tmp_path / "claude", [{"id": "x", **outcome(True, 1.0, 1)}])
    two = write_batch(tmp_path / "gemini", [{"id": "x", **outcome(False, 2.0, 1)}])
    done = run(one, two, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "tinyacp-view.html\n", "")
    data = page_data((tmp_path / "tinyacp-view.html").read_text(encoding="utf-8"))
    assert data["kind"] == "compare" and [row["differs"] for row in data["turns"]] == [True]
    done = run(one, JOURNALS / "v0.1.0.jsonl", "-o", tmp_path / "x.html", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"tinyacp: error: {JOURNALS / 'v0.1.0.jsonl'}: not a batch's directory (it has no results.jsonl): only "
        "batches can be compared\n"
    )
    assert not (tmp_path / "x.html").exists()


def test_the_page_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path) -> None:
    import gc

    assert gc.isenabled()
    view.render_html(JOURNALS / "v0.1.0.jsonl")
    assert gc.isenabled()
    gc.disable()
    try:
        with pytest.raises(FileNotFoundError):
            view.render_html(tmp_path / "missing")
        assert not gc.isenabled()
    finally:
        gc.enable()


_SERVED = ["fs/read_text_file", "fs/write_text_file", "terminal/create", "terminal/output", "terminal/wait_for_exit",
           "terminal/kill", "terminal/release"]  # fmt: skip
_PARAMS = ["path", "line", "limit", "content", "command", "args", "cwd", "env", "terminalId", "sessionId",
           "outputByteLimit"]  # fmt: skip
_RESULTS = ["content", "terminalId", "output", "truncated", "exitStatus", "exitCode", "signal"]


@settings(max_examples=60, deadline=None)
@given(
    requests=st.lists(
        st.tuples(
            st.sampled_from(_SERVED),
            st.dictionaries(st.sampled_from(_PARAMS), _JSON | st.just("term-1"), max_size=5),
            st.one_of(st.dictionaries(st.sampled_from(_RESULTS), _JSON | st.just("term-1"), max_size=4), _JSON),
            st.booleans(),
        ),
        max_size=6,
    )
)
def test_any_file_or_terminal_request_and_answer_renders_without_a_raw_fallback(
    requests: list[tuple[str, dict[str, Any], Any, bool]],
) -> None:
    import tempfile

    from helpers.view import answered, requested

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "served.jsonl"
        journal, epoch = prompted(path)
        for n, (method, params, result, refused) in enumerate(requests):
            requested(journal, epoch, {"jsonrpc": "2.0", "id": n, "method": method, "params": params})
            answer = {"error": {"code": -32000, "message": result}} if refused else {"result": result}
            answered(journal, epoch, {"jsonrpc": "2.0", "id": n, **answer}, "policy")
        journal.close()
        page = view.render_html(path, max_turn_bytes=4096)
    assert "bad" not in kinds(page, 0)  # each was rendered, none fell back to its raw line
    assert len(json.dumps(transcript(page, 0)).encode()) < 4096 * 7 + 50_000


def test_a_real_run_that_serves_files_and_a_terminal_shows_each_with_its_decision(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("hello\n", encoding="utf-8")
    journal = tinyacp.JsonlJournal(tmp_path / "run.jsonl")
    options = tinyacp.Options(
        command=[sys.executable, "-m", "tinyacp.demo"],
        epoch=journal.begin_epoch(),
        observer=journal,
        serve=tinyacp.Serve(read=True, write=True, terminal=True, commands=["*"]),
        policy=tinyacp.PermissionPolicy(kinds=["read", "edit", "execute"]),
    )
    try:
        with tinyacp.Client(options) as client:
            client.initialize(timeout=TIMEOUT)
            session = client.new_session(work, timeout=TIMEOUT)
            client.prompt(session.id, "with-read with-write with-terminal go", timeout=TIMEOUT)
    finally:
        journal.close()
    page = view.render_html(tmp_path / "run.jsonl")
    read, write, terminal = events(page, 0, "served")
    assert (read["m"], read["path"], read["x"]) == ("fs/read_text_file", str(work / "notes.txt"), "hello\n")
    assert (write["m"], write["decision"]["allowed"], write["decision"]["prior"]["exists"]) == (
        "fs/write_text_file", True, False
    )  # fmt: skip
    assert terminal["cmd"].startswith("ls") and terminal["exit"][0] == 0 and "notes.txt" in terminal["out"]
    for entry in (read, write, terminal):
        assert entry["decision"]["by"] == "policy" and entry["answers"][0]["by"] == "policy"
    assert "other" not in kinds(page, 0) and "agentline" not in kinds(page, 0)
