"""``tinyacp view``'s page in a real browser: headless Chromium (the system's, Debian's ``chromium``) driven by
Playwright. The pages are made from real runs of the demo agent (tests/helpers/view.py). Every request the page makes
is intercepted: the page itself is the only one answered, and any other fails the test; so does any console error.

Without Chromium or Playwright these tests are skipped, except where ``TINYACP_REQUIRE_BROWSER=1`` (CI sets it):
there a browser that cannot be had is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from benchmarks.view import CHROMIUM_ARGS

import tinyacp
from helpers.view import HOSTILE_FILE, demo_batch, hostile_journal, newer_batch, newer_journal, page_data
from tinyacp import view

WAIT_MS = 15_000
"""Every wait of a test on the page, at most."""

ORIGIN = "http://view.test"
"""Where the page is served from, by the route that answers it: no server, no network."""


def _unavailable(why: str) -> None:
    if os.environ.get("TINYACP_REQUIRE_BROWSER") == "1":  # CI sets it: there a missing browser is a failure
        pytest.fail(f"the browser tests need {why} (TINYACP_REQUIRE_BROWSER=1)")
    pytest.skip(f"the browser tests need {why}")


@pytest.fixture(scope="module")
def browser(batch_page: Path, hostile_page: Path, newer_page: Path, newer_batch_page: Path) -> Iterator[Any]:
    """One headless Chromium for the module (each test opens its own page). The pages are made first: Playwright's
    synchronous API runs an event loop in this thread while the browser is open, and a batch runs one of its own."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable('Playwright: pip install -e ".[test]"')
    executable = shutil.which("chromium")
    if executable is None:
        _unavailable("Chromium: apt-get install chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Loaded:
    """A page of the browser with its record of what happened: the requests, the console's errors."""

    page: Any
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def rows(self) -> list[str]:
        """The ids of the turns the table shows, in order."""
        ids: list[str] = self.page.eval_on_selector_all(
            "#turn-table tbody tr", "rows => rows.map(r => r.getAttribute('data-id'))"
        )
        return ids

    def wait_rows(self, count: int) -> None:
        """Wait until the table shows ``count`` rows (the text filter waits a moment for more typing)."""
        from playwright.sync_api import expect

        expect(self.page.locator("#turn-table tbody tr")).to_have_count(count, timeout=WAIT_MS)

    def open(self, turn: str) -> str:
        """Open the turn from the table; returns the text the turn's section shows."""
        self.page.locator(f'#turn-table tbody tr[data-id="{turn}"]').first.click(timeout=WAIT_MS)
        self.page.wait_for_selector("#turn:not([hidden])", timeout=WAIT_MS)
        text: str = self.page.inner_text("#turn", timeout=WAIT_MS)
        return text


def load(browser: Any, html: Path, fragment: str = "") -> Loaded:
    """Open ``html`` as the only thing the page may load; every other request is counted and refused."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(WAIT_MS)
    loaded = Loaded(page)
    body = html.read_bytes()
    url = f"{ORIGIN}/{html.name}"

    def route(request_route: Any) -> None:
        if request_route.request.url == url and not loaded.requests:
            loaded.requests.append("page")
            request_route.fulfill(status=200, body=body, headers={"content-type": "text/html; charset=utf-8"})
        else:
            loaded.requests.append(request_route.request.url)
            request_route.abort()

    page.route("**/*", route)
    page.on("console", lambda message: loaded.errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: loaded.errors.append(str(error)))
    page.goto(url + fragment, timeout=WAIT_MS)
    page.wait_for_selector("body[data-ready]", timeout=WAIT_MS, state="attached")
    return loaded


@pytest.fixture
def opened(browser: Any) -> Iterator[Any]:
    """Open pages; after the test, each must have made no request but its own and logged no error."""
    pages: list[Loaded] = []

    def make(html: Path, fragment: str = "") -> Loaded:
        pages.append(load(browser, html, fragment))
        return pages[-1]

    yield make
    for loaded in pages:
        assert loaded.requests == ["page"], "the page asked for more than itself"
        assert loaded.errors == [], "the console logged errors"
        assert loaded.page.evaluate("typeof window.__pwned") == "undefined"
        loaded.page.close()


@pytest.fixture(scope="module")
def batch_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("view-browser")
    return view.write_html(demo_batch(base / "out", base / "work"))


@pytest.fixture(scope="module")
def hostile_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("view-browser-hostile")
    journal = hostile_journal(base / "hostile.jsonl", base / "work")
    return view.write_html(journal, base / "hostile.html")


@pytest.fixture(scope="module")
def newer_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with all five newer features (a question answered by the observer, a forced call), then a crafted
    epoch of the newer kinds carrying hostile text."""
    base = tmp_path_factory.mktemp("view-browser-newer")
    return view.write_html(newer_journal(base / "newer.jsonl", base / "work"), base / "newer.html")


@pytest.fixture(scope="module")
def newer_batch_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A batch turn with all five features, and an item tried twice (two rows of one id)."""
    base = tmp_path_factory.mktemp("view-browser-newer-batch")
    return view.write_html(newer_batch(base / "out", base / "work"))


# --------------------------------------------------------------------------------------------------------------
# The table.


def test_the_table_has_a_row_per_turn_and_the_overview_a_row_per_agent(opened: Any, batch_page: Path) -> None:
    loaded = opened(batch_page)
    assert sorted(loaded.rows()) == ["crash-1", "read-1", "read-2", "rejected-1", "slow-1"]
    agents = page_data(batch_page.read_text(encoding="utf-8"))["overview"]["agents"]
    assert loaded.page.locator("#agents tbody tr").count() == len(agents) == 2
    assert loaded.page.locator("#overview svg[role=img]").count() == 3  # a duration chart per agent, one of cost
    assert "5 of 5 matching items shown" in loaded.page.inner_text("#count")
    assert loaded.page.inner_text("#counts") == "5 items (3 ok, 2 failed)"
    demo = loaded.page.locator("#agents tbody tr", has_text="demo").inner_text()
    assert demo.split("\t")[:4] == ["demo", "4", "3", "1"]


def _expected(turns: list[dict[str, Any]], key: str, descending: bool) -> list[str]:
    """The order the page must give: by the value, ties in the file's order, turns without one last."""

    def value(turn: dict[str, Any]) -> Any:
        if key == "attempts":
            return turn.get(key, 1)
        return (1 if turn["ok"] else 0) if key == "ok" else turn.get(key)

    present = [turn for turn in turns if value(turn) is not None]
    missing = [turn for turn in turns if value(turn) is None]
    return [turn["id"] for turn in sorted(present, key=value, reverse=descending) + missing]  # a stable sort


COLUMNS = ["id", "attempts", "agent", "ok", "err", "stop", "subs", "secs", "tools", "allow", "reject", "tokens", "cost"]


@pytest.mark.parametrize("key", COLUMNS)
def test_every_column_sorts_both_ways(opened: Any, batch_page: Path, key: str) -> None:
    loaded = opened(batch_page)
    turns = page_data(batch_page.read_text(encoding="utf-8"))["turns"]
    header = loaded.page.locator(f"#turn-table th[data-key={key}] button")
    header.click()
    assert loaded.rows() == _expected(turns, key, descending=False)
    assert loaded.page.get_attribute(f"#turn-table th[data-key={key}]", "aria-sort") == "ascending"
    header.click()
    assert loaded.rows() == _expected(turns, key, descending=True)
    assert loaded.page.get_attribute(f"#turn-table th[data-key={key}]", "aria-sort") == "descending"


def test_the_filters_keep_the_turns_of_a_text_an_agent_and_an_outcome(opened: Any, batch_page: Path) -> None:
    loaded = opened(batch_page)
    page = loaded.page
    page.select_option("#outcome-filter", "failed")
    assert sorted(loaded.rows()) == ["crash-1", "slow-1"]
    page.select_option("#outcome-filter", "ok")
    assert sorted(loaded.rows()) == ["read-1", "read-2", "rejected-1"]
    page.select_option("#outcome-filter", "")
    agent = page_data(batch_page.read_text(encoding="utf-8"))["turns"]
    crashed = next(turn["agent"] for turn in agent if turn["id"] == "crash-1")
    page.select_option("#agent-filter", crashed)
    assert loaded.rows() == ["crash-1"]
    page.select_option("#agent-filter", "")
    page.fill("#filter", "AgentTimeout")  # the text of an error
    loaded.wait_rows(1)
    assert loaded.rows() == ["slow-1"]
    page.fill("#filter", "READ-")
    loaded.wait_rows(2)
    assert sorted(loaded.rows()) == ["read-1", "read-2"]
    page.fill("#filter", "nothing matches this")
    loaded.wait_rows(0)
    assert page.inner_text("#count").startswith("0 of 0 matching items")


# --------------------------------------------------------------------------------------------------------------
# One turn.


def test_an_opened_turn_shows_its_prompt_messages_tool_call_and_the_decision(opened: Any, batch_page: Path) -> None:
    loaded = opened(batch_page)
    text = loaded.open("read-1")
    assert "What is in this folder?" in text
    assert "You said: What is in this folder?" in text
    assert "tool call Read [read] Read files in" in text and "notes.txt" in text and "completed" in text
    assert "permission asked: Read files in" in text
    assert "→ allowed (option allow “Allow”, allow_once) · decided by policy" in text
    assert "stop reason: end_turn" in text
    thought = loaded.page.locator("#turn details.thought").first
    assert thought.get_attribute("open") is None  # folded
    assert not thought.locator("pre").is_visible()
    thought.locator("summary").click()
    assert thought.locator("pre").is_visible()
    assert loaded.page.locator("#turn .time").first.inner_text().startswith("+")


def test_the_address_names_the_opened_turn_and_opens_it_again(opened: Any, batch_page: Path) -> None:
    loaded = opened(batch_page)
    loaded.open("rejected-1")
    assert loaded.page.evaluate("location.hash") == "#rejected-1"
    loaded.page.keyboard.press("Escape")
    assert loaded.page.locator("#turn").is_hidden() and loaded.page.evaluate("location.hash") == ""
    again = opened(batch_page, "#rejected-1")
    assert again.page.locator("#turn").is_visible() and "Item rejected-1" in again.page.inner_text("#turn")
    assert opened(batch_page, "#no-such-turn%").page.locator("#turn").is_hidden()


def test_the_demo_agents_notice_shows_on_its_turn(opened: Any, batch_page: Path) -> None:
    text = opened(batch_page).open("read-2")
    assert "notice (warning)\nModel fallback" in text and "compaction compaction-1 · completed" in text
    assert "update compaction_update" not in text  # not as raw JSON


# --------------------------------------------------------------------------------------------------------------
# Today's ACP on a turn.


def test_a_subagents_work_shows_under_its_title_apart_from_its_parents(opened: Any, newer_page: Path) -> None:
    loaded = opened(newer_page)
    text = loaded.open("newer #1")
    child = loaded.page.locator("#turn section.child")
    assert child.count() == 1
    own = child.inner_text()
    assert own.startswith("+") and "subagent File reader · idle (end_turn)" in own
    assert "Lists the files in" in own and "running +" in own and "→ idle (end_turn) +" in own
    assert "tool call Read [read] Read files in" in own and "notes.txt" in own
    assert "permission asked: Read files in" in own and "[read] · tool Read" in own and "· decided by policy" in own
    turn = loaded.page.locator("#turn > ol.events > li")
    kinds = turn.evaluate_all("items => items.map(item => item.className)")
    assert "event k-child" in kinds and "event k-tool" not in kinds and "event k-perm" not in kinds
    assert child.locator("li.k-msg").count() == 1  # the child's reply, under the child
    assert "message " in text and ".sub-1 (File reader)" in text  # the messages between the two, named
    assert "subagents\n1" in loaded.page.inner_text("#turn dl.facts")


def test_compaction_plans_questions_and_forced_calls_show_on_their_turn(opened: Any, newer_page: Path) -> None:
    loaded = opened(newer_page)
    text = loaded.open("newer #1")
    assert "compaction compaction-1 · completed" in text and "in_progress +" in text and "summary" in text
    assert "plan plan-1 (4 updates, last +" in text and "· removed +" in text
    assert "[completed] Read the files in the working directory (high)" in text
    assert "question (form)" in text and "How should I summarise the files?" in text
    assert "name (string, required): Your name" in text and "sizes (boolean): Show the sizes" in text
    assert "→ accept · decided by observer" in text and '"name":"Ada <b>"' in text
    assert "session/set_mode" in text and "sent with force=True: the agent did not advertise it" in text
    assert loaded.page.locator("#turn .forced").count() == 1
    assert loaded.page.locator("#turn b").count() == 0  # the answer's markup is text


def test_hostile_newer_kinds_show_as_text_and_a_url_is_never_a_link(opened: Any, newer_page: Path) -> None:
    loaded = opened(newer_page)
    text = loaded.open("newer #2")
    assert "compaction c<1> · failed" in text and "summary <script>window.__pwned=1</script>" in text
    assert "in the file javascript:alert(1)" in text
    assert 'subagent Kid <script>window.__pwned=1</script></script><img src=x onerror="window.__pwned=2">' in text
    assert "question (url)" in text and "URL (not opened): javascript:window.__pwned=6" in text
    assert "→ decline · decided by default-decline" in text
    child = loaded.page.locator("#turn section.child")
    assert child.locator("li.k-ask").count() == 1 and child.locator("li.k-msg").count() == 1
    counts = loaded.page.evaluate(
        "[document.querySelectorAll('img, a, iframe, object, embed, link[href]:not([rel=icon])').length,"
        " document.querySelectorAll('[onerror], [onclick], [src], [href]:not([rel=icon])').length]"
    )
    assert counts == [0, 0]


def test_an_item_tried_twice_is_one_row_its_earlier_attempt_inside_its_turn(
    opened: Any, newer_batch_page: Path
) -> None:
    loaded = opened(newer_batch_page)
    assert sorted(loaded.rows()) == ["again", "newer-1"]
    assert loaded.page.inner_text("#counts") == "2 items (1 ok, 1 failed) · 3 attempts (the latest decides)"
    row = loaded.page.locator('#turn-table tbody tr[data-id="again"]')
    assert row.locator("td").nth(1).inner_text() == "2"  # its tries
    assert row.locator("td.err").inner_text().startswith("AgentExited: ")  # its reason, without a click
    text = loaded.open("again")
    assert loaded.page.evaluate("location.hash") == "#again"
    assert "attempt\n2 of 2 (the latest; the earlier ones are below)" in loaded.page.inner_text("#turn dl.facts")
    earlier = loaded.page.locator("#turn details.attempt")
    assert earlier.count() == 1 and earlier.get_attribute("open") is None
    assert earlier.locator("summary").inner_text().startswith("earlier attempt 1: failed · AgentExited: ")
    earlier.locator("summary").click()
    assert "the agent fell over" in earlier.inner_text() and "epoch 1" in earlier.inner_text()
    assert "epoch 2" in text
    for fragment in ("#again~2", "#again~1", "#again"):  # the addresses of when each attempt was a row
        assert "Item again" in opened(newer_batch_page, fragment).page.inner_text("#turn"), fragment
    newer = opened(newer_batch_page, "#newer-1").page.inner_text("#turn")
    assert "→ decline · decided by default-decline" in newer  # nobody answers a question in a batch


def test_a_rejected_permission_says_so_and_who_decided(opened: Any, batch_page: Path) -> None:
    text = opened(batch_page).open("rejected-1")
    assert "→ rejected (option reject “Reject”, reject_once) · decided by default-reject" in text
    assert "failed" in text  # the tool call the agent then gave up


def test_a_failed_turn_shows_its_error_and_the_agents_stderr(opened: Any, batch_page: Path) -> None:
    loaded = opened(batch_page)
    text = loaded.open("crash-1")
    assert "AgentExited" in text and "the agent's stderr (tail)" in text
    assert "the agent fell over: <b>bold</b>" in text  # as text, not as markup
    assert loaded.page.locator("#turn b").count() == 0
    assert "AgentTimeout" in loaded.open("slow-1")


# --------------------------------------------------------------------------------------------------------------
# Hostile content, and a page that cannot reach anything.


def test_hostile_text_shows_as_text_and_runs_nothing(opened: Any, hostile_page: Path) -> None:
    loaded = opened(hostile_page)
    page = loaded.page
    first = loaded.open("hostile #1")
    assert '<script>window.__pwned=1</script></script><img src=x onerror="window.__pwned=2">' in first
    assert "\u27e8U+202E\u27e9evil" in first and "\u27e8U+001B\u27e9[31mred" in first
    assert HOSTILE_FILE in first  # a file name from the agent's listing
    second = loaded.open("hostile #2")
    assert "notice (warning)" in second and "Model fallback <script>" in second
    assert "tool call edit_file [edit] Edit <script>" in second
    assert "- old line" in second and "+ new line" in second and "diff of javascript:alert(1)" in second
    assert "update hologram_update" in second and '{"beam":"<script>' in second
    assert page.locator("#turn del").inner_text().strip() == "- old line"
    assert page.locator("#turn ins").inner_text().strip() == "+ new line"
    counts = page.evaluate(
        "[document.querySelectorAll('img, a, iframe, object, embed, link[href]:not([rel=icon])').length,"
        " document.querySelectorAll('script').length, document.querySelectorAll('[onerror], [onclick]').length]"
    )
    assert counts == [0, 4, 0]  # the data of the page and of its two turns, and the page's own script


def test_the_policy_stops_a_request_even_from_script_on_the_page(browser: Any, hostile_page: Path) -> None:
    loaded = load(browser, hostile_page)
    try:
        outcome = loaded.page.evaluate("fetch('http://elsewhere.test/x').then(() => 'sent', () => 'refused')")
        loaded.page.evaluate("new Image().src = 'http://elsewhere.test/pixel.png'")
        loaded.page.evaluate("document.body.appendChild(document.createElement('link'))")
        assert outcome == "refused"
        assert loaded.requests == ["page"]  # neither reached the network (nor the route)
        assert all("Content Security Policy" in error for error in loaded.errors) and loaded.errors
    finally:
        loaded.page.close()


def test_a_damaged_journal_says_what_it_skipped(opened: Any, hostile_page: Path, tmp_path: Path) -> None:
    journal = next(hostile_page.parent.glob("*.jsonl"))
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(journal.read_bytes().replace(b"\n", b"\nnot a record\n", 1) + b'{"torn')
    loaded = opened(view.write_html(damaged, tmp_path / "damaged.html"))
    notes = loaded.page.locator("#notes")
    notes.locator("summary").click()
    assert "line 2 is not a record" in notes.inner_text() and "torn" in notes.inner_text()
    assert "journal line 2 is not a record" in loaded.open("damaged #1")


@pytest.mark.slow
def test_the_benchmark_measures_a_page_in_the_browser(browser: Any) -> None:
    """``python -m benchmarks.view`` at a small size, so that it does not rot (the browser fixture only says that
    Chromium is there)."""
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root / "src"))
    command = [sys.executable, "-m", "benchmarks.view", "--sizes", "30", "--real", "4", "--rounds", "1"]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| 30 |")]
    assert len(rows) == 1 and rows[0].count(" ms (") == 6 and rows[0].endswith(" |") and " MiB (" in rows[0]


