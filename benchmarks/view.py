"""What a page of ``tinyacp view`` costs for big batches: ``python -m benchmarks.view``.

A batch of real demo-agent turns is run once (``--real`` turns: most allowed to read, some rejected by the default
policy, some whose agent crashes, some past their timeout) and copied, records and journals under new ids, up to
each size (1,000 and 10,000 turns by default), so every size holds the same mix. For each size: the time to write
the page (``tinyacp.view.write_html``, wall clock and this process's CPU time) and its size (whole and per turn),
then in headless Chromium (the system's, driven by Playwright) the time to open it from its file (from navigation to
the page's script done, its first rows drawn, and to the largest paint after it), to filter it by outcome and by
text, to sort it, and to open one turn, and the JavaScript heap. Each browser figure is
the median of ``--rounds`` fresh pages (with the lowest and highest). The in-page times are taken by the page's
clock around the event that does the work, with a forced layout after it; the text filter includes the page's 80 ms
pause for more typing. Nothing here asserts a time.

``--screenshot FILE`` writes instead the picture of a small demo batch for the docs (a turn opened).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import tinyacp
from tinyacp import view
from tinyacp.batch import run_batch

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
"""How this benchmark and the page's browser tests (tests/test_view_browser.py) run Chromium: headless, with
nothing of its own reaching the network."""
WAIT_MS = 600_000
CRASH = "import sys; sys.stderr.write('the agent fell over\\n'); sys.exit(3)"


def real_batch(out: Path, work: Path, turns: int) -> None:
    """``turns`` real turns of the demo agent in ``out``: 70% allowed to read, 20% rejected, 5% crashed, 5% past
    their timeout."""
    work.mkdir(parents=True, exist_ok=True)
    for name in ("README.md", "setup.py", "main.py"):
        (work / name).write_text(f"# {name}\n" * 20, encoding="utf-8")
    allowed, rejected, crashed = int(turns * 0.7), int(turns * 0.2), max(1, int(turns * 0.05))
    slow = max(1, turns - allowed - rejected - crashed)
    read = tinyacp.PermissionPolicy(["read"])
    prompts = ["What is in this folder?", "Summarise the files here.", "Which file is the largest?"]
    items: list[dict[str, Any]] = [{"id": f"read-{i}", "prompt": prompts[i % 3]} for i in range(allowed)]
    run_batch(items, out, agent="demo", cwd=work, policy=read, timeout=120, concurrency=4)
    items = [{"id": f"rejected-{i}", "prompt": "Read the folder, if you may."} for i in range(rejected)]
    items += [{"id": f"crash-{i}", "prompt": "hello", "agent": [sys.executable, "-c", CRASH]} for i in range(crashed)]
    items += [{"id": f"slow-{i}", "prompt": "wait", "agent": "demo --delay 2", "timeout": 1.5} for i in range(slow)]
    run_batch(items, out, agent="demo", cwd=work, timeout=120, concurrency=4)


def replicate(base: Path, out: Path, size: int) -> None:
    """A batch of ``size`` turns in ``out``: the records and journals of ``base``, again and again, under new ids."""
    records = [json.loads(line) for line in (base / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    (out / "journals").mkdir(parents=True)
    lines = []
    for n in range(size):
        record = dict(records[n % len(records)])
        source = base / "journals" / Path(record["journal"]).name
        record["id"] = f"{record['id']}-{n}"
        target = out / "journals" / f"{record['id']}.jsonl"
        shutil.copyfile(source, target)
        record["journal"] = str(target)
        lines.append(json.dumps(record) + "\n")
    (out / "results.jsonl").write_text("".join(lines), encoding="utf-8")


@contextmanager
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium")
    if executable is None:
        raise SystemExit("this benchmark needs Chromium: apt-get install chromium")
    with sync_playwright() as playwright:
        # Precise heap figures: without the flag Chromium rounds them to coarse buckets.
        args = [*CHROMIUM_ARGS, "--enable-precise-memory-info"]
        browser = playwright.chromium.launch(executable_path=executable, args=args, timeout=60_000)
        try:
            yield browser
        finally:
            browser.close()


def open_page(browser: Any, html: Path, viewport: dict[str, int] | None = None) -> Any:
    """The page, opened from its file as a person would."""
    page = browser.new_page(viewport=viewport or {"width": 1280, "height": 900})
    page.set_default_timeout(WAIT_MS)
    page.goto(html.resolve().as_uri(), timeout=WAIT_MS)
    page.wait_for_selector("body[data-ready]", state="attached", timeout=WAIT_MS)
    return page


# Each measure runs in the page: the event that does the work, then a read of the layout, by the page's clock.
_CHANGE = """([selector, value]) => {
  const t = performance.now(); const field = document.querySelector(selector);
  field.value = value; field.dispatchEvent(new Event('change')); document.body.offsetHeight;
  return performance.now() - t; }"""
_TYPE = """(text) => new Promise(resolve => {
  const t = performance.now(); const field = document.getElementById('filter');
  const seen = new MutationObserver(() => { seen.disconnect(); document.body.offsetHeight;
    resolve(performance.now() - t); });
  seen.observe(document.getElementById('count'), {childList: true, characterData: true, subtree: true});
  field.value = text; field.dispatchEvent(new Event('input')); })"""
_CLICK = """(selector) => {
  const t = performance.now(); document.querySelector(selector).click(); document.body.offsetHeight;
  return performance.now() - t; }"""
_OPENED = """() => new Promise(resolve => {
  const ready = performance.getEntriesByName('tinyacp-view-ready')[0].startTime;
  new PerformanceObserver(list => { const all = list.getEntries(); resolve([ready, all[all.length - 1].startTime]); })
    .observe({type: 'largest-contentful-paint', buffered: true}); })"""


def measure_page(browser: Any, html: Path) -> dict[str, float]:
    page = open_page(browser, html)
    try:
        ready, painted = page.evaluate(_OPENED)
        figures = {"ready": ready, "painted": painted}
        figures["outcome"] = page.evaluate(_CHANGE, ["#outcome-filter", "failed"])
        page.evaluate(_CHANGE, ["#outcome-filter", ""])
        figures["text"] = page.evaluate(_TYPE, "rejected")
        page.evaluate(_TYPE, "")
        figures["sort"] = page.evaluate(_CLICK, "#turn-table th[data-key=secs] button")
        figures["turn"] = page.evaluate(_CLICK, "#turn-table tbody tr")
        figures["heap"] = page.evaluate("performance.memory.usedJSHeapSize") / 2**20
        return figures
    finally:
        page.close()


def run(sizes: list[int], real: int, rounds: int, work: Path) -> list[str]:
    base = work / "base"
    started = time.perf_counter()
    real_batch(base, work / "project", real)
    print(f"{real} real demo turns in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    rows = []
    with chromium() as browser:
        for size in sizes:
            out = work / f"batch-{size}"
            replicate(base, out, size)
            started, cpu = time.perf_counter(), time.process_time()
            html = view.write_html(out)
            written, cpu = time.perf_counter() - started, time.process_time() - cpu
            samples = [measure_page(browser, html) for _ in range(rounds)]

            def cell(key: str, digits: int = 0, unit: str = " ms", samples: list[dict[str, float]] = samples) -> str:
                values = [sample[key] for sample in samples]
                low, mid, high = min(values), statistics.median(values), max(values)
                return f"{mid:.{digits}f}{unit} ({low:.{digits}f}-{high:.{digits}f})"

            rows.append(
                [
                    f"{size:,}",
                    f"{html.stat().st_size / 2**20:.1f} MiB",
                    f"{written:.2f} s ({cpu:.2f} s CPU)",
                    f"{html.stat().st_size / size / 1024:.1f} KiB",
                    cell("ready"),
                    cell("painted"),
                    cell("outcome"),
                    cell("text"),
                    cell("sort"),
                    cell("turn"),
                    cell("heap", 0, " MiB"),
                ]
            )
            print(f"{size} turns measured", file=sys.stderr)
    header = [
        "turns",
        "page",
        "write_html (CPU)",
        "page per turn",
        "open: first rows drawn",
        "open: painted",
        "filter: failed",
        "filter: text (+80 ms pause)",
        "sort by seconds",
        "open one turn",
        "JS heap",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def screenshot(path: Path) -> None:
    """The docs' picture: a small demo batch, its page, one turn opened."""
    root = Path(tempfile.gettempdir()) / "tinyacp-view-demo"
    shutil.rmtree(root, ignore_errors=True)
    try:
        real_batch(root / "runs", root / "project", 12)
        html = view.write_html(root / "runs")
        with chromium() as browser:
            page = open_page(browser, html, {"width": 1000, "height": 1350})
            page.locator("#turn-table tbody tr", has_text="read-0").first.click()
            page.wait_for_selector("#turn:not([hidden])")
            page.evaluate("window.scrollTo(0, 0)")
            page.screenshot(path=str(path))  # the viewport: the overview, the table and the turn's start
            page.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="turns per page, comma-separated")
    parser.add_argument("--real", type=int, default=200, help="real demo turns, copied up to each size")
    parser.add_argument("--rounds", type=int, default=3, help="fresh pages per size")
    parser.add_argument("--screenshot", type=Path, metavar="FILE", help="write the docs' picture instead")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tinyacp-view-bench-") as work:
        os.environ.setdefault("TINYACP_DEMO_STATE_DIR", os.path.join(work, "demo-sessions"))  # not the user's
        if args.screenshot is not None:
            screenshot(args.screenshot)
            return 0
        lines = run([int(size) for size in args.sizes.split(",")], args.real, args.rounds, Path(work))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
