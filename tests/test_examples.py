"""The programs in ``examples/`` run against the demo agent and do what their docstrings say.

``examples/test_record_replay.py`` is itself a pytest module and runs with the suite (``testpaths``).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tinyacp
from helpers import TESTS, pytest_child_env

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


def test_the_ci_bot_runs_the_tests_in_the_cwd_it_gives_the_agent(tmp_path: Path) -> None:
    # check.py fails only from the project: run from its parent, the bot must still find and run it there.
    project = failing_project(tmp_path / "project")
    tests = f"{sys.executable} check.py"
    args = ("--agent-command", DEMO, "--test-command", tests, "--cwd", str(project), f"--journal={tmp_path / 'j'}")
    done = run_example("ci_bot.py", *args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    journal = (tmp_path / "j").read_text()  # the prompt holds the output of the tests the bot ran
    assert "1 test failed: test_add" in journal and "can't open file" not in journal


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


def first_programs() -> dict[str, str]:
    """The first program as each place that teaches it writes it."""
    root = TESTS.parent

    def block(page: str, heading: str) -> str:
        text = (root / page).read_text(encoding="utf-8")
        return text.split(heading, 1)[1].split("```python\n", 1)[1].split("```", 1)[0]

    docstring = textwrap.dedent(tinyacp.__doc__ or "").split("package:\n\n", 1)[1].split("\n\nProtocol:", 1)[0]
    return {
        "README.md": block("README.md", "## The library in ten lines"),
        "docs/getting-started.md": block("docs/getting-started.md", "## A first program"),
        "docs/library.md": block("docs/library.md", "## A turn, synchronously"),
        "the package docstring": textwrap.dedent(docstring) + "\n",
    }


def test_the_first_program_is_written_one_way_everywhere() -> None:
    programs = first_programs()
    readme = programs.pop("README.md")
    assert "tinyacp.Client(options)" in readme and "observer=journal" in readme
    assert programs == dict.fromkeys(programs, readme)


def test_the_first_program_runs_as_written_in_a_fresh_directory(tmp_path: Path) -> None:
    program = tmp_path / "first.py"
    program.write_text(first_programs()["README.md"])
    (tmp_path / "hello.txt").write_text("hello\n")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("TINYACP_DEMO_STATE_DIR", None)  # as a new user runs it: the demo agent keeps its state where it would
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    done = subprocess.run(
        [sys.executable, str(program)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("end_turn You said: What is in this folder?\n")
    assert "hello.txt" in done.stdout
    shown = subprocess.run(
        [sys.executable, "-m", "tinyacp.cli", "show", "run.jsonl"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "end_turn" in shown.stdout


def test_the_record_replay_example_runs_as_documented_without_pytest_timeout(tmp_path: Path) -> None:
    # `python -m pytest examples/test_record_replay.py` inside the repository, where the repository's settings name
    # pytest-timeout's option: a reader who installed pytest alone has no such plugin (here: disabled).
    env = pytest_child_env(PYTHONPATH=str(SRC))
    command = [sys.executable, "-m", "pytest", "-p", "no:timeout", "-p", "no:xdist", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*command, "-q", "examples/test_record_replay.py"],
        cwd=TESTS.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout and "failed" not in done.stdout


def setup_commands(page: str) -> list[str]:
    """The numbered set-up commands of a page (``# 1. …`` then the command line)."""
    text = (TESTS.parent / page).read_text(encoding="utf-8")
    block = text.split("```sh\n# 1. ", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines()[1:] if line and not line.startswith("#")]


def test_the_readme_and_getting_started_tell_one_install_story() -> None:
    readme = setup_commands("README.md")
    assert len(readme) == 2
    assert setup_commands("docs/getting-started.md") == readme
    assert readme[1].startswith('python3 -m venv .venv && .venv/bin/pip install -e ".[test,ray]" && ')


@pytest.mark.smoke
def test_readme_command_1_runs_the_demo_agent_and_exits_0(tmp_path: Path) -> None:
    install, _, run = setup_commands("README.md")[0].rpartition(" && ")
    assert install == "python3 -m venv .venv && .venv/bin/pip install -e ."
    words = shlex.split(run)
    assert words[0] == ".venv/bin/tinyacp"
    (tmp_path / "hello.txt").write_text("hello\n")
    env = {**os.environ, "PYTHONPATH": str(SRC), "XDG_STATE_HOME": str(tmp_path / "state")}
    done = subprocess.run(
        [sys.executable, "-m", "tinyacp", *words[1:]],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "hello.txt" in done.stdout and "done: end_turn" in done.stderr
