"""A CI bot: run the tests; if they fail, ask a coding agent to fix them; fail the job if the agent was blocked.

    python examples/ci_bot.py --agent-command "npx -y @agentclientprotocol/claude-agent-acp@0.101.0" \\
        --allow-kind read --allow-kind edit --test-command "python -m pytest -x -q" --journal ci-bot.jsonl

The job's exit status says what happened, so a pipeline can act on it:

- 0: the tests passed, before or after the agent's turn;
- 1: the agent's turn ended but the tests still fail;
- 2: the agent was blocked: it asked for a tool call that no rule allowed (the job never waits for a person), or
  its turn did not end normally (a refusal, a timeout, a limit, an error).

Every line of the conversation goes to the journal first (``tinyacp show ci-bot.jsonl`` reads it back), so a blocked
run can be audited. Only the requests the agent chooses to ask pass through the rules: run the bot where the agent
may do no harm (see the docs: tinyacp is not a sandbox).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from collections.abc import Sequence

import tinyacp

PASSED, STILL_FAILING, BLOCKED = 0, 1, 2


class Blocked(tinyacp.JsonlJournal):
    """The journal, plus a list of the tool calls that were not allowed."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.refused: list[str] = []

    def on_permission_decision(self, request: tinyacp.PermissionRequest) -> None:
        super().on_permission_decision(request)  # recorded before the answer reaches the agent
        if not request.allowed:
            self.refused.append(f"{request.tool_call.title} [{request.tool_call.kind}]: {request.reason}")


def run_tests(command: Sequence[str], cwd: str) -> subprocess.CompletedProcess[str]:
    """Run the test command in the repository the agent works in; its output is what the agent is shown."""
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)


def prompt_for(test_command: Sequence[str], output: str) -> str:
    tail = output[-8000:]  # the end of the output holds the failures and the summary
    return (
        f"The test command `{shlex.join(test_command)}` fails. Find the cause and fix the code (not the tests).\n\n"
        f"The end of its output:\n\n{tail}"
    )


def ask_agent(args: argparse.Namespace, prompt: str) -> int:
    """One turn of the agent; BLOCKED if it asked for something no rule allowed or did not end its turn."""
    journal = Blocked(args.journal)
    options = tinyacp.Options(
        command=shlex.split(args.agent_command),
        cwd=args.cwd,
        epoch=journal.begin_epoch(),
        observer=journal,
        policy=tinyacp.PermissionPolicy(kinds=args.allow_kind),
        stderr="tail",
    )
    try:
        with journal, tinyacp.Client(options) as client:
            client.initialize(timeout=args.timeout)
            session = client.new_session(args.cwd, timeout=args.timeout)
            result = client.prompt(session.id, prompt, timeout=args.timeout)
    except tinyacp.TinyAcpError as exc:
        print(f"ci-bot: the agent failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return BLOCKED
    for refused in journal.refused:
        print(f"ci-bot: blocked: {refused}", file=sys.stderr)
    if journal.refused or result.stop_reason != tinyacp.StopReason.END_TURN or result.timed_out:
        print(f"ci-bot: the agent was blocked (stop reason {result.stop_reason})", file=sys.stderr)
        return BLOCKED
    print(result.text)
    return PASSED


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--agent-command",
        default=f"{shlex.quote(sys.executable)} -m tinyacp.demo",
        help="the agent's command line (default: the demo agent)",
    )
    parser.add_argument(
        "--test-command",
        default=f"{shlex.quote(sys.executable)} -m pytest -x -q",
        help="the tests to run, before and after the agent's turn (default: pytest -x -q)",
    )
    parser.add_argument("--allow-kind", action="append", default=[], help="tool kinds the agent may use")
    parser.add_argument("--cwd", default=".", help="the repository: where the tests and the agent run (default: .)")
    parser.add_argument("--journal", default="ci-bot.jsonl", help="the journal file (default: ci-bot.jsonl)")
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds for each call to the agent (default 1800)"
    )
    args = parser.parse_args(argv)

    test_command = shlex.split(args.test_command)
    before = run_tests(test_command, args.cwd)
    if before.returncode == 0:
        print("ci-bot: the tests pass; nothing to fix")
        return PASSED
    verdict = ask_agent(args, prompt_for(test_command, before.stdout + before.stderr))
    if verdict == BLOCKED:
        return BLOCKED
    after = run_tests(test_command, args.cwd)
    if after.returncode != 0:
        print("ci-bot: the agent's turn ended, but the tests still fail", file=sys.stderr)
        return STILL_FAILING
    print("ci-bot: the tests pass after the agent's turn")
    return PASSED


if __name__ == "__main__":
    sys.exit(main())
