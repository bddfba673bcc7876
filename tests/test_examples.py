"""The programs in ``examples/`` run against the demo agent and do what their docstrings say.

``examples/test_record_replay.py`` is itself a pytest module and runs with the suite (``testpaths``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import TESTS

EXAMPLES = TESTS.parent / "examples"
SRC = TESTS.parent / "src"
DEMO = f"{sys.executable} -m tinyacp.demo"


def run_example(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    command = [sys.executable, str(EXAMPLES / name), *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def failing_project(root: Path) -> Path:
    root.mkdir()
    (root / "check.py").write_text("import sys\nsys.exit('1 test failed: test_add')\n")
    return root


def test_the_ci_bot_fails_the_job_when_the_agent_was_blocked(tmp_path: Path) -> None:
    project = failing_project(tmp_path / "project")
    journal = tmp_path / "bot.jsonl"
    tests = f"{sys.executable} check.py"
    done = run_example(
        "ci_bot.py", "--agent-command", DEMO, "--test-command", tests, f"--journal={journal}", cwd=project
    )
    assert done.returncode == 2, done.stderr
    assert "ci-bot: blocked: Read files in" in done.stderr
    decisions = [json.loads(line) for line in journal.read_text().splitlines() if '"decision"' in line]
    assert [d["decided_by"] for d in decisions if d.get("type") == "decision"] == ["default-reject"]


def test_the_ci_bot_reports_tests_still_failing_when_the_agent_was_not_blocked(tmp_path: Path) -> None:
    project = failing_project(tmp_path / "project")
    tests = f"{sys.executable} check.py"
    args = ("--agent-command", DEMO, "--test-command", tests, "--allow-kind", "read", f"--journal={tmp_path / 'j'}")
    done = run_example("ci_bot.py", *args, cwd=project)
    assert done.returncode == 1, done.stderr
    assert "I read 1 file" in done.stdout
    assert "the tests still fail" in done.stderr


def test_the_ci_bot_starts_no_agent_when_the_tests_pass(tmp_path: Path) -> None:
    done = run_example("ci_bot.py", "--agent-command", "no-such-agent", "--test-command", "true", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "ci-bot: the tests pass; nothing to fix\n")


def test_the_eval_harness_grades_every_prompt_and_journals_each_turn(tmp_path: Path) -> None:
    out = tmp_path / "out"
    prompts = EXAMPLES / "eval_prompts.jsonl"
    done = run_example("eval_harness.py", str(prompts), f"--out={out}", "--agent-command", DEMO, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    ids = [json.loads(line)["id"] for line in prompts.read_text().splitlines()]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["id"], r["ok"]) for r in records] == [(i, True) for i in ids]
    assert all((out / "journals" / f"{i}.jsonl").stat().st_size > 0 for i in ids)
    assert done.stdout.endswith(f"{len(ids)}/{len(ids)} passed\n")


def test_the_eval_harness_fails_when_a_reply_misses_what_is_expected(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"id": "x", "prompt": "hi", "expect": ["not in the reply"]}\n')
    done = run_example(
        "eval_harness.py", str(prompts), f"--out={tmp_path / 'out'}", "--agent-command", DEMO, cwd=tmp_path
    )
    assert done.returncode == 1
    assert "FAIL x" in done.stdout


def test_the_readmes_library_in_ten_lines_runs(tmp_path: Path) -> None:
    readme = (TESTS.parent / "README.md").read_text(encoding="utf-8")
    (code,) = readme.split("```python\n")[1:]  # the one Python block
    program = tmp_path / "ten_lines.py"
    program.write_text(code.split("```")[0])
    (tmp_path / "hello.txt").write_text("hello\n")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, str(program)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("end_turn You said: What is in this folder?\n")
    assert "hello.txt" in done.stdout
    assert (tmp_path / "run.jsonl").stat().st_size > 0