def test_a_cut_transcript_says_so_on_the_turn(opened: Any, hostile_page: Path, tmp_path: Path) -> None:
    journal = next(hostile_page.parent.glob("*.jsonl"))
    loaded = opened(view.write_html(journal, tmp_path / "cut.html", max_turn_bytes=300))
    text = loaded.open("hostile #1")
    cut = loaded.page.inner_text("#cut")
    assert cut.startswith("This transcript was cut at 300 bytes of text (--max-turn-bytes): ") and cut in text
    assert "You said:" not in text  # the reply came after the cut: it is in the journal, not on the page


# --------------------------------------------------------------------------------------------------------------
# Batches compared, one's own runs, what an audit reads.


@pytest.fixture
def compare_page(batch_page: Path, tmp_path: Path) -> Path:
    """The demo batch beside a copy of it in which read-1 failed and crash-1 was never run."""
    other = tmp_path / "other"
    other.mkdir()
    lines = []
    for line in (batch_page.parent / "results.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["id"] == "crash-1":
            continue
        if record["id"] == "read-1":
            record.update(ok=False, stop_reason=None, error={"type": "AgentTimeout", "message": "no answer in 5 s"})
        lines.append(json.dumps(record) + "\n")
    (other / "results.jsonl").write_text("".join(lines), encoding="utf-8")
    return view.write_html([batch_page.parent, other], tmp_path / "compare.html")


def test_batches_compared_show_the_differing_items_first_their_totals_and_turns_side_by_side(
    opened: Any, compare_page: Path
) -> None:
    loaded = opened(compare_page)
    page = loaded.page
    assert loaded.rows()[:2] == ["read-1", "crash-1"]  # the items whose outcome differs, first
    assert sorted(loaded.rows()[2:]) == ["read-2", "rejected-1", "slow-1"]
    assert page.inner_text("#counts") == "5 items in 2 batches, 2 differ in outcome"
    totals = page.locator("#batches tbody tr").all_inner_texts()
    assert [row.split("\t")[:6] for row in totals] == [
        ["out", "5", "3", "2", "0", "60.0 %"],
        ["other", "4", "2", "2", "1", "50.0 %"],
    ]
    read = page.locator('#turn-table tbody tr[data-id="read-1"] td')
    assert read.nth(1).inner_text() == "differs" and read.nth(2).inner_text().startswith("ok · ")
    assert (
        read.nth(3).inner_text().startswith("failed · ")
        and "AgentTimeout: no answer in 5 s" in read.nth(3).inner_text()
    )
    assert page.locator('#turn-table tbody tr[data-id="crash-1"] td').nth(3).inner_text() == "—"
    page.select_option("#outcome-filter", "differs")
    assert loaded.rows() == ["read-1", "crash-1"]
    page.select_option("#outcome-filter", "same")
    assert sorted(loaded.rows()) == ["read-2", "rejected-1", "slow-1"]
    assert page.locator("#agent-filter").is_hidden()
    page.select_option("#outcome-filter", "")
    text = loaded.open("read-1")
    assert text.startswith("Item read-1")
    sides = page.locator("#turn .side > section")
    assert sides.count() == 2
    first, second = sides.nth(0).bounding_box(), sides.nth(1).bounding_box()
    assert first is not None and second is not None
    assert second["x"] >= first["x"] + first["width"] and abs(second["y"] - first["y"]) < 2  # one beside the other
    assert "You said: What is in this folder?" in sides.nth(0).inner_text()
    assert "AgentTimeout" in sides.nth(1).inner_text() and "You said:" in sides.nth(1).inner_text()
    assert "not in this batch" in loaded.open("crash-1")


def test_the_page_of_ones_runs_tells_its_rows_apart(opened: Any, newer_page: Path) -> None:
    loaded = opened(newer_page)
    heads = loaded.page.locator("#turn-table thead th").all_inner_texts()
    assert [head.rstrip("↕▲▼").strip() for head in heads[:6]] == [
        "started",
        "agent",
        "session",
        "prompt",
        "outcome",
        "error",
    ]
    cells = loaded.page.locator('#turn-table tbody tr[data-id="newer #1"] td').all_inner_texts()
    assert re.fullmatch(r"20\d\d-\d\d-\d\d \d\d:\d\d:\d\d", cells[0]) and cells[1] == "tinyacp-demo"
    assert cells[2].startswith("demo-") and cells[3].startswith("with-notice with-compaction")


def test_an_audit_sees_replaced_content_served_files_and_terminals_and_who_decided(opened: Any, tmp_path: Path) -> None:
    from helpers.view import answered, asked, prompt, requested, serve_decided, update

    path = tmp_path / "audit.jsonl"
    journal = tinyacp.JsonlJournal(path)
    epoch = journal.begin_epoch()
    prompt(journal, epoch, 1, "fix it", session_id="s")
    diff = {"type": "diff", "path": "a.py", "oldText": "x = 1", "newText": "x = 2"}
    update(
        journal, epoch, 1, {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Edit a.py", "content": [diff]}
    )
    options = [{"optionId": "y", "name": "Yes", "kind": "allow_once"}]
    params = {"sessionId": "s", "toolCall": {"toolCallId": "t1", "content": [diff]}, "options": options}
    asked(journal, epoch, {"jsonrpc": "2.0", "id": 0, "method": "session/request_permission", "params": params})
    done = {"type": "content", "content": {"type": "text", "text": "edited a.py"}}
    update(journal, epoch, 2, {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
                               "content": [done]})  # fmt: skip
    create = {"sessionId": "s", "command": "pytest", "args": ["-q"], "cwd": "/w"}
    requested(journal, epoch, {"jsonrpc": "2.0", "id": "c", "method": "terminal/create", "params": create})
    decision = {"allowed": True, "decided_by": "policy", "reason": "pytest is allowed", "command_line": "pytest -q"}
    serve_decided(journal, path, epoch, {"id": "c", "method": "terminal/create", **decision})
    answered(journal, epoch, {"jsonrpc": "2.0", "id": "c", "result": {"terminalId": "term-1"}}, "policy")
    wait = {"sessionId": "s", "terminalId": "term-1"}
    requested(journal, epoch, {"jsonrpc": "2.0", "id": "w", "method": "terminal/wait_for_exit", "params": wait})
    answered(journal, epoch, {"jsonrpc": "2.0", "id": "w", "result": {"exitCode": 1}}, "policy")
    journal.close()
    first, rest = path.read_bytes().split(b"\n", 1)  # the journal's first record carries the run's trace id
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    path.write_bytes(json.dumps({**json.loads(first), "trace_id": trace}).encode() + b"\n" + rest)
    loaded = opened(view.write_html(path, tmp_path / "audit.html"))
    text = loaded.open("audit")
    assert f"trace\n{trace}\n" in loaded.page.inner_text("#turn dl.facts")
    assert "what was asked to approve:" in text and re.search(r"content \+\d+\.\d{3} s, replaced \+", text)
    replaced = loaded.page.locator("#turn .replaced")
    assert replaced.locator("del").inner_text().strip() == "- x = 1" and "edited a.py" in text
    assert "terminal pytest -q in /w · exit status 1" in text
    assert "→ allowed · decided by policy: pytest is allowed" in text and "command line pytest -q" in text
    assert "terminal/wait_for_exit +" in text and "→ served terminal/wait_for_exit · decided by policy" in text
