"""A link the agent asks the person to open (``elicitation/create`` in ``url`` mode): on a terminal the command
advertises it, shows the link sanitized, opens it only with ``--open-urls`` and waits for the person to say they are
done; elsewhere it does not advertise it, and the demo agent puts the link in its reply instead."""

from __future__ import annotations

import json
import sys

from helpers.cli import Cli, Terminal


def initialize_capabilities(cli: Cli, journal: str) -> dict[str, object]:
    for line in (cli.tmp / journal).read_text().splitlines():
        record = json.loads(line)
        message = record.get("msg")
        if record.get("dir") == "out" and isinstance(message, dict) and message.get("method") == "initialize":
            return message["params"]["clientCapabilities"]  # type: ignore[no-any-return]
    raise AssertionError("no initialize in the journal")


def test_on_a_terminal_the_demos_login_link_is_shown_and_enter_says_you_are_done(cli: Cli) -> None:
    terminal = Terminal(cli, "prompt", "-y", "--journal", str(cli.tmp / "run.jsonl"), "with-login")
    terminal.wait_for(b"? the agent asks you to open a link: Sign in to the demo service.")
    terminal.wait_for(b"done there? [Enter] yes  [n] decline: ")
    assert b"https://example.com/tinyacp-demo/login?session=demo-" in terminal.output
    terminal.send(b"\n")
    assert terminal.finish() == 0
    assert b"done, said you" in terminal.output and b"You signed in." in terminal.output
    assert initialize_capabilities(cli, "run.jsonl")["elicitation"] == {"form": {}, "url": {}}


def test_without_a_terminal_links_are_not_advertised_and_the_demo_puts_it_in_its_reply(cli: Cli) -> None:
    done = cli.run("prompt", "-y", "--journal", str(cli.tmp / "run.jsonl"), "with-login")
    assert done.returncode == 0, done.stderr
    assert b"Sign in at https://example.com/tinyacp-demo/login?session=demo-" in done.stdout
    assert b"(this client opens no links)" in done.stdout
    assert initialize_capabilities(cli, "run.jsonl")["elicitation"] == {"form": {}}


def test_open_urls_opens_an_http_link_in_the_browser(cli: Cli) -> None:
    opened = cli.tmp / "opened.txt"
    browser = cli.tmp / "browser"
    browser.write_text(f"#!{sys.executable}\nimport sys\nopen({str(opened)!r}, 'a').write(sys.argv[1] + '\\n')\n")
    browser.chmod(0o755)
    cli.env = dict(cli.env, BROWSER=str(browser))
    terminal = Terminal(cli, "prompt", "-y", "--no-journal", "--open-urls", "with-login")
    terminal.wait_for(b"opened in your browser")
    terminal.wait_for(b"done there? [Enter] yes  [n] decline: ")
    terminal.send(b"\n")
    assert terminal.finish() == 0
    assert opened.read_text().startswith("https://example.com/tinyacp-demo/login?session=demo-")


def test_ctrl_d_at_the_link_declines_it(cli: Cli) -> None:
    terminal = Terminal(cli, "prompt", "-y", "--no-journal", "with-login")
    terminal.wait_for(b"done there? [Enter] yes  [n] decline: ")
    terminal.send(b"\x04")
    assert terminal.finish() == 0
    assert b"declined by you" in terminal.output and b"You did not sign in." in terminal.output
